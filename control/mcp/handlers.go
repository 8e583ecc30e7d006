package mcp

import (
	"context"
	"fmt"
	"strings"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/eol"
)

// read serves the read tool: a numbered window, recorded as an observation
// of the file for this session.
func (c *Conn) read(ctx context.Context, in ReadInput) (string, ReadOutput, error) {
	p := control.ReadParams{Path: in.Path, Cwd: c.cfg.Cwd, Session: c.session}
	if in.Offset > 0 {
		p.Offset = &in.Offset
	}
	if in.Limit > 0 {
		p.Limit = &in.Limit
	}
	start := c.cfg.Now()
	r, err := c.cfg.Daemon.Read(ctx, p)
	if err != nil {
		return "", ReadOutput{}, c.explain(ctx, err, ToolRead, in.Path)
	}
	c.markSeen(r.DisplayPath, start, r.Version)
	return renderRead(*r), readOutput(*r), nil
}

// write serves the write tool: the daemon decides the guard from this
// session's observation (create-if-absent when unseen).
func (c *Conn) write(ctx context.Context, in WriteInput) (string, WriteOutput, error) {
	start := c.cfg.Now()
	r, err := c.cfg.Daemon.Write(ctx, control.WriteParams{Path: in.Path, Content: in.Content, Cwd: c.cfg.Cwd, Session: c.session, Merge: in.Merge})
	if err != nil {
		return "", WriteOutput{}, c.explain(ctx, err, ToolWrite, in.Path)
	}
	path := c.displayPath(ctx, in.Path)
	c.markSeen(path, start, r.Version)
	return renderWrite(path, *r), WriteOutput{Path: path, Operation: string(r.Operation), Version: string(r.Version),
		Lines: lineCount(r.After), MergedOver: string(r.MergedOver)}, nil
}

// edit serves the edit tool: a literal replacement guarded by this
// session's observation.
func (c *Conn) edit(ctx context.Context, in EditInput) (string, EditOutput, error) {
	if in.OldString == "" {
		return "", EditOutput{}, &toolError{text: string(provider.CodeInvalidArgument) +
			": old_string is empty; copy the exact text to replace from the file (use write to replace a whole file)"}
	}
	if in.OldString == in.NewString {
		return "", EditOutput{}, &toolError{text: string(provider.CodeInvalidArgument) +
			": old_string and new_string are the same, so the edit would change nothing"}
	}
	start := c.cfg.Now()
	r, err := c.cfg.Daemon.Edit(ctx, control.EditParams{Path: in.Path, OldString: in.OldString, NewString: in.NewString,
		ReplaceAll: in.ReplaceAll, Cwd: c.cfg.Cwd, Session: c.session, Merge: in.Merge})
	if err != nil {
		return "", EditOutput{}, c.explain(ctx, err, ToolEdit, in.Path)
	}
	path := c.displayPath(ctx, in.Path)
	c.markSeen(path, start, r.Version)
	n := 1
	if in.ReplaceAll {
		n = max(1, strings.Count(r.Before, eol.ToLF(in.OldString)))
	}
	return renderEdit(path, n, *r), EditOutput{Path: path, Version: string(r.Version), Replacements: n, MergedOver: string(r.MergedOver)}, nil
}

// applyPatch serves the apply_patch tool. Syntax errors and refusals found
// before anything was written are errors; a commit that stopped part way is
// a result with complete=false.
func (c *Conn) applyPatch(ctx context.Context, in PatchInput) (string, PatchOutput, error) {
	start := c.cfg.Now()
	r, err := c.cfg.Daemon.Patch(ctx, control.PatchParams{Patch: in.Patch, Cwd: c.cfg.Cwd, Session: c.session, Atomic: in.Atomic, Merge: in.Merge})
	if err != nil {
		return "", PatchOutput{}, c.explain(ctx, err, ToolApplyPatch, "")
	}
	for _, op := range r.Operations {
		if op.Status != control.PatchApplied {
			continue
		}
		switch {
		case op.MoveTo != "":
			c.markSeen(op.MoveTo, start, op.Version)
			c.markSeen(op.Path, c.cfg.Now(), "")
		case op.Kind == "delete":
			c.markSeen(op.Path, c.cfg.Now(), "")
		default:
			c.markSeen(op.Path, start, op.Version)
		}
	}
	out := patchOutput(*r, func(op control.PatchOpResult) string {
		if op.Error.Code == provider.CodeStaleVersion {
			path := op.Error.Path
			if path == "" {
				path = op.Path
			}
			return c.staleText(ctx, path)
		}
		return string(op.Error.Code) + ": " + op.Error.Message
	})
	return renderPatch(out), out, nil
}

