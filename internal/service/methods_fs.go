package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

// Stat reports a target's metadata and records the session's observation.
func (s *Service) Stat(ctx context.Context, c *Caller, p StatParams) (StatResult, error) {
	sc, err := s.requestScope(c, p.Session, p.Branch)
	if err != nil {
		return StatResult{}, err
	}
	a, t, err := s.subject(ctx, sc, c, p.Session, p.Path, p.Cwd)
	if err != nil {
		return StatResult{}, err
	}
	if err := s.awaitCommit(ctx, t); err != nil {
		return StatResult{}, err
	}
	info, err := sc.engine.Stat(ctx, a, t)
	res := StatResult{DisplayPath: t.DisplayPath}
	if provider.CodeOf(err) == provider.CodeNotFound {
		return res, nil
	}
	if err != nil {
		return StatResult{}, fmt.Errorf("stat %s: %w", t.DisplayPath, err)
	}
	if info != nil {
		res.Exists = true
		res.Type = info.Type
		res.Version = info.Version
		if info.Type == provider.TypeFile {
			size := info.Size
			res.Size = &size
		}
	}
	return res, nil
}

// List lists a directory's direct children in name order.
func (s *Service) List(ctx context.Context, c *Caller, p ListParams) (ListResult, error) {
	sc, err := s.requestScope(c, "", p.Branch)
	if err != nil {
		return ListResult{}, err
	}
	if p.Path == "" {
		p.Path = "."
	}
	t, err := sc.resolve(ctx, "path", p.Path, p.Cwd)
	if err != nil {
		return ListResult{}, err
	}
	if err := s.awaitCommit(ctx, t); err != nil {
		return ListResult{}, err
	}
	entries, err := sc.fs.ListDir(ctx, t)
	if err != nil {
		return ListResult{}, fmt.Errorf("list %s: %w", t.DisplayPath, err)
	}
	res := ListResult{Entries: make([]ListEntry, 0, len(entries))}
	for _, e := range entries {
		le := ListEntry{Name: e.Name, Type: e.Type, Version: e.Version}
		if e.Type == provider.TypeFile {
			size := e.Size
			le.Size = &size
		}
		res.Entries = append(res.Entries, le)
	}
	return res, nil
}

// Read returns a window of numbered lines and records the session's
// observation at the stat version.
func (s *Service) Read(ctx context.Context, c *Caller, p ReadParams) (ReadResult, error) {
	sc, err := s.requestScope(c, p.Session, p.Branch)
	if err != nil {
		return ReadResult{}, err
	}
	w, err := readWindow(p.Path, p.Offset, p.Limit, p.MaxBytes)
	if err != nil {
		return ReadResult{}, err
	}
	a, t, err := s.subject(ctx, sc, c, p.Session, p.Path, p.Cwd)
	if err != nil {
		return ReadResult{}, err
	}
	if err := s.awaitCommit(ctx, t); err != nil {
		return ReadResult{}, err
	}
	r, err := sc.engine.ReadWindow(ctx, a, t, w)
	if err != nil {
		return ReadResult{}, fmt.Errorf("read %s: %w", t.DisplayPath, err)
	}
	if r.Observed && sc.Workspace() {
		s.keepSeen(ctx, t, r.Info.Version)
	}
	return ReadResult{
		DisplayPath: t.DisplayPath, Version: r.Info.Version, Offset: w.Offset,
		Lines: r.Lines, TotalLines: r.TotalLines, TruncatedByBytes: r.Truncated, Observed: r.Observed,
	}, nil
}

// Write creates or replaces a whole file.
func (s *Service) Write(ctx context.Context, c *Caller, p WriteParams) (WriteResult, error) {
	var g policy.Guard
	return mutate(ctx, s, c, mutation[WriteResult]{
		op: policy.OpWrite, session: p.Session, branch: p.Branch, cwd: p.Cwd, paths: []pathParam{{"path", p.Path}},
		check: func() (err error) {
			g, err = writeGuard(p.Expected, p.Unconditional, "expected")
			return err
		},
		apply: func(ctx context.Context, m mutating) applied[WriteResult] {
			t := m.targets[0]
			g.Merge = p.Merge && s.canMerge(m.sc)
			out, err := m.sc.engine.Write(ctx, m.actor, t, p.Content, g)
			if p.Merge && provider.CodeOf(err) == provider.CodeStaleVersion {
				mo, err := s.mergeStale(ctx, m.sc, mergeRequest{op: policy.OpWrite, actor: m.actor, target: t, expected: expectedOf(p.Expected),
					change: func(string) (string, error) { return p.Content, nil }}, err)
				res := writeResult(mo.write)
				res.Merged, res.MergedOver = true, mo.mergedOver
				return applied[WriteResult]{res: res, target: t, err: err, final: true}
			}
			return applied[WriteResult]{res: writeResult(out), target: t, err: existsOnCreate(err, t, p.Expected, "", "the write")}
		},
	})
}

// expectedOf is the version of an explicit write guard ("": none).
func expectedOf(e *WriteExpected) provider.Version {
	if e == nil {
		return ""
	}
	return e.Version
}

// writeResult converts a write outcome.
func writeResult(o provider.WriteOutcome) WriteResult {
	return WriteResult{Operation: o.Operation, Version: o.Version, Before: o.Before, After: o.After}
}

