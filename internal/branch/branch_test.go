package branch

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

func TestName_Validation(t *testing.T) {
	e := newEnv(t)
	for _, bad := range []string{"", ".", "..", "a/b", "a b", strings.Repeat("x", 65), "é", "a\x00"} {
		_, err := e.m.Create(bad)
		require.Error(t, err, "%q", bad)
		assert.Equal(t, provider.CodeInvalidArgument, provider.CodeOf(err), "%q", bad)
		assert.Contains(t, err.Error(), "invalid branch name")
	}
	for _, good := range []string{"a", "A.b_c-1", strings.Repeat("x", 64), "..."} {
		_, err := e.m.Create(good)
		require.NoError(t, err, "%q", good)
	}
	_, err := e.m.Create("a")
	require.Error(t, err)
	assert.Equal(t, provider.CodeInvalidArgument, provider.CodeOf(err))
	assert.Contains(t, err.Error(), "already exists")
}

func TestBranch_IsolationAndLiveBase(t *testing.T) {
	e := newEnv(t)
	e.put("a.txt", "a0\n")
	e.put("b.txt", "b0\n")
	e.put("dir/c.txt", "c0\n")
	b, err := e.m.Create("work")
	require.NoError(t, err)

	bwrite(t, b, "a.txt", "a1\n")
	bwrite(t, b, "new/deep/n.txt", "n\n")
	bdelete(t, b, "dir/c.txt")

	// The workspace is untouched.
	assert.Equal(t, "a0\n", e.get("a.txt"))
	assert.Equal(t, "<absent>", e.get("new/deep/n.txt"))
	assert.Equal(t, "c0\n", e.get("dir/c.txt"))
	// The branch sees its own changes.
	assert.Equal(t, "a1\n", bread(t, b, "a.txt"))
	assert.Equal(t, "n\n", bread(t, b, "new/deep/n.txt"))
	assert.Equal(t, "<absent>", bread(t, b, "dir/c.txt"))
	// ... and the live base elsewhere, including later workspace changes.
	e.put("b.txt", "b1\n")
	assert.Equal(t, "b1\n", bread(t, b, "b.txt"))

	ctx := context.Background()
	root, err := b.ListDir(ctx, bt(t, b, "."))
	require.NoError(t, err)
	var names []string
	for _, de := range root {
		names = append(names, de.Name)
	}
	assert.Equal(t, []string{"a.txt", "b.txt", "dir", "new"}, names)
	dir, err := b.ListDir(ctx, bt(t, b, "dir"))
	require.NoError(t, err)
	assert.Empty(t, dir)
	info, err := b.Stat(ctx, bt(t, b, "new/deep"))
	require.NoError(t, err)
	require.NotNil(t, info)
	assert.Equal(t, provider.TypeDirectory, info.Type)

	// Keys are per branch: the same path in the workspace has another key.
	assert.NotEqual(t, e.lower.TargetForRel("a.txt").Key, bt(t, b, "a.txt").Key)
	assert.True(t, IsKey(bt(t, b, "a.txt").Key))
	assert.Equal(t, "a.txt", bt(t, b, "a.txt").DisplayPath)
}

func TestBranch_GuardsAgainstBranchView(t *testing.T) {
	e := newEnv(t)
	e.put("a.txt", "a0\n")
	b, err := e.m.Create("g")
	require.NoError(t, err)
	ctx := context.Background()
	_, info, err := b.ReadTextVersion(ctx, bt(t, b, "a.txt"))
	require.NoError(t, err)
	v0 := info.Version

	// The copy-up keeps the version token: the workspace's token guards the first change.
	_, err = b.EditText(ctx, bt(t, b, "a.txt"), provider.EditRequest{OldString: "a0", NewString: "a1"}, &provider.VersionGuard{Version: v0})
	require.NoError(t, err)
	// A second change with the old token is stale: the branch changed it.
	_, err = b.EditText(ctx, bt(t, b, "a.txt"), provider.EditRequest{OldString: "a1", NewString: "a2"}, &provider.VersionGuard{Version: v0})
	assert.Equal(t, provider.CodeStaleVersion, provider.CodeOf(err))
	// Create-if-absent on a workspace file is refused; the refused copy-up leaves nothing.
	e.put("b.txt", "b\n")
	_, err = b.WriteText(ctx, bt(t, b, "b.txt"), "x", &provider.WriteIntent{Kind: provider.CreateIfAbsent})
	assert.Equal(t, provider.CodeNotObserved, provider.CodeOf(err))
	assert.Equal(t, 1, b.Changed())
	_, err = os.Stat(filepath.Join(b.dir, "upper", "b.txt"))
	assert.True(t, os.IsNotExist(err))
}

