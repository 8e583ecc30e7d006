package fsmonitor

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/dshmount/dshmount/control"
)

func TestRelative_KeepsOnlyPathsBelowTheWorktree(t *testing.T) {
	cases := []struct {
		worktree, path, want string
		ok                   bool
	}{
		{"", "a.txt", "a.txt", true},
		{".", "dir/a.txt", "dir/a.txt", true},
		{".", ".", "", false},
		{"repo", "repo/a.txt", "a.txt", true},
		{"repo", "repo/sub/a.txt", "sub/a.txt", true},
		{"repo", "repo", "", false},
		{"repo", "repository/a.txt", "", false},
		{"repo", "other/a.txt", "", false},
		{"repo", "a.txt", "", false},
		{"deep/repo", "deep/repo/x", "x", true},
		{"deep/repo", "deep/x", "", false},
	}
	for _, c := range cases {
		got, ok := Relative(c.worktree, c.path)
		assert.Equal(t, c.ok, ok, "%q in %q", c.path, c.worktree)
		assert.Equal(t, c.want, got, "%q in %q", c.path, c.worktree)
	}
}

// answer builds a fs.changes answer with token "dsh:ab:7".
func answer(changes ...control.ChangedPath) *control.ChangesResult {
	return &control.ChangesResult{Run: "ab", Seq: 7, Token: "dsh:ab:7", Changes: changes}
}

// lines splits a hook response at its NULs; the last field must be empty
// (every field is NUL-terminated).
func lines(t *testing.T, b []byte) []string {
	t.Helper()
	parts := strings.Split(string(b), "\x00")
	assert.Equal(t, "", parts[len(parts)-1], "NUL-terminated: %q", b)
	return parts[:len(parts)-1]
}

func TestResponse_TokenThenWorktreeRelativePathsWithSlashedDirectories(t *testing.T) {
	res := answer(
		control.ChangedPath{Path: "repo/b.txt", Kind: "modified"},
		control.ChangedPath{Path: "repo/a.txt", Kind: "renamed", To: "repo/new/a.txt"},
		control.ChangedPath{Path: "repo/new", Kind: "created", Dir: true},
		control.ChangedPath{Path: "repo/new/a.txt", Kind: "renamed", From: "repo/a.txt"},
		control.ChangedPath{Path: "repo/.git/index", Kind: "modified"},
		control.ChangedPath{Path: "repo/.git", Kind: "attrib", Dir: true},
		control.ChangedPath{Path: "elsewhere.txt", Kind: "modified"},
		control.ChangedPath{Path: "repo", Kind: "attrib", Dir: true},
	)
	got := lines(t, Response(res, "repo"))
	assert.Equal(t, []string{"dsh:ab:7", "a.txt", "b.txt", "new", "new/", "new/a.txt"}, got)
}

func TestResponse_EverythingIsASlash(t *testing.T) {
	everything := &control.ChangesResult{Token: "dsh:ab:9", Everything: true, Reason: "no since"}
	assert.Equal(t, []string{"dsh:ab:9", "/"}, lines(t, Response(everything, ".")))
	assert.Equal(t, []string{"dsh:ab:9", "/"}, lines(t, EverythingResponse("dsh:ab:9")))
}

func TestResponse_NothingChangedIsTheTokenAlone(t *testing.T) {
	assert.Equal(t, []byte("dsh:ab:7\x00"), Response(answer(), "."))
}

func TestResponse_DoubtsAreEverything(t *testing.T) {
	cases := []struct {
		name, worktree string
		change         control.ChangedPath
	}{
		{"the worktree deleted", "repo", control.ChangedPath{Path: "repo", Kind: "deleted"}},
		{"the workspace root renamed", "repo", control.ChangedPath{Path: ".", Kind: "renamed"}},
		{"the worktree's parent moved", "top/repo", control.ChangedPath{Path: "top", Kind: "renamed", To: "top2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			paths, everything := Paths(answer(c.change), c.worktree)
			assert.True(t, everything, "%v", paths)
		})
	}
	paths, everything := Paths(answer(control.ChangedPath{Path: "repo/f", Kind: "renamed", To: "repo/g"}), "repo")
	assert.False(t, everything, "renaming a file is listed, not everything")
	assert.Equal(t, []string{"f"}, paths)
	paths, everything = Paths(answer(
		control.ChangedPath{Path: "repo/src", Kind: "renamed", To: "repo/lib"},
		control.ChangedPath{Path: "repo/lib", Kind: "renamed", From: "repo/src", Dir: true},
	), "repo")
	assert.False(t, everything, "a renamed directory is listed by both names")
	assert.Equal(t, []string{"lib", "lib/", "src"}, paths)
}

func TestResponse_APathFromAWorkspaceRootWorktreeIsKeptWhole(t *testing.T) {
	res := answer(control.ChangedPath{Path: "dir/x", Kind: "deleted"}, control.ChangedPath{Path: ".", Kind: "attrib", Dir: true})
	assert.Equal(t, []string{"dsh:ab:7", "dir/x"}, lines(t, Response(res, "")))
}
