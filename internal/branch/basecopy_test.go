package branch

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

// baseOf reads rel's base copy in b ("<absent>" when there is none).
func baseOf(t *testing.T, b *Branch, rel string) string {
	t.Helper()
	d, err := os.ReadFile(b.basePath(rel))
	if os.IsNotExist(err) {
		return "<absent>"
	}
	require.NoError(t, err)
	return string(d)
}

// tenLines is a file of ten numbered lines.
const tenLines = "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\n"

func TestDiff_ShowsTheBranchsChangeAfterTheWorkspaceChangedTheFile(t *testing.T) {
	e := newEnv(t)
	e.put("auth/login.go", tenLines)
	b, err := e.m.Create("b")
	require.NoError(t, err)
	bwrite(t, b, "auth/login.go", strings.Replace(tenLines, "l9\n", "branch 9\n", 1))
	assert.Equal(t, tenLines, baseOf(t, b, "auth/login.go"))
	// Someone else changes the first line in the workspace.
	e.put("auth/login.go", strings.Replace(tenLines, "l1\n", "other 1\n", 1))

	page, err := b.Diff(context.Background(), 0, 0)
	require.NoError(t, err)
	require.Len(t, page.Files, 1)
	f := page.Files[0]
	assert.True(t, f.Conflict)
	assert.False(t, f.NoBase)
	assert.Contains(t, page.Diff, "-l9\n+branch 9\n")
	assert.NotContains(t, page.Diff, "other 1", "the diff must not undo the workspace's change")

	// The branch's own patch applies on top of the other change.
	require.NoError(t, os.WriteFile(filepath.Join(e.state, "b.patch"), []byte(page.Diff), 0o644))
	runGit(t, e.ws, "init", "-q")
	runGit(t, e.ws, "apply", filepath.Join(e.state, "b.patch"))
	assert.Equal(t, strings.NewReplacer("l1\n", "other 1\n", "l9\n", "branch 9\n").Replace(tenLines), e.get("auth/login.go"))
}

func TestDiff_NoConflictWhileTheWorkspaceIsUnchanged(t *testing.T) {
	e := newEnv(t)
	e.put("a.txt", "a\n")
	b, err := e.m.Create("b")
	require.NoError(t, err)
	bwrite(t, b, "a.txt", "b\n")
	bwrite(t, b, "new.txt", "n\n")
	page, err := b.Diff(context.Background(), 0, 0)
	require.NoError(t, err)
	require.Len(t, page.Files, 2)
	for _, f := range page.Files {
		assert.False(t, f.Conflict, f.Path)
		assert.False(t, f.NoBase, f.Path)
	}
	// The workspace gaining the added file is a conflict too.
	e.put("new.txt", "theirs\n")
	page, err = b.Diff(context.Background(), 0, 0)
	require.NoError(t, err)
	assert.False(t, page.Files[0].Conflict)
	assert.True(t, page.Files[1].Conflict)
}

func TestDiff_FallsBackToTheWorkspaceWithoutABaseCopy(t *testing.T) {
	e := newEnv(t)
	e.put("a.txt", tenLines)
	b, err := e.m.Create("b")
	require.NoError(t, err)
	bwrite(t, b, "a.txt", strings.Replace(tenLines, "l9\n", "branch 9\n", 1))
	// A branch made before base copies existed has none.
	require.NoError(t, os.Remove(b.basePath("a.txt")))
	e.put("a.txt", strings.Replace(tenLines, "l1\n", "other 1\n", 1))
	page, err := b.Diff(context.Background(), 0, 0)
	require.NoError(t, err)
	require.Len(t, page.Files, 1)
	assert.True(t, page.Files[0].NoBase)
	assert.True(t, page.Files[0].Conflict)
	assert.Contains(t, page.Diff, "-other 1\n", "the fallback diffs against the workspace as it is now")
}

func TestDiff_IgnoresABaseCopyThatIsNotTheBase(t *testing.T) {
	e := newEnv(t)
	e.put("a.txt", "a\n")
	b, err := e.m.Create("b")
	require.NoError(t, err)
	bwrite(t, b, "a.txt", "b\n")
	require.NoError(t, os.WriteFile(b.basePath("a.txt"), []byte("torn"), 0o644))
	page, err := b.Diff(context.Background(), 0, 0)
	require.NoError(t, err)
	assert.True(t, page.Files[0].NoBase)
	assert.NotContains(t, page.Diff, "torn")
	assert.Contains(t, page.Diff, "-a\n+b\n")
}

func TestDiff_OverTheCapKeepsNoBase(t *testing.T) {
	e := newEnv(t)
	big := strings.Repeat("x\n", maxDiffBytes/2+1)
	e.put("big.txt", big)
	b, err := e.m.Create("b")
	require.NoError(t, err)
	bwrite(t, b, "big.txt", "small\n")
	assert.Equal(t, "<absent>", baseOf(t, b, "big.txt"))
	page, err := b.Diff(context.Background(), 0, 0)
	require.NoError(t, err)
	assert.True(t, page.Files[0].NoBase)
}