func TestBranch_MoveAndDiffStatuses(t *testing.T) {
	e := newEnv(t)
	e.put("old.txt", "same\n")
	e.put("mod.txt", "one\ntwo\nthree\n")
	e.put("gone.txt", "bye\n")
	b, err := e.m.Create("mv")
	require.NoError(t, err)
	ctx := context.Background()
	out, err := b.MoveFile(ctx, bt(t, b, "old.txt"), bt(t, b, "sub/new.txt"), provider.MoveOptions{})
	require.NoError(t, err)
	assert.True(t, out.SourceDeleted)
	bwrite(t, b, "mod.txt", "one\n2\nthree\n")
	bdelete(t, b, "gone.txt")
	bwrite(t, b, "add.txt", "added")
	bwrite(t, b, "bin.dat", "a\x00b")

	page, err := b.Diff(ctx, 0, 0)
	require.NoError(t, err)
	got := map[string]FileChange{}
	for _, f := range page.Files {
		got[f.Path] = f
	}
	assert.Equal(t, StatusAdded, got["add.txt"].Status)
	assert.Equal(t, StatusModified, got["mod.txt"].Status)
	assert.Equal(t, StatusDeleted, got["gone.txt"].Status)
	assert.Equal(t, FileChange{Path: "sub/new.txt", Status: StatusRenamed, From: "old.txt"}, got["sub/new.txt"])
	assert.True(t, got["bin.dat"].Binary)
	assert.NotContains(t, got, "old.txt")
	assert.Contains(t, page.Diff, "Binary files /dev/null and b/bin.dat differ")
	assert.NotContains(t, page.Diff, "a\x00b")
	assert.Contains(t, page.Diff, "-two\n+2\n")
	assert.Contains(t, page.Diff, "\\ No newline at end of file")

	// Paged: the diff covers the page.
	p2, err := b.Diff(ctx, 1, 2)
	require.NoError(t, err)
	assert.Equal(t, 5, p2.Total)
	require.Len(t, p2.Files, 2)
	assert.Equal(t, page.Files[1:3], p2.Files)
	assert.Contains(t, p2.Diff, "diff --git a/gone.txt b/gone.txt")
	assert.NotContains(t, p2.Diff, "add.txt")
}

func TestDiff_GitApplyReproducesTheBranch(t *testing.T) {
	e := newEnv(t)
	var lines []string
	for i := range 40 {
		lines = append(lines, "line "+strings.Repeat("x", i%7))
	}
	e.put("long.txt", strings.Join(lines, "\n")+"\n")
	e.put("noeol.txt", "a\nb")
	e.put("del.txt", "d\n")
	e.put("ren.txt", "r\n")
	b, err := e.m.Create("git")
	require.NoError(t, err)
	lines[3], lines[30] = "changed 3", "changed 30"
	lines = append(lines[:10], lines[12:]...)
	bwrite(t, b, "long.txt", strings.Join(lines, "\n")+"\n")
	bwrite(t, b, "noeol.txt", "a\nb\nc")
	bdelete(t, b, "del.txt")
	bwrite(t, b, "dir/new.txt", "new\n")
	bwrite(t, b, "empty.txt", "")
	_, err = b.MoveFile(context.Background(), bt(t, b, "ren.txt"), bt(t, b, "renamed.txt"), provider.MoveOptions{})
	require.NoError(t, err)
	page, err := b.Diff(context.Background(), 0, 0)
	require.NoError(t, err)

	require.NoError(t, os.WriteFile(filepath.Join(e.state, "d.patch"), []byte(page.Diff), 0o644))
	runGit(t, e.ws, "init", "-q")
	runGit(t, e.ws, "apply", filepath.Join(e.state, "d.patch"))
	assert.Equal(t, strings.Join(lines, "\n")+"\n", e.get("long.txt"))
	assert.Equal(t, "a\nb\nc", e.get("noeol.txt"))
	assert.Equal(t, "<absent>", e.get("del.txt"))
	assert.Equal(t, "new\n", e.get("dir/new.txt"))
	assert.Equal(t, "", e.get("empty.txt"))
	assert.Equal(t, "r\n", e.get("renamed.txt"))
	assert.Equal(t, "<absent>", e.get("ren.txt"))
}

