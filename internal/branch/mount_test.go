package branch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

// upper writes rel's own file in the branch directly, as a mount does
// after CopyUp or CreateFile.
func upper(t *testing.T, b *Branch, rel, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(b.UpperDir(), rel), []byte(content), 0o644))
	b.Touched(rel)
}

func TestMountOps_CopyUpKeepsBytesModeAndBase(t *testing.T) {
	e := newEnv(t)
	e.put("a.txt", "a0\n")
	require.NoError(t, os.Chmod(filepath.Join(e.ws, "a.txt"), 0o751))
	e.put("b.txt", "b0\n")
	b, err := e.m.Create("work")
	require.NoError(t, err)
	ctx := context.Background()

	assert.Equal(t, InWorkspace, b.Locate("a.txt"))
	require.NoError(t, b.CopyUp(ctx, "a.txt", true))
	assert.Equal(t, InBranch, b.Locate("a.txt"))
	got, err := os.ReadFile(filepath.Join(b.UpperDir(), "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, "a0\n", string(got))
	st, err := os.Stat(filepath.Join(b.UpperDir(), "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o751), st.Mode().Perm())
	require.NoError(t, b.CopyUp(ctx, "a.txt", true), "a second copy-up is a no-op")

	// without content: empty, and the base is still the workspace's bytes
	require.NoError(t, b.CopyUp(ctx, "b.txt", false))
	got, err = os.ReadFile(filepath.Join(b.UpperDir(), "b.txt"))
	require.NoError(t, err)
	assert.Empty(t, got)

	// an unchanged copy applies nothing; a changed one conflicts with a
	// workspace change to its base
	upper(t, b, "b.txt", "b1\n")
	e.put("b.txt", "theirs\n")
	_, err = e.m.Commit(ctx, "work", true, nil, Hooks{})
	var conflict *ConflictError
	require.ErrorAs(t, err, &conflict)
	assert.Equal(t, []string{"b.txt"}, conflict.Paths)
	e.put("b.txt", "b0\n")
	_, err = e.m.Commit(ctx, "work", true, nil, Hooks{})
	require.NoError(t, err)
	assert.Equal(t, "a0\n", e.get("a.txt"))
	assert.Equal(t, "b1\n", e.get("b.txt"))

	assert.Equal(t, provider.CodeNotFound, provider.CodeOf(b.CopyUp(ctx, "none.txt", true)))
}

func TestMountOps_CreateRemoveRenameAndListing(t *testing.T) {
	e := newEnv(t)
	e.put("d/a.txt", "a\n")
	e.put("d/b.txt", "b\n")
	e.put("d/sub/c.txt", "c\n")
	require.NoError(t, os.Symlink("a.txt", filepath.Join(e.ws, "d/link")))
	b, err := e.m.Create("work")
	require.NoError(t, err)
	ctx := context.Background()

	// create: parents made, an existing path refused
	require.NoError(t, b.CreateFile(ctx, "d/new/n.txt", func() error {
		return os.WriteFile(filepath.Join(b.UpperDir(), "d/new/n.txt"), []byte("n\n"), 0o644)
	}))
	assert.Equal(t, "n\n", bread(t, b, "d/new/n.txt"))
	assert.ErrorIs(t, b.CreateFile(ctx, "d/a.txt", func() error { return errors.New("not called") }), ErrExists)

	// remove a workspace file and link, rename a file and a link
	require.NoError(t, b.Remove(ctx, "d/b.txt"))
	require.NoError(t, b.Rename(ctx, "d/a.txt", "d/moved.txt", false))
	require.NoError(t, b.Rename(ctx, "d/link", "d/link2", false))
	target, err := b.Readlink(ctx, "d/link2")
	require.NoError(t, err)
	assert.Equal(t, "a.txt", target)
	assert.ErrorIs(t, b.Rename(ctx, "d/sub", "d/sub2", false), ErrCrossRename)
	assert.ErrorIs(t, b.Rename(ctx, "d/moved.txt", "d/new/n.txt", true), ErrExists)
	assert.Equal(t, Absent, b.Locate("d/a.txt"))
	assert.Equal(t, "a\n", bread(t, b, "d/moved.txt"))

	ch, err := b.DirChanges("d")
	require.NoError(t, err)
	assert.False(t, ch.Opaque)
	assert.Equal(t, map[string]bool{"a.txt": false, "b.txt": false, "link": false, "moved.txt": true, "link2": true, "new": true}, ch.Names)
	ch, err = b.DirChanges("d/new")
	require.NoError(t, err)
	assert.True(t, ch.Opaque)

	// links the branch made survive a restart (they are not orphans)
	e.restart()
	b, err = e.m.Get("work")
	require.NoError(t, err)
	_, err = os.Lstat(filepath.Join(b.UpperDir(), "d/link2"))
	require.NoError(t, err)

	_, err = e.m.Commit(ctx, "work", false, nil, Hooks{})
	require.NoError(t, err)
	assert.Equal(t, "<absent>", e.get("d/a.txt"))
	assert.Equal(t, "<absent>", e.get("d/b.txt"))
	assert.Equal(t, "a\n", e.get("d/moved.txt"))
	assert.Equal(t, "n\n", e.get("d/new/n.txt"))
	target, err = os.Readlink(filepath.Join(e.ws, "d/link2"))
	require.NoError(t, err)
	assert.Equal(t, "a.txt", target)
	_, err = os.Lstat(filepath.Join(e.ws, "d/link"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// waitCtx is a context that lets every check of Err pass until someone
// waits on Done (a held lock): then it is cancelled. A mutation that does
// not wait for the lock completes; one that does gives up.
type waitCtx struct {
	context.Context
	waited atomic.Bool
}

func (c *waitCtx) Done() <-chan struct{} {
	c.waited.Store(true)
	ch := make(chan struct{})
	close(ch)
	return ch
}

func (c *waitCtx) Err() error {
	if c.waited.Load() {
		return context.Canceled
	}
	return nil
}

// The provider API's mutations hold the per-target lock a mount holds
// around its guard and change (the workspace's lock table, branch key).
func TestMountOps_ProviderMutationsTakeTheMountsLock(t *testing.T) {
	e := newEnv(t)
	e.put("a.txt", "a\n")
	b, err := e.m.Create("work")
	require.NoError(t, err)
	unlock, err := e.lower.Lock(context.Background(), b.TargetForRel("a.txt").Key)
	require.NoError(t, err)
	defer unlock()
	_, err = b.WriteText(&waitCtx{Context: context.Background()}, b.TargetForRel("a.txt"), "x\n", nil)
	assert.Equal(t, provider.CodeAborted, provider.CodeOf(err))
	_, err = b.DeleteFile(&waitCtx{Context: context.Background()}, b.TargetForRel("a.txt"), nil)
	assert.Equal(t, provider.CodeAborted, provider.CodeOf(err))
	_, err = b.MoveFile(&waitCtx{Context: context.Background()}, b.TargetForRel("a.txt"), b.TargetForRel("b.txt"), provider.MoveOptions{})
	assert.Equal(t, provider.CodeAborted, provider.CodeOf(err))
	assert.Equal(t, "a\n", bread(t, b, "a.txt"))
	assert.Equal(t, "<absent>", bread(t, b, "b.txt"))
}

// A directory the branch made moves with everything below it; over a
// deleted workspace directory, the old one is still deleted at commit.
func TestMountOps_RenameOfABranchDirectory(t *testing.T) {
	e := newEnv(t)
	e.put("old/x.txt", "x\n")
	e.put("keep.txt", "k\n")
	b, err := e.m.Create("work")
	require.NoError(t, err)
	ctx := context.Background()
	mk := func(rel, content string) {
		require.NoError(t, b.CreateFile(ctx, rel, func() error {
			return os.WriteFile(filepath.Join(b.UpperDir(), rel), []byte(content), 0o644)
		}))
	}
	require.NoError(t, b.Remove(ctx, "old/x.txt"))
	require.NoError(t, b.RemoveDir(ctx, "old"))
	require.NoError(t, b.Mkdir(ctx, "old", 0o750))
	mk("old/y.txt", "y\n")
	require.NoError(t, b.Mkdir(ctx, "old/sub", 0))
	mk("old/sub/z.txt", "z\n")
	require.NoError(t, b.Symlink(ctx, "y.txt", "old/link"))
	require.NoError(t, b.Rename(ctx, "keep.txt", "old/keep.txt", false))

	assert.Equal(t, provider.CodeInvalidArgument, provider.CodeOf(b.Rename(ctx, "old", "old/sub/in", false)), "below itself")
	e.put("taken/t.txt", "t")
	assert.ErrorIs(t, b.Rename(ctx, "old", "taken", false), ErrCrossRename, "over a workspace directory")
	require.NoError(t, b.Rename(ctx, "old", "new", false))

	assert.Equal(t, Absent, b.Locate("old"))
	assert.Equal(t, Absent, b.Locate("old/y.txt"))
	assert.Equal(t, "y\n", bread(t, b, "new/y.txt"))
	assert.Equal(t, "z\n", bread(t, b, "new/sub/z.txt"))
	assert.Equal(t, "k\n", bread(t, b, "new/keep.txt"))
	target, err := b.Readlink(ctx, "new/link")
	require.NoError(t, err)
	assert.Equal(t, "y.txt", target)

	// the records replay to the same state
	e.restart()
	b, err = e.m.Get("work")
	require.NoError(t, err)
	assert.Equal(t, "z\n", bread(t, b, "new/sub/z.txt"))
	assert.Equal(t, Absent, b.Locate("old"))

	_, err = e.m.Commit(ctx, "work", false, nil, Hooks{})
	require.NoError(t, err)
	snap := e.snapshot()
	assert.Equal(t, map[string]string{
		"new/": "<dir>", "new/y.txt": "y\n", "new/sub/": "<dir>", "new/sub/z.txt": "z\n",
		"new/link": "-> y.txt", "new/keep.txt": "k\n", "taken/": "<dir>", "taken/t.txt": "t",
	}, snap)
	st, err := os.Stat(filepath.Join(e.ws, "new"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o750), st.Mode().Perm())
}
