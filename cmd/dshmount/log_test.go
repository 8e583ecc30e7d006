package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
)

// TestCLI_LogPathFiltersHideGitAndGroupSaves drives the built binary: the
// default view leaves out .git/ internals (--git shows them), --path keeps
// a subtree, --exclude drops a glob, and a write of a temporary file
// renamed over its destination is one "save" line.
func TestCLI_LogPathFiltersHideGitAndGroupSaves(t *testing.T) {
	env := newCLIEnv(t)
	s := env.openSession(t, "editor")
	do := binaryAs(t, env, s)
	do("ref\n", "write", ".git/refs/heads/main")
	do("package a\n", "write", "src/a.go")
	do("noise\n", "write", "src/build.log")
	do("saved\n", "write", ".a.txt.tmp")
	do("", "mv", ".a.txt.tmp", "a.txt")

	lines := func(out string) []string { return strings.Split(strings.TrimRight(out, "\n"), "\n") }
	out := do("", "log")
	require.Len(t, lines(out), 3, out)
	assert.NotContains(t, out, ".git/")
	assert.Regexp(t, `^\s+\d+  \S+ \S+  save     a\.txt  by socket session s-\S+ \("editor"\) pid \d+ \(written to \.a\.txt\.tmp, renamed over it\)$`, lines(out)[0])

	out = do("", "log", "--git")
	assert.Contains(t, out, ".git/refs/heads/main")
	out = do("", "log", ".git/refs/heads/main")
	assert.Contains(t, out, ".git/refs/heads/main", "asking for a path in .git shows it")

	out = do("", "log", "--path", "src")
	require.Len(t, lines(out), 2, out)
	assert.Contains(t, out, "src/a.go")
	assert.Contains(t, out, "src/build.log")

	out = do("", "log", "--path", "src", "--exclude", "*.log")
	require.Len(t, lines(out), 1, out)
	assert.Contains(t, out, "src/a.go")

	var res control.LogResult
	require.NoError(t, json.Unmarshal([]byte(do("", "log", "--json")), &res))
	require.Len(t, res.Entries, 4, "--json lists the entries as they are, .git hidden")
	assert.Equal(t, ".a.txt.tmp", res.Entries[1].Path)
}

// TestCLI_LogShowsAnAgentsCreateThenMoveAsBoth: a file created under an
// ordinary name and then moved is two operations, not an editor's save
// (only a temporary file named after its destination, renamed over it at
// once, is grouped).
func TestCLI_LogShowsAnAgentsCreateThenMoveAsBoth(t *testing.T) {
	env := newCLIEnv(t)
	s := env.openSession(t, "agent")
	do := binaryAs(t, env, s)
	do("notes\n", "write", "notes_a.txt")
	do("", "mv", "notes_a.txt", "notes.txt")
	out := do("", "log")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Len(t, lines, 2, out)
	assert.Regexp(t, `^\s+\d+  \S+ \S+  move     notes_a\.txt -> notes\.txt  by socket`, lines[0])
	assert.Regexp(t, `^\s+\d+  \S+ \S+  write    notes_a\.txt  by socket`, lines[1])
	assert.NotContains(t, out, "save")
}

func TestTempOf(t *testing.T) {
	for tmp, want := range map[string]bool{".a.txt.tmp": true, "a.txt~": true, ".a.txt.swp": true, "a.txt.tmp.123": true,
		"#a.txt#": true, "notes_a.txt": false, "a.txt": false, "sub/.a.txt.tmp": false, "b.txt": false} {
		assert.Equal(t, want, tempOf(tmp, "a.txt"), tmp)
	}
}

// binaryAs returns a runner of the built binary on env's socket for
// session s that requires success and returns stdout.
func binaryAs(t *testing.T, env *cliEnv, s string) func(stdin string, args ...string) string {
	return func(stdin string, args ...string) string {
		t.Helper()
		code, out, stderr := runBinary(t, binRun{stdin: stdin}, append(args, "--socket", env.sock, "--session", s)...)
		require.Equal(t, exitOK, code, "%v: %s", args, stderr)
		return out
	}
}
