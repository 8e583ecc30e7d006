package patch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// memTree is an in-memory workspace: slash path → content. Directories are
// implicit in the paths of their files.
type memTree map[string]string

// isDir reports whether p is a directory of the tree.
func (t memTree) isDir(p string) bool {
	for k := range t {
		if strings.HasPrefix(k, p+"/") {
			return true
		}
	}
	return false
}

// applyPatch applies a patch text to t with the reference behaviour of
// docs/patch-format.md: operations run in order, Add creates or overwrites,
// Delete and Update need an existing file, Move writes the destination and
// removes the source; a failure leaves the changes of earlier operations.
func applyPatch(t memTree, text string) error {
	ops, err := Parse(text)
	if err != nil {
		return err
	}
	if len(ops) == 0 {
		return ErrNoOperations
	}
	for _, op := range ops {
		p := path.Clean(op.OpPath())
		switch op := op.(type) {
		case *Add:
			t[p] = op.Content
		case *Delete:
			if t.isDir(p) {
				return fmt.Errorf("delete %s: is a directory; delete the files inside it instead", p)
			}
			if _, ok := t[p]; !ok {
				return fmt.Errorf("delete %s: no such file; check the path", p)
			}
			delete(t, p)
		case *Update:
			before, ok := t[p]
			if !ok {
				return fmt.Errorf("update %s: no such file; add it with '*** Add File:' instead", p)
			}
			after, failure := ApplyUpdate(before, op)
			if failure != nil {
				return fmt.Errorf("update %s: %w", p, failure)
			}
			if op.MoveTo == "" {
				t[p] = after
				continue
			}
			t[path.Clean(op.MoveTo)] = after
			delete(t, p)
		}
	}
	return nil
}

// readTree loads a directory as a memTree; a missing directory is empty.
func readTree(t *testing.T, dir string) memTree {
	t.Helper()
	tree := memTree{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		tree[filepath.ToSlash(rel)] = string(data)
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return tree
	}
	require.NoError(t, err)
	return tree
}

func scenarioDirs(t testing.TB) []string {
	entries, err := os.ReadDir(filepath.Join("testdata", "scenarios"))
	require.NoError(t, err)
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join("testdata", "scenarios", e.Name()))
		}
	}
	sort.Strings(dirs)
	return dirs
}

// TestScenarios runs every numbered scenario of testdata/scenarios: input/
// is the tree before, patch the patch text, and expected/ the tree after or
// expected_error a substring of the error.
func TestScenarios(t *testing.T) {
	dirs := scenarioDirs(t)
	require.GreaterOrEqual(t, len(dirs), 40)
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			text, err := os.ReadFile(filepath.Join(dir, "patch"))
			require.NoError(t, err)
			tree := readTree(t, filepath.Join(dir, "input"))
			err = applyPatch(tree, string(text))
			wantErr, readErr := os.ReadFile(filepath.Join(dir, "expected_error"))
			if readErr == nil {
				require.Error(t, err)
				assert.Contains(t, err.Error(), strings.TrimSpace(string(wantErr)))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, readTree(t, filepath.Join(dir, "expected")), tree)
		})
	}
}

func TestApplyPatch_EarlierOperationsStayAfterFailure(t *testing.T) {
	tree := memTree{"a.txt": "a\n"}
	err := applyPatch(tree, "*** Begin Patch\n*** Add File: b.txt\n+b\n*** Delete File: missing.txt\n*** End Patch")
	require.Error(t, err)
	assert.Equal(t, memTree{"a.txt": "a\n", "b.txt": "b\n"}, tree)
}