// Edit applies a literal search-and-replace.
func (s *Service) Edit(ctx context.Context, c *Caller, p EditParams) (EditResult, error) {
	var g policy.Guard
	return mutate(ctx, s, c, mutation[EditResult]{
		op: policy.OpEdit, session: p.Session, branch: p.Branch, cwd: p.Cwd, paths: []pathParam{{"path", p.Path}},
		check: func() (err error) {
			if p.OldString == "" {
				return invalidParams("oldString must not be empty; to write a whole file use fs.write")
			}
			g, err = versionGuard(p.Expected, p.Unconditional, "expected")
			return err
		},
		apply: func(ctx context.Context, m mutating) applied[EditResult] {
			t := m.targets[0]
			req := provider.EditRequest{OldString: p.OldString, NewString: p.NewString, ReplaceAll: p.ReplaceAll}
			g.Merge = p.Merge && s.canMerge(m.sc)
			out, err := m.sc.engine.Edit(ctx, m.actor, t, req, g)
			if p.Merge && provider.CodeOf(err) == provider.CodeStaleVersion {
				var expected provider.Version
				if p.Expected != nil {
					expected = p.Expected.Version
				}
				mo, err := s.mergeStale(ctx, m.sc, mergeRequest{op: policy.OpEdit, actor: m.actor, target: t, expected: expected,
					change: func(base string) (string, error) { return applyEdit(t, base, req) }}, err)
				before := ""
				if mo.write.Before != nil {
					before = *mo.write.Before
				}
				return applied[EditResult]{res: EditResult{Version: mo.write.Version, Before: before, After: mo.write.After, Merged: true, MergedOver: mo.mergedOver},
					target: t, err: err, final: true}
			}
			return applied[EditResult]{res: EditResult{Version: out.Version, Before: out.Before, After: out.After}, target: t, err: err}
		},
	})
}

// Delete removes a file.
func (s *Service) Delete(ctx context.Context, c *Caller, p DeleteParams) (DeleteResult, error) {
	var g policy.Guard
	return mutate(ctx, s, c, mutation[DeleteResult]{
		op: policy.OpDelete, session: p.Session, branch: p.Branch, cwd: p.Cwd, paths: []pathParam{{"path", p.Path}},
		check: func() (err error) {
			g, err = versionGuard(p.Expected, p.Unconditional, "expected")
			return err
		},
		apply: func(ctx context.Context, m mutating) applied[DeleteResult] {
			out, err := m.sc.engine.Delete(ctx, m.actor, m.targets[0], g)
			return applied[DeleteResult]{res: DeleteResult{Before: out.Before}, target: m.targets[0], err: err}
		},
	})
}

// Move moves a file: destination published first, then the source removed.
func (s *Service) Move(ctx context.Context, c *Caller, p MoveParams) (MoveResult, error) {
	var srcG, dstG policy.Guard
	return mutate(ctx, s, c, mutation[MoveResult]{
		op: policy.OpMove, session: p.Session, branch: p.Branch, cwd: p.Cwd, paths: []pathParam{{"from", p.From}, {"to", p.To}},
		check: func() (err error) {
			if srcG, err = versionGuard(p.ExpectedSource, p.Unconditional, "expectedSource"); err != nil {
				return err
			}
			dstG, err = writeGuard(p.ExpectedDestination, p.Unconditional, "expectedDestination")
			return err
		},
		apply: func(ctx context.Context, m mutating) applied[MoveResult] {
			src, dst := m.targets[0], m.targets[1]
			out, err := m.sc.engine.Move(ctx, m.actor, src, dst, nil, srcG, dstG)
			err = existsOnCreate(err, dst, p.ExpectedDestination, "the destination ", "the move")
			return applied[MoveResult]{res: moveResult(out), target: pickTarget(err, src, dst), err: err}
		},
	})
}

// moveResult converts a move outcome.
func moveResult(o provider.MoveOutcome) MoveResult {
	res := MoveResult{SourceBefore: o.SourceBefore, Destination: writeResult(o.Destination), SourceDeleted: o.SourceDeleted}
	if o.SourceFailure != nil {
		res.SourceFailure = &SourceFailure{Code: o.SourceFailure.Code, Message: o.SourceFailure.Message}
	}
	return res
}

// pickTarget returns the target an error names by display path (default:
// the first).
func pickTarget(err error, ts ...provider.Target) provider.Target {
	var pe *provider.Error
	if errors.As(err, &pe) {
		for _, t := range ts {
			if t.DisplayPath == pe.Path {
				return t
			}
		}
	}
	return ts[0]
}

// refusedEarly audits err when it refuses a mutation before the engine
// decided anything (see policy.IsRefusal), and returns it. The entry names
// the path the error names, else the path as the caller wrote it.
func (s *Service) refusedEarly(a policy.Actor, op policy.MutationOp, path string, err error) error {
	if !policy.IsRefusal(provider.CodeOf(err)) {
		return err
	}
	var pe *provider.Error
	if errors.As(err, &pe) && pe.Path != "" {
		path = pe.Path
	}
	s.engine.AuditRefusal(a, op, provider.Target{DisplayPath: path}, err)
	return err
}

// subject resolves the actor and the target of a read about one path.
// When a shared policy store cannot be reached to open the connection's
// session or to check the one named, the read is answered as the peer
// without a session: it records nothing (the answer says so), so it grants
// nothing a read without a session would not.
func (s *Service) subject(ctx context.Context, sc Scope, c *Caller, session policy.SessionID, path, cwd string) (policy.Actor, provider.Target, error) {
	a, err := c.actorFor(session)
	if errors.Is(err, policy.ErrStoreUnavailable) {
		a, err = c.peer(), nil
	}
	if err != nil {
		return policy.Actor{}, provider.Target{}, err
	}
	t, err := sc.resolve(ctx, "path", path, cwd)
	if err != nil {
		return policy.Actor{}, provider.Target{}, err
	}
	return a, t, nil
}
