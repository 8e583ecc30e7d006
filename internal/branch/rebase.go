package branch

import (
	"github.com/dshmount/dshmount/internal/records"

	"bytes"
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/dshmount/dshmount/internal/merge"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/version"
)

// This file holds Rebase: a branch's files are brought over the
// workspace's later changes by a three-way merge (base: the branch's base
// copy; ours: the branch's file; theirs: the workspace's file), all or
// nothing. A merged file gets a new base (the workspace bytes it merged
// over), so a commit after a clean rebase applies. Branches record no
// renames: a renamed file is a delete plus a create, merged as such.

// ConflictHunk is one conflicted region of a file.
type ConflictHunk struct {
	Path      string `json:"path"`
	BaseStart int    `json:"baseStart"`
	Base      string `json:"base"`
	Ours      string `json:"ours"`
	Theirs    string `json:"theirs"`
}

// MergeConflictError refuses a rebase (or a commit of files still holding
// conflict markers): nothing was changed. It is FS_MERGE_CONFLICT.
type MergeConflictError struct {
	Branch  string
	Paths   []string // sorted
	Hunks   []ConflictHunk
	Markers bool // the paths still hold the markers a rebase wrote
}

// Error says what conflicts and what to do.
func (e *MergeConflictError) Error() string {
	return fmt.Sprintf("%s: %s", provider.CodeMergeConflict, e.message())
}

func (e *MergeConflictError) message() string {
	list := strings.Join(e.Paths, ", ")
	if len(e.Paths) > 10 {
		list = strings.Join(e.Paths[:10], ", ") + fmt.Sprintf(" and %d more", len(e.Paths)-10)
	}
	if e.Markers {
		return fmt.Sprintf("conflict markers remain in branch %s: %s; resolve each <<<<<<< ======= >>>>>>> block (keep what both sides need, remove the markers), then commit again", e.Branch, list)
	}
	return fmt.Sprintf("branch %s and the workspace both changed %s where the changes touch; nothing was changed: edit the branch's side of each conflicted region, then rebase again, or rebase with markers to resolve them in the files", e.Branch, list)
}

// Unwrap makes errors.Is(err, provider.ErrMergeConflict) hold.
func (e *MergeConflictError) Unwrap() error {
	return &provider.Error{Code: provider.CodeMergeConflict, Op: "rebase", Message: e.message()}
}

// RebaseResult is what a rebase changed.
type RebaseResult struct {
	Merged  []string // files merged over the workspace's changes, sorted
	Flagged []string // of those, files left with conflict markers (markers mode)
}

// rebaseFile is the planned outcome for one file.
type rebaseFile struct {
	rel     string
	text    []byte           // the branch's new bytes
	base    []byte           // the workspace bytes merged over: the new base copy
	version provider.Version // their version: the new base
	mode    os.FileMode
	flagged bool
}

// Rebase merges the workspace's changes since branch name started each
// file into the branch. With markers, text conflicts are written into the
// branch as git-style markers and the files flagged (a commit is refused
// while they hold markers); without, any conflict refuses the rebase.
func (m *Manager) Rebase(ctx context.Context, name string, markers bool) (RebaseResult, error) {
	ctx = ctxOrBackground(ctx)
	b, err := m.Get(name)
	if err != nil {
		return RebaseResult{}, err
	}
	turn := m.journal.Hold() // no commit runs while the branch's bases move
	defer turn.Release()
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable("rebase", ""); err != nil {
		return RebaseResult{}, err
	}
	plan, cerr := m.planRebase(ctx, b, markers)
	if cerr != nil {
		return RebaseResult{}, cerr
	}
	res := RebaseResult{Merged: []string{}, Flagged: []string{}}
	for _, f := range plan {
		if err := b.applyRebase(f); err != nil {
			return res, err
		}
		res.Merged = append(res.Merged, f.rel)
		if f.flagged {
			res.Flagged = append(res.Flagged, f.rel)
		}
	}
	return res, nil
}

// planRebase merges every file the workspace moved under; it changes
// nothing. b.mu is held.
func (m *Manager) planRebase(ctx context.Context, b *Branch, markers bool) ([]rebaseFile, error) {
	var plan []rebaseFile
	ce := &MergeConflictError{Branch: b.name}
	for _, p := range sortedPaths(b.entries) {
		e := b.entries[p]
		cur, err := m.journal.Current(ctx, p)
		if err != nil {
			return nil, err
		}
		if cur == e.Base || e.Kind == kindDir && cur == BaseDir || e.Kind == kindDeleted && e.Base == BaseAbsent {
			continue // not moved, or nothing the commit would apply
		}
		if e.Kind != kindFile || e.Base == BaseDir || !isContentVersion(cur) && cur != BaseAbsent {
			// A delete, link or directory the workspace moved under:
			// nothing to merge line by line.
			ce.Paths = append(ce.Paths, p)
			continue
		}
		f, hunks, ok, err := b.mergeFile(ctx, m, p, e.Base, cur, markers)
		if err != nil {
			return nil, err
		}
		if !ok {
			ce.Paths = append(ce.Paths, p)
			ce.Hunks = append(ce.Hunks, hunks...)
			continue
		}
		plan = append(plan, f)
	}
	if len(ce.Paths) > 0 {
		return nil, ce
	}
	return plan, nil
}

