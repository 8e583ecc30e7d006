package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestGitDirs_LearnsWhatADotGitFilePointsTo pins which ".git" files add a
// git directory: a "gitdir:" line, absolute under one of the workspace's
// roots or relative to the file's directory, inside the workspace; not a
// git directory outside it, the workspace's root, nor a file of another
// name or content.
func TestGitDirs_LearnsWhatADotGitFilePointsTo(t *testing.T) {
	for _, tc := range []struct {
		name, file, content, want string
	}{
		{"absolute, under the mount", "work/.git", "gitdir: /mnt/ws/.repo.git\n", ".repo.git"},
		{"absolute, under the source", "work/.git", "gitdir: /src/ws/deep/r.git", "deep/r.git"},
		{"relative (submodule)", "sub/.git", "gitdir: ../.git/modules/sub\n", ".git/modules/sub"},
		{"relative, nested", "a/b/.git", "gitdir: ../../.repos/b", ".repos/b"},
		{"outside the workspace", "work/.git", "gitdir: /elsewhere/r.git\n", ""},
		{"relative, leaving the workspace", "work/.git", "gitdir: ../../r.git\n", ""},
		{"a sibling of a root is outside", "work/.git", "gitdir: /mnt/ws2/r.git\n", ""},
		{"the workspace's root itself", "work/.git", "gitdir: /mnt/ws\n", ""},
		{"not a gitdir line", "work/.git", "[core]\n", ""},
		{"not a .git file", "work/git", "gitdir: /mnt/ws/.repo.git\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGitDirs("/mnt/ws", "/src/ws")
			assert.Equal(t, tc.want != "", g.Learn(tc.file, []byte(tc.content)))
			if tc.want == "" {
				assert.Empty(t, g.List())
				return
			}
			assert.Equal(t, []string{tc.want}, g.List())
		})
	}
}

// TestGuard_LearnedGitDirIsGitsOwn pins the git-directory rule for a git
// directory a ".git" file points to: inside it is git's own, except its
// hooks/, config and info/; the directory's name and its siblings are the
// worktree's; --guard-git and an unknown git directory guard it all.
func TestGuard_LearnedGitDirIsGitsOwn(t *testing.T) {
	g := NewGitDirs("/mnt/ws")
	g.Learn("work/.git", []byte("gitdir: /mnt/ws/.repo.git\n"))
	for _, tc := range []struct {
		rel      string
		guardGit bool
		unknown  bool
		outside  bool
	}{
		{rel: ".repo.git/index", outside: true},
		{rel: ".repo.git/refs/heads/main", outside: true},
		{rel: ".repo.git/COMMIT_EDITMSG", outside: true},
		{rel: ".repo.git/modules/s/index", outside: true},
		{rel: ".repo.git/hooks/pre-commit"},
		{rel: ".repo.git/config"},
		{rel: ".repo.git/info/exclude"},
		{rel: ".repo.git/modules/s/hooks/x"},
		{rel: ".repo.git"},
		{rel: ".repo.gitx/index"},
		{rel: "work/.git"},
		{rel: "work/main.go"},
		{rel: ".repo.git/index", guardGit: true},
		{rel: ".repo.git/index", unknown: true},
	} {
		z := Zones{GuardGit: tc.guardGit, GitDirs: g}
		if tc.unknown {
			z.GitDirs = NewGitDirs("/mnt/ws")
		}
		gt := guardTable{zones: z}
		assert.Equal(t, tc.outside, gt.outside(tc.rel, false), "%+v", tc)
	}
	assert.False(t, guardTable{zones: Zones{GitDirs: g}}.outside(".repo.git/index", true), "a hard link stays guarded")
}