func TestRestart_KeepsBranchesAndDropsOrphans(t *testing.T) {
	e := newEnv(t)
	e.put("a.txt", "a0\n")
	b, err := e.m.Create("keep")
	require.NoError(t, err)
	bwrite(t, b, "a.txt", "a1\n")
	bdelete(t, b, "a.txt")
	bwrite(t, b, "a.txt", "a2\n")
	bwrite(t, b, "n.txt", "n\n")
	// A copy-up a kill cut off before its record.
	require.NoError(t, os.WriteFile(filepath.Join(b.dir, "upper", "orphan.txt"), []byte("o"), 0o644))
	// And a torn last record.
	f, err := os.OpenFile(filepath.Join(b.dir, "changes.log"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"p":"x.txt","k":"fi`)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	e.restart()

	b, err = e.m.Get("keep")
	require.NoError(t, err)
	assert.Equal(t, "a2\n", bread(t, b, "a.txt"))
	assert.Equal(t, "n\n", bread(t, b, "n.txt"))
	assert.Equal(t, "<absent>", bread(t, b, "orphan.txt"))
	_, err = os.Stat(filepath.Join(b.dir, "upper", "orphan.txt"))
	assert.True(t, os.IsNotExist(err))
	// The base survived the delete-and-recreate: a commit still checks a0.
	e.put("a.txt", "changed\n")
	_, err = e.m.Commit(context.Background(), "keep", false, nil, Hooks{})
	var ce *ConflictError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, []string{"a.txt"}, ce.Paths)
}

func TestDiscard_LeavesNoTrace(t *testing.T) {
	e := newEnv(t)
	e.put("a.txt", "a0\n")
	before, err := os.ReadDir(filepath.Join(e.state, "branches"))
	require.NoError(t, err)
	b, err := e.m.Create("tmp")
	require.NoError(t, err)
	bwrite(t, b, "a.txt", "a1\n")
	bwrite(t, b, "x/y.txt", "y\n")
	require.NoError(t, e.m.Discard("tmp"))
	after, err := os.ReadDir(filepath.Join(e.state, "branches"))
	require.NoError(t, err)
	assert.Equal(t, before, after)
	rest, err := os.ReadDir(filepath.Join(e.state, "branches.journal"))
	require.NoError(t, err)
	assert.Empty(t, rest)
	assert.Empty(t, e.m.List())
	_, err = e.m.Get("tmp")
	assert.Equal(t, provider.CodeNotFound, provider.CodeOf(err))
	// The old handle no longer works.
	_, err = b.ReadText(context.Background(), b.target("a.txt"))
	assert.Equal(t, provider.CodeNotFound, provider.CodeOf(err))
	assert.Equal(t, "a0\n", e.get("a.txt"))
	e.restart()
	assert.Empty(t, e.m.List())
}

func runGit(t *testing.T, dir string, args ...string) {
	t.Helper()
	out, err := gitCmd(dir, args...)
	require.NoError(t, err, "git %v: %s", args, out)
}

func TestSessionBranch_SurvivesRestart(t *testing.T) {
	e := newEnv(t)
	_, err := e.m.Create("b")
	require.NoError(t, err)
	require.NoError(t, e.m.SetSessionBranch("s-1", "b"))
	require.NoError(t, e.m.SetSessionBranch("s-2", "b"))
	require.NoError(t, e.m.SetSessionBranch("s-2", ""))
	e.restart()
	assert.Equal(t, "b", e.m.SessionBranch("s-1"))
	assert.Equal(t, "", e.m.SessionBranch("s-2"))
	// The record is not taken for a commit journal.
	names, err := e.m.journals.List(".json")
	require.NoError(t, err)
	assert.Empty(t, names)
}

func TestBranch_WrittenBackIsNoChange(t *testing.T) {
	e := newEnv(t)
	e.put("a.txt", "a0\n")
	b, err := e.m.Create("wb")
	require.NoError(t, err)
	bwrite(t, b, "a.txt", "x\n")
	files, err := b.Files(context.Background())
	require.NoError(t, err)
	assert.Len(t, files, 1)
	bwrite(t, b, "a.txt", "a0\n")
	files, err = b.Files(context.Background())
	require.NoError(t, err)
	assert.Empty(t, files, "the branch holds the workspace's bytes again")
	e.restart()
	b, err = e.m.Get("wb")
	require.NoError(t, err)
	files, err = b.Files(context.Background())
	require.NoError(t, err)
	assert.Empty(t, files, "after a restart too (the version is hashed again)")
	// Nothing to apply: a workspace change of a.txt does not conflict.
	e.put("a.txt", "theirs\n")
	applied, err := e.m.Commit(context.Background(), "wb", false, nil, Hooks{})
	require.NoError(t, err)
	assert.Empty(t, applied)
	assert.Equal(t, "theirs\n", e.get("a.txt"))
}

// TestBranch_ConcurrentUse runs writers, readers, listers and diffs in one
// branch at once (run with -race), then commits everything.
func TestBranch_ConcurrentUse(t *testing.T) {
	e := newEnv(t)
	for i := range 20 {
		e.put(fmt.Sprintf("d/f%02d.txt", i), "old\n")
	}
	b, err := e.m.Create("cc")
	require.NoError(t, err)
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < 20; i += 4 {
				_, err := b.WriteText(ctx, b.target(fmt.Sprintf("d/f%02d.txt", i)), fmt.Sprintf("new %d\n", i), nil)
				assert.NoError(t, err)
				_, err = b.WriteText(ctx, b.target(fmt.Sprintf("n%d/g%02d.txt", w, i)), "g\n", nil)
				assert.NoError(t, err)
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for range 20 {
				_, err := b.ListDir(ctx, b.target("d"))
				assert.NoError(t, err)
				_, err = b.ReadText(ctx, b.target("d/f07.txt"))
				assert.NoError(t, err)
				_, err = b.Diff(ctx, 0, 5)
				assert.NoError(t, err)
				_ = b.Changed()
			}
		})
	}
	wg.Wait()
	files, err := e.m.Commit(ctx, "cc", false, nil, Hooks{})
	require.NoError(t, err)
	assert.Len(t, files, 40)
	for i := range 20 {
		assert.Equal(t, fmt.Sprintf("new %d\n", i), e.get(fmt.Sprintf("d/f%02d.txt", i)))
	}
}

