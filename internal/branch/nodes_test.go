package branch

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

func TestNodes_DirectoriesModesAndSymlinksCommit(t *testing.T) {
	e := newEnv(t)
	e.put("run.sh", "echo hi\n")
	e.put("target.txt", "t\n")
	e.put("old/inner.txt", "i\n")
	require.NoError(t, os.Symlink("target.txt", filepath.Join(e.ws, "old/link")))
	b, err := e.m.Create("n")
	require.NoError(t, err)
	ctx := context.Background()

	require.NoError(t, b.Mkdir(ctx, "empty/sub", 0o700))
	require.NoError(t, b.Chmod(ctx, "run.sh", 0o755))
	require.NoError(t, b.Symlink(ctx, "target.txt", "ln"))
	assert.Equal(t, provider.CodeNotObserved, provider.CodeOf(b.Symlink(ctx, "x", "run.sh")), "an existing path")
	assert.Equal(t, provider.CodeNotObserved, provider.CodeOf(b.Mkdir(ctx, "old", 0)), "an existing path")
	require.NoError(t, b.RemoveDir(ctx, "old"))
	target, err := b.Readlink(ctx, "ln")
	require.NoError(t, err)
	assert.Equal(t, "target.txt", target)
	info, err := b.Lstat(ctx, "ln", provider.ResolveOptions{})
	require.NoError(t, err)
	assert.Equal(t, provider.TypeSymlink, info.Type)
	// The workspace is untouched.
	st, err := os.Stat(filepath.Join(e.ws, "run.sh"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), st.Mode().Perm())

	page, err := b.Diff(ctx, 0, 0)
	require.NoError(t, err)
	assert.Contains(t, page.Diff, "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n")
	assert.Contains(t, page.Diff, "diff --git a/ln b/ln\nnew file mode 120000\n")
	assert.Contains(t, page.Diff, "diff --git a/old/link b/old/link\ndeleted file mode 120000\n")
	// git apply does the same to a copy of the workspace.
	cp := t.TempDir()
	out, err := gitCmd(e.ws, "init", "-q")
	require.NoError(t, err, "%s", out)
	require.NoError(t, os.WriteFile(filepath.Join(e.state, "n.patch"), []byte(page.Diff), 0o644))
	out, err = gitCmd(cp, "init", "-q")
	require.NoError(t, err, "%s", out)
	for _, f := range []string{"run.sh", "target.txt", "old/inner.txt"} {
		data, err := os.ReadFile(filepath.Join(e.ws, f))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(cp, f)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(cp, f), data, 0o644))
	}
	require.NoError(t, os.Symlink("target.txt", filepath.Join(cp, "old/link")))
	out, err = gitCmd(cp, "apply", filepath.Join(e.state, "n.patch"))
	require.NoError(t, err, "%s\n%s", out, page.Diff)
	lt, err := os.Readlink(filepath.Join(cp, "ln"))
	require.NoError(t, err)
	assert.Equal(t, "target.txt", lt)

	_, err = e.m.Commit(ctx, "n", false, nil, Hooks{})
	require.NoError(t, err)
	st, err = os.Stat(filepath.Join(e.ws, "run.sh"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), st.Mode().Perm(), "a chmod-only change commits")
	assert.Equal(t, "echo hi\n", e.get("run.sh"))
	st, err = os.Stat(filepath.Join(e.ws, "empty/sub"))
	require.NoError(t, err)
	assert.True(t, st.IsDir())
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm())
	lt, err = os.Readlink(filepath.Join(e.ws, "ln"))
	require.NoError(t, err)
	assert.Equal(t, "target.txt", lt)
	_, err = os.Lstat(filepath.Join(e.ws, "old"))
	assert.True(t, os.IsNotExist(err), "the directory and its link are gone")
}

func TestNodes_SymlinkConflicts(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, os.Symlink("a", filepath.Join(e.ws, "l")))
	e.put("d/x.txt", "x\n")
	require.NoError(t, os.Symlink("x.txt", filepath.Join(e.ws, "d/y")))
	b, err := e.m.Create("s")
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, b.Symlink(ctx, "new", "m"))
	require.NoError(t, b.RemoveDir(ctx, "d"))
	// The workspace gets a link at m, and d/y is pointed elsewhere.
	require.NoError(t, os.Symlink("theirs", filepath.Join(e.ws, "m")))
	require.NoError(t, os.Remove(filepath.Join(e.ws, "d/y")))
	require.NoError(t, os.Symlink("other", filepath.Join(e.ws, "d/y")))
	_, err = e.m.Commit(ctx, "s", false, nil, Hooks{})
	var ce *ConflictError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, []string{"d/y", "m"}, ce.Paths)
}

func TestNodes_CrashWithLinksAndDirectoriesIsAllOrNothing(t *testing.T) {
	befores, afters := 0, 0
	for at := range 15 {
		e := newEnv(t)
		e.put("f.txt", "f\n")
		e.put("gone/g.txt", "g\n")
		b, err := e.m.Create("c")
		require.NoError(t, err)
		ctx := context.Background()
		require.NoError(t, b.Symlink(ctx, "f.txt", "l1"))
		require.NoError(t, b.Symlink(ctx, "f.txt", "deep/l2"))
		require.NoError(t, b.Mkdir(ctx, "made", 0o750))
		require.NoError(t, b.RemoveDir(ctx, "gone"))
		bwrite(t, b, "f.txt", "F\n")
		before := e.snapshot()
		e.m.hooks.step = func(n int) error {
			if n == at {
				return errStopped
			}
			return nil
		}
		_, err = e.m.Commit(ctx, "c", false, nil, Hooks{})
		e.restart()
		got := e.snapshot()
		if got["f.txt"] == "f\n" {
			assert.Equal(t, before, got, "step %d: all before", at)
			befores++
			continue
		}
		require.ErrorIs(t, err, errStopped)
		afters++
		assert.Equal(t, map[string]string{"f.txt": "F\n", "made/": "<dir>", "deep/": "<dir>",
			"l1": "-> f.txt", "deep/l2": "-> f.txt"}, got, "step %d: all after", at)
	}
	assert.Equal(t, 5, befores, "stopped before the journal said applying")
	assert.Equal(t, 10, afters)
}
