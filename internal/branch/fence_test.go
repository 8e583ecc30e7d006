package branch

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestCommit_RefusesASymlinkSwappedIntoItsPath swaps the directory a
// commit renames into for a symbolic link to a directory outside the
// workspace, after the commit staged its files and before it applies
// them: the journal's renames resolve beneath the root without following
// links, so the commit fails, nothing reaches the outside directory and
// the branch keeps its change.
func TestCommit_RefusesASymlinkSwappedIntoItsPath(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, b *Branch)
	}{
		{"write", func(t *testing.T, b *Branch) { bwrite(t, b, "sub/f.txt", "branch\n") }},
		{"create", func(t *testing.T, b *Branch) { bwrite(t, b, "sub/new.txt", "created\n") }},
		{"delete", func(t *testing.T, b *Branch) { bdelete(t, b, "sub/f.txt") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.put("sub/f.txt", "workspace\n")
			outside := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(outside, "f.txt"), []byte("outside\n"), 0o644))
			b, err := e.m.Create("fix")
			require.NoError(t, err)
			tc.change(t, b)

			// Step 1 is the first staged file; swap before the renames.
			e.m.hooks.step = func(n int) error {
				if n == 2 {
					sub := filepath.Join(e.ws, "sub")
					require.NoError(t, os.Rename(sub, sub+".moved"))
					require.NoError(t, os.Symlink(outside, sub))
				}
				return nil
			}
			_, err = e.m.Commit(context.Background(), "fix", false, nil, Hooks{})
			require.Error(t, err)
			require.ErrorIs(t, err, unix.ELOOP, "the rename met the link and stopped: %v", err)

			got, rerr := os.ReadFile(filepath.Join(outside, "f.txt"))
			require.NoError(t, rerr, "the outside file is still there")
			require.Equal(t, "outside\n", string(got))
			names, _ := os.ReadDir(outside)
			require.Len(t, names, 1, "nothing was created outside the workspace")
			require.Equal(t, "workspace\n", e.get("sub.moved/f.txt"), "the real directory is untouched")
			_, err = e.m.Get("fix")
			require.NoError(t, err, "the branch is kept")
		})
	}
}
