package branch

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/dshmount/dshmount/provider"
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
	_ = ctx
	return out, nil
}

// Diff returns the page [offset, offset+limit) of Files (limit 0: all)
// with its unified diff: the workspace's current bytes against the
// branch's. Binary files are named, not shown.
func (b *Branch) Diff(ctx context.Context, offset, limit int) (DiffPage, error) {
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
		text, binary, err := b.fileDiff(ctx, *fc)
		if err != nil {
			return DiffPage{}, err
		}
		fc.Binary = binary
		sb.WriteString(text)
	}
	page.Diff = sb.String()
	return page, nil
}

// fileDiff renders one file's git diff.
func (b *Branch) fileDiff(ctx context.Context, fc FileChange) (string, bool, error) {
	var oldData, newData []byte
	oldPath := fc.Path
	if fc.Status == StatusRenamed {
		oldPath = fc.From
	}
	if fc.Status != StatusAdded {
		d, err := b.lower.ReadBytes(ctx, b.lower.TargetForRel(oldPath), maxDiffBytes)
		if err != nil && provider.CodeOf(err) != provider.CodeNotFound {
			if provider.CodeOf(err) != provider.CodeTooLarge {
				return "", false, err
			}
			d = []byte{0}
		}
		oldData = d
	}
	mode := "100644"
	if fc.Status != StatusDeleted {
		b.mu.RLock()
		up := b.upperPath(fc.Path)
		b.mu.RUnlock()
		st, err := os.Stat(up)
		if err != nil {
			return "", false, fmt.Errorf("diff %s: %w", fc.Path, err)
		}
		if st.Mode().Perm()&0o111 != 0 {
			mode = "100755"
		}
		if st.Size() > maxDiffBytes {
			newData = []byte{0}
		} else if newData, err = os.ReadFile(up); err != nil {
			return "", false, fmt.Errorf("diff %s: %w", fc.Path, err)
		}
	}
	var sb strings.Builder
	aName, bName := "a/"+oldPath, "b/"+fc.Path
	fmt.Fprintf(&sb, "diff --git %s %s\n", aName, bName)
	switch fc.Status {
	case StatusAdded:
		fmt.Fprintf(&sb, "new file mode %s\n", mode)
		aName = "/dev/null"
	case StatusDeleted:
		sb.WriteString("deleted file mode 100644\n")
		bName = "/dev/null"
	case StatusRenamed:
		fmt.Fprintf(&sb, "rename from %s\nrename to %s\n", fc.From, fc.Path)
	}
	if isBinary(oldData) || isBinary(newData) {
		fmt.Fprintf(&sb, "Binary files %s and %s differ\n", aName, bName)
		return sb.String(), true, nil
	}
	if bytes.Equal(oldData, newData) {
		return sb.String(), false, nil
	}
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n", aName, bName)
	sb.WriteString(unifiedHunks(diffLines(splitLines(string(oldData)), splitLines(string(newData))), 3))
	return sb.String(), false, nil
}

// isBinary reports data git would call binary: a NUL byte, or not UTF-8.
func isBinary(data []byte) bool {
	return bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data)
}