// mergeFile merges rel's branch copy with the workspace's version cur
// over base. ok is false for a conflict (with its hunks) the plan cannot
// carry: any, without markers; a binary file, a missing base copy or a
// workspace deletion, with them.
func (b *Branch) mergeFile(ctx context.Context, m *Manager, rel string, base, cur provider.Version, markers bool) (rebaseFile, []ConflictHunk, bool, error) {
	if cur == BaseAbsent {
		return rebaseFile{}, nil, false, nil // changed in the branch, deleted in the workspace
	}
	var baseText []byte
	if base != BaseAbsent {
		s, ok := b.baseSideOf(rel, base)
		if !ok {
			return rebaseFile{}, nil, false, nil // no base copy kept (over maxDiffBytes)
		}
		baseText = s.data
	}
	theirs, err := m.lower.ReadBytes(ctx, m.lower.TargetForRel(rel), maxDiffBytes)
	if provider.CodeOf(err) == provider.CodeTooLarge {
		return rebaseFile{}, nil, false, nil
	}
	if err != nil {
		return rebaseFile{}, nil, false, err
	}
	ours, err := os.ReadFile(b.upperPath(rel))
	if err != nil {
		return rebaseFile{}, nil, false, provider.NewError(provider.CodeIOError, "rebase", rel, err, "read the copy of %s in branch %s: %v", rel, b.name, err)
	}
	if isBinary(baseText) || isBinary(ours) || isBinary(theirs) {
		return rebaseFile{}, nil, false, nil
	}
	mode := os.FileMode(0o644)
	if st, err := os.Stat(b.upperPath(rel)); err == nil {
		mode = st.Mode().Perm()
	}
	r := merge.Merge(baseText, ours, theirs, merge.Options{OursLabel: "branch " + b.name, TheirsLabel: "workspace"})
	f := rebaseFile{rel: rel, text: r.Text, base: theirs, version: version.OfBytes(theirs), mode: mode}
	if r.Clean() {
		return f, nil, true, nil
	}
	hunks := make([]ConflictHunk, 0, len(r.Conflicts))
	for _, c := range r.Conflicts {
		hunks = append(hunks, ConflictHunk{Path: rel, BaseStart: c.BaseStart, Base: c.Base, Ours: c.Ours, Theirs: c.Theirs})
	}
	if !markers {
		return rebaseFile{}, hunks, false, nil
	}
	f.flagged = true
	return f, nil, true, nil
}

// applyRebase writes one merged file: the new bytes, then the new base
// copy, then the records (a fresh entry, so the base is the workspace's
// version). A kill before the records leaves the old base: the next
// rebase merges again, and finds the workspace's changes already there.
// b.mu is held.
func (b *Branch) applyRebase(f rebaseFile) error {
	up := b.upperPath(f.rel)
	if err := records.WriteFileAtomic(up, f.text, false); err != nil {
		return provider.NewError(provider.CodeIOError, "rebase", f.rel, err, "write the merge of %s in branch %s: %v", f.rel, b.name, err)
	}
	_ = os.Chmod(up, f.mode)
	b.setVersion(f.rel, version.OfBytes(f.text))
	if _, err := b.keepBaseBytes("rebase", f.rel, f.base, f.mode); err != nil {
		return err
	}
	return b.record(&entry{Path: f.rel}, &entry{Path: f.rel, Kind: kindFile, Base: f.version, Markers: f.flagged})
}

// hasMarkers reports whether data has a line that starts a conflict
// marker a rebase writes.
func hasMarkers(data []byte) bool {
	for _, l := range bytes.Split(data, []byte("\n")) {
		for _, m := range [][]byte{[]byte("<<<<<<<"), []byte("======="), []byte(">>>>>>>")} {
			if bytes.HasPrefix(l, m) {
				return true
			}
		}
	}
	return false
}

// markedFiles returns the flagged files that still hold markers; b.mu is
// held.
func (b *Branch) markedFiles() []string {
	var out []string
	for _, p := range sortedPaths(b.entries) {
		e := b.entries[p]
		if e.Kind != kindFile || !e.Markers {
			continue
		}
		data, err := os.ReadFile(b.upperPath(p))
		if err != nil || hasMarkers(data) {
			out = append(out, p)
		}
	}
	return out
}