func TestDiff_DeletedAndRenamedUseTheSourcesBase(t *testing.T) {
	e := newEnv(t)
	e.put("del.txt", "d0\n")
	e.put("ren.txt", "r0\n")
	b, err := e.m.Create("b")
	require.NoError(t, err)
	bdelete(t, b, "del.txt")
	_, err = b.MoveFile(context.Background(), bt(t, b, "ren.txt"), bt(t, b, "moved.txt"), provider.MoveOptions{})
	require.NoError(t, err)
	e.put("del.txt", "d1\n")
	e.put("ren.txt", "r1\n")
	page, err := b.Diff(context.Background(), 0, 0)
	require.NoError(t, err)
	require.Len(t, page.Files, 2)
	assert.Equal(t, StatusDeleted, page.Files[0].Status)
	assert.Equal(t, StatusRenamed, page.Files[1].Status)
	for _, f := range page.Files {
		assert.True(t, f.Conflict, f.Path)
		assert.False(t, f.NoBase, f.Path)
	}
	assert.Contains(t, page.Diff, "-d0\n")
	assert.NotContains(t, page.Diff, "d1")
	assert.NotContains(t, page.Diff, "r1")
}

func TestMountCopyUp_KeepsTheBase(t *testing.T) {
	e := newEnv(t)
	e.put("a.txt", "a0\n")
	e.put("t.txt", "t0\n")
	b, err := e.m.Create("m")
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, b.CopyUp(ctx, "a.txt", true))
	require.NoError(t, b.CopyUp(ctx, "t.txt", false)) // an open that truncates
	assert.Equal(t, "a0\n", baseOf(t, b, "a.txt"))
	assert.Equal(t, "t0\n", baseOf(t, b, "t.txt"))
	upper(t, b, "a.txt", "a1\n")
	e.put("a.txt", "other\n")
	page, err := b.Diff(ctx, 0, 0)
	require.NoError(t, err)
	assert.Contains(t, page.Diff, "-a0\n+a1\n")
	assert.NotContains(t, page.Diff, "other")
}

func TestBaseCopies_GoWithTheBranch(t *testing.T) {
	e := newEnv(t)
	e.put("a.txt", "a0\n")
	ctx := context.Background()

	b, err := e.m.Create("keep")
	require.NoError(t, err)
	bwrite(t, b, "a.txt", "a1\n")
	require.Equal(t, "a0\n", baseOf(t, b, "a.txt"))
	_, err = e.m.Commit(ctx, "keep", true, nil, Hooks{})
	require.NoError(t, err)
	assert.Equal(t, "<absent>", baseOf(t, b, "a.txt"), "a commit with keep starts the branch over")
	bwrite(t, b, "a.txt", "a2\n")
	assert.Equal(t, "a1\n", baseOf(t, b, "a.txt"), "the next copy-up keeps the new base")

	d, err := e.m.Create("drop")
	require.NoError(t, err)
	bwrite(t, d, "a.txt", "x\n")
	require.NoError(t, e.m.Discard("drop"))
	_, err = os.Stat(d.dir)
	assert.True(t, os.IsNotExist(err))
}

func TestRestart_DropsOrphanBaseCopies(t *testing.T) {
	e := newEnv(t)
	e.put("a.txt", "a0\n")
	e.put("b.txt", "b0\n")
	b, err := e.m.Create("k")
	require.NoError(t, err)
	bwrite(t, b, "a.txt", "a1\n")
	// A kill between the base copy and its record; and one mid-copy.
	require.NoError(t, os.WriteFile(b.basePath("b.txt"), []byte("b0\n"), 0o644))
	require.NoError(t, os.WriteFile(b.basePath(".tmp-123"), []byte("b"), 0o644))
	e.restart()
	b, err = e.m.Get("k")
	require.NoError(t, err)
	assert.Equal(t, "a0\n", baseOf(t, b, "a.txt"))
	assert.Equal(t, "<absent>", baseOf(t, b, "b.txt"))
	assert.Equal(t, "<absent>", baseOf(t, b, ".tmp-123"))
}

func TestMountSaveAndRemove_KeepTheBase(t *testing.T) {
	e := newEnv(t)
	e.put("a.txt", "a0\n")
	e.put("r.txt", "r0\n")
	b, err := e.m.Create("m")
	require.NoError(t, err)
	ctx := context.Background()
	// An editor's save: a new temp file renamed over the workspace file.
	require.NoError(t, b.CreateFile(ctx, ".a.txt.swp", func() error {
		return os.WriteFile(filepath.Join(b.UpperDir(), ".a.txt.swp"), []byte("a1\n"), 0o644)
	}))
	require.NoError(t, b.Rename(ctx, ".a.txt.swp", "a.txt", false))
	require.NoError(t, b.Remove(ctx, "r.txt"))
	assert.Equal(t, "a0\n", baseOf(t, b, "a.txt"))
	assert.Equal(t, "r0\n", baseOf(t, b, "r.txt"))
	e.put("a.txt", "other\n")
	e.put("r.txt", "other\n")
	page, err := b.Diff(ctx, 0, 0)
	require.NoError(t, err)
	require.Len(t, page.Files, 2)
	for _, f := range page.Files {
		assert.True(t, f.Conflict, f.Path)
		assert.False(t, f.NoBase, f.Path)
	}
	assert.Contains(t, page.Diff, "-a0\n+a1\n")
	assert.Contains(t, page.Diff, "-r0\n")
	assert.NotContains(t, page.Diff, "other")
}