// move serves the move tool: the source guarded as an edit, the
// destination as a write.
func (c *Conn) move(ctx context.Context, in MoveInput) (string, MoveOutput, error) {
	start := c.cfg.Now()
	r, err := c.cfg.Daemon.Move(ctx, control.MoveParams{From: in.From, To: in.To, Cwd: c.cfg.Cwd, Session: c.session})
	if err != nil {
		return "", MoveOutput{}, c.explain(ctx, err, ToolMove, in.From)
	}
	from, to := c.displayPath(ctx, in.From), c.displayPath(ctx, in.To)
	c.markSeen(to, start, r.Destination.Version)
	out := MoveOutput{From: from, To: to, Version: string(r.Destination.Version), SourceDeleted: r.SourceDeleted}
	if !r.SourceDeleted {
		why := "unknown reason"
		if r.SourceFailure != nil {
			why = string(r.SourceFailure.Code) + ": " + r.SourceFailure.Message
		}
		return fmt.Sprintf("Wrote %s, but could not remove %s (%s): the file now exists at both paths; delete %s yourself if you meant to move it.",
			to, from, why, from), out, nil
	}
	c.markSeen(from, c.cfg.Now(), "")
	return fmt.Sprintf("Moved %s to %s.", from, to), out, nil
}

// delete serves the delete tool.
func (c *Conn) delete(ctx context.Context, in PathInput) (string, DeleteOutput, error) {
	if _, err := c.cfg.Daemon.Delete(ctx, control.DeleteParams{Path: in.Path, Cwd: c.cfg.Cwd, Session: c.session}); err != nil {
		return "", DeleteOutput{}, c.explain(ctx, err, ToolDelete, in.Path)
	}
	path := c.displayPath(ctx, in.Path)
	c.markSeen(path, c.cfg.Now(), "")
	return fmt.Sprintf("Deleted %s.", path), DeleteOutput{Path: path, Deleted: true}, nil
}

// list serves the list tool. Listing records no observation.
func (c *Conn) list(ctx context.Context, in PathInput) (string, ListOutput, error) {
	r, err := c.cfg.Daemon.List(ctx, control.ListParams{Path: in.Path, Cwd: c.cfg.Cwd})
	if err != nil {
		return "", ListOutput{}, c.explain(ctx, err, ToolList, in.Path)
	}
	text, out := renderList(c.displayPath(ctx, in.Path), *r)
	return text, out, nil
}

// stat serves the stat tool. It is sent without this connection's session
// so that it records no observation: only a read authorizes a change.
func (c *Conn) stat(ctx context.Context, in PathInput) (string, StatOutput, error) {
	r, err := c.cfg.Daemon.Stat(ctx, control.StatParams{Path: in.Path, Cwd: c.cfg.Cwd})
	if err != nil {
		return "", StatOutput{}, c.explain(ctx, err, ToolStat, in.Path)
	}
	text, out := renderStat(*r)
	return text, out, nil
}

// displayPath returns the daemon's display path for p, falling back to p
// as given. Results of mutations do not carry it, so it is asked with a
// session-less stat, which records nothing for this session.
func (c *Conn) displayPath(ctx context.Context, p string) string {
	r, err := c.cfg.Daemon.Stat(ctx, control.StatParams{Path: p, Cwd: c.cfg.Cwd})
	if err != nil || r.DisplayPath == "" {
		return p
	}
	return r.DisplayPath
}

// branchRebase serves the branch_rebase tool.
func (c *Conn) branchRebase(ctx context.Context, in BranchRebaseInput) (string, BranchRebaseOutput, error) {
	r, err := c.cfg.Daemon.BranchRebase(ctx, control.BranchRebaseParams{Name: in.Name, Markers: in.Markers})
	if err != nil {
		return "", BranchRebaseOutput{}, err
	}
	out := BranchRebaseOutput{Merged: r.Merged, Flagged: r.Flagged}
	text := fmt.Sprintf("Rebased branch %s: %d files merged (%s).", in.Name, len(r.Merged), strings.Join(r.Merged, ", "))
	if len(r.Merged) == 0 {
		text = fmt.Sprintf("Rebased branch %s: the workspace changed none of its files; nothing to merge.", in.Name)
	}
	if len(r.Flagged) > 0 {
		text += fmt.Sprintf(" %s now hold conflict markers: remove every <<<<<<< ======= >>>>>>> block (keeping what both sides need), then commit.", strings.Join(r.Flagged, ", "))
	}
	return text, out, nil
}
