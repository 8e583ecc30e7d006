package branch

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/dshmount/dshmount/internal/provider"
)

// Diff statuses.
const (
	StatusAdded    = "added"
	StatusModified = "modified"
	StatusDeleted  = "deleted"
	StatusRenamed  = "renamed"
)

// FileChange is one file a branch changed, for branch.diff.
type FileChange struct {
	Path   string
	Status string
	From   string // a rename's source
	Binary bool
	// Conflict: the workspace no longer holds what the branch started
	// this file from (its base, or nothing for an added file); a commit
	// is refused until it is resolved.
	Conflict bool
	// NoBase: the branch kept no copy of the bytes it started from (a
	// file over the diff size cap, or a branch older than base copies),
	// so the diff's old side is the workspace's current file; with
	// Conflict the diff also undoes the workspace's change.
	NoBase bool
	// Withheld: the reader may not see this file's content (DiffWith's
	// withhold said so for Path or From): it is named, its content and
	// conflict state are not read.
	Withheld bool
}

// DiffPage is one page of a branch's diff.
type DiffPage struct {
	Files []FileChange
	Diff  string // unified diff (git apply) of Files
	Total int    // files in the whole diff
}

// maxDiffBytes bounds the file size whose content a diff shows.
const maxDiffBytes = 8 << 20

// Files lists what the branch changed, by path: added, modified, deleted,
// or renamed (with its source; the source is not listed on its own).
// Changes that restore the workspace's bytes are left out.
func (b *Branch) Files(ctx context.Context) ([]FileChange, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.usable("diff", ""); err != nil {
		return nil, err
	}
	_ = ctx
	return b.fileChanges(), nil
}