// TestChanged_CountsTheFilesTheDiffLists: branch list's count is the
// number of files branch diff lists (a rename is one file, a removed
// directory each file in it), not the branch's records.
func TestChanged_CountsTheFilesTheDiffLists(t *testing.T) {
	e := newEnv(t)
	e.put("a.txt", "a\n")
	e.put("d/x.txt", "x\n")
	e.put("d/y.txt", "y\n")
	e.put("d/z.txt", "z\n")
	b, err := e.m.Create("c")
	require.NoError(t, err)
	ctx := context.Background()
	bread(t, b, "a.txt")
	require.NoError(t, b.Rename(ctx, "a.txt", "b.txt", false))
	for _, f := range []string{"d/x.txt", "d/y.txt", "d/z.txt"} {
		bdelete(t, b, f)
	}
	require.NoError(t, b.RemoveDir(ctx, "d"))
	files, err := b.Files(ctx)
	require.NoError(t, err)
	t.Logf("files: %+v", files)
	assert.Equal(t, len(files), b.Changed())
}

// TestOpen_RequiresAnUpperOpener pins that the program chooses the
// backend of branches' own files: Open without one refuses.
func TestOpen_RequiresAnUpperOpener(t *testing.T) {
	lfs, err := newLower(t.TempDir())
	require.NoError(t, err)
	defer lfs.Close()
	_, err = Open(t.TempDir(), lfs, Options{Logger: slog.New(slog.DiscardHandler)})
	require.ErrorContains(t, err, "Options.Upper is required")
}