// fileChanges is Files; b.mu is held.
func (b *Branch) fileChanges() []FileChange {
	cs := b.changeSet()
	writes := map[string]Change{}
	deleted := map[string]bool{}
	for _, c := range cs.Changes {
		switch {
		case c.Delete && c.Dir:
			for p := range c.Manifest {
				deleted[p] = true
			}
		case c.Delete:
			deleted[c.Path] = true
		case !c.MakeDir:
			writes[c.Path] = c
		}
	}
	var out []FileChange
	renamedFrom := map[string]bool{}
	for p, c := range writes {
		fc := FileChange{Path: p, Status: StatusModified}
		if c.Base == BaseAbsent {
			fc.Status = StatusAdded
		}
		if e := b.entries[p]; e != nil && e.From != "" && deleted[e.From] && !renamedFrom[e.From] && fc.Status == StatusAdded {
			fc.Status, fc.From = StatusRenamed, e.From
			renamedFrom[e.From] = true
		}
		out = append(out, fc)
	}
	for p := range deleted {
		if _, rewritten := writes[p]; rewritten {
			continue
		}
		if !renamedFrom[p] {
			out = append(out, FileChange{Path: p, Status: StatusDeleted})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Diff returns the page [offset, offset+limit) of Files (limit 0: all)
// with its unified diff: the bytes the branch started from (its base
// copies; the workspace's current bytes where it kept none, flagged
// NoBase) against the branch's, so the diff is the branch's own change
// even after the workspace changed the file (flagged Conflict). Binary
// files are named, not shown.
func (b *Branch) Diff(ctx context.Context, offset, limit int) (DiffPage, error) {
	return b.DiffWith(ctx, offset, limit, nil)
}

// DiffWith is Diff for a reader that may not see every file: a file for
// whose path (or rename source) withhold reports true is listed Withheld,
// without content. A nil withhold withholds nothing.
func (b *Branch) DiffWith(ctx context.Context, offset, limit int, withhold func(rel string) bool) (DiffPage, error) {
	files, err := b.Files(ctx)
	if err != nil {
		return DiffPage{}, err
	}
	page := DiffPage{Total: len(files)}
	if offset > len(files) {
		offset = len(files)
	}
	end := len(files)
	if limit > 0 && offset+limit < end {
		end = offset + limit
	}
	page.Files = files[offset:end]
	var sb strings.Builder
	for i := range page.Files {
		fc := &page.Files[i]
		if withhold != nil && (withhold(fc.Path) || fc.From != "" && withhold(fc.From)) {
			fc.Withheld = true
			continue
		}
		text, binary, noBase, err := b.fileDiff(ctx, *fc)
		if err != nil {
			return DiffPage{}, err
		}
		fc.Binary, fc.NoBase = binary, noBase
		if fc.Conflict, err = b.conflicts(ctx, *fc); err != nil {
			return DiffPage{}, err
		}
		sb.WriteString(text)
	}
	page.Diff = sb.String()
	return page, nil
}

// side is one side of a file's diff.
type side struct {
	exists bool
	mode   string // git's: 100644, 100755 or 120000
	data   []byte // a link's target for 120000
}

// fileMode is git's mode of a regular file.
func fileMode(m os.FileMode) string {
	if m.Perm()&0o111 != 0 {
		return "100755"
	}
	return "100644"
}

// oldSide reads the bytes the branch started rel from: its base copy,
// or (noBase) the workspace's current rel when it kept none.
func (b *Branch) oldSide(ctx context.Context, rel string) (s side, noBase bool, err error) {
	if s, ok := b.baseSide(rel); ok {
		return s, false, nil
	}
	s, err = b.workspaceSide(ctx, rel)
	return s, true, err
}

// workspaceSide reads the workspace's current rel.
func (b *Branch) workspaceSide(ctx context.Context, rel string) (side, error) {
	host := b.lower.ProcessPath(b.lower.TargetForRel(rel))
	st, err := os.Lstat(host)
	if err != nil {
		return side{}, nil
	}
	if st.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(host)
		return side{exists: true, mode: "120000", data: []byte(target)}, err
	}
	d, err := b.lower.ReadBytes(ctx, b.lower.TargetForRel(rel), maxDiffBytes)
	switch provider.CodeOf(err) {
	case "":
	case provider.CodeNotFound:
		return side{}, nil
	case provider.CodeTooLarge:
		d = []byte{0}
	default:
		return side{}, err
	}
	return side{exists: true, mode: fileMode(st.Mode()), data: d}, nil
}

// newSide reads the branch's rel.
func (b *Branch) newSide(rel string) (side, error) {
	b.mu.RLock()
	e := b.entries[rel]
	up := b.upperPath(rel)
	b.mu.RUnlock()
	if e != nil && e.Kind == kindSymlink {
		return side{exists: true, mode: "120000", data: []byte(e.Link)}, nil
	}
	st, err := os.Stat(up)
	if err != nil {
		return side{}, fmt.Errorf("diff %s: %w", rel, err)
	}
	if st.Size() > maxDiffBytes {
		return side{exists: true, mode: fileMode(st.Mode()), data: []byte{0}}, nil
	}
	d, err := os.ReadFile(up)
	if err != nil {
		return side{}, fmt.Errorf("diff %s: %w", rel, err)
	}
	return side{exists: true, mode: fileMode(st.Mode()), data: d}, nil
}

// fileDiff renders one file's git diff; noBase tells its old side is the
// workspace's current file (no base copy was kept).
func (b *Branch) fileDiff(ctx context.Context, fc FileChange) (text string, binary, noBase bool, err error) {
	oldPath := fc.Path
	if fc.Status == StatusRenamed {
		oldPath = fc.From
	}
	var old, cur side
	if fc.Status != StatusAdded {
		if old, noBase, err = b.oldSide(ctx, oldPath); err != nil {
			return "", false, false, err
		}
	}
	if fc.Status != StatusDeleted {
		if cur, err = b.newSide(fc.Path); err != nil {
			return "", false, false, err
		}
	}
	if old.exists && cur.exists && (old.mode == "120000") != (cur.mode == "120000") {
		// A file became a link or the reverse: git writes a deletion and
		// an addition.
		d1, bin1 := diffSection(oldPath, oldPath, old, side{}, "")
		d2, bin2 := diffSection(fc.Path, fc.Path, side{}, cur, "")
		return d1 + d2, bin1 || bin2, noBase, nil
	}
	rename := ""
	if fc.Status == StatusRenamed {
		rename = fc.From
	}
	d, bin := diffSection(oldPath, fc.Path, old, cur, rename)
	return d, bin, noBase, nil
}

// conflicts reports whether the workspace no longer holds what the branch
// started fc from: its path's base (nothing, for an added file) and, for
// a rename, its source's.
func (b *Branch) conflicts(ctx context.Context, fc FileChange) (bool, error) {
	paths := []string{fc.Path}
	if fc.Status == StatusRenamed {
		paths = append(paths, fc.From)
	}
	for _, p := range paths {
		b.mu.RLock()
		want, known := b.baseVersionOf(p)
		b.mu.RUnlock()
		if !known {
			continue
		}
		now, err := b.lowerState(ctx, p)
		if err != nil {
			return false, fmt.Errorf("diff %s: %w", p, err)
		}
		if now != want {
			return true, nil
		}
	}
	return false, nil
}

// diffSection renders one "diff --git" section from old to cur (a missing
// side is an addition or a deletion).
func diffSection(oldPath, newPath string, old, cur side, renamedFrom string) (string, bool) {
	var sb strings.Builder
	aName, bName := "a/"+oldPath, "b/"+newPath
	fmt.Fprintf(&sb, "diff --git %s %s\n", aName, bName)
	switch {
	case !old.exists:
		fmt.Fprintf(&sb, "new file mode %s\n", cur.mode)
		aName = "/dev/null"
	case !cur.exists:
		fmt.Fprintf(&sb, "deleted file mode %s\n", old.mode)
		bName = "/dev/null"
	default:
		if old.mode != cur.mode {
			fmt.Fprintf(&sb, "old mode %s\nnew mode %s\n", old.mode, cur.mode)
		}
		if renamedFrom != "" {
			fmt.Fprintf(&sb, "rename from %s\nrename to %s\n", renamedFrom, newPath)
		}
	}
	if isBinary(old.data) || isBinary(cur.data) {
		fmt.Fprintf(&sb, "Binary files %s and %s differ\n", aName, bName)
		return sb.String(), true
	}
	if bytes.Equal(old.data, cur.data) {
		return sb.String(), false
	}
	oldText, newText := string(old.data), string(cur.data)
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n", aName, bName)
	sb.WriteString(unifiedHunks(diffLines(splitLines(oldText), splitLines(newText)), 3))
	return sb.String(), false
}

// isBinary reports data git would call binary: a NUL byte, or not UTF-8.
func isBinary(data []byte) bool {
	return bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data)
}
