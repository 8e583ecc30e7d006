package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/registry"
)

// runHook runs `dshmount fsmonitor ARGS` in-process.
func runHook(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), append([]string{"fsmonitor"}, args...), stdio{in: strings.NewReader(""), out: &out, err: &errOut})
	return code, out.String(), errOut.String()
}

func TestFsmonitor_OnlyProtocolVersion2(t *testing.T) {
	code, out, stderr := runHook("1", "1700000000000000000")
	assert.Equal(t, exitFS, code, "git falls back to a full scan on a non-zero exit")
	assert.Empty(t, out)
	assert.Contains(t, stderr, `hook protocol version "1" is not supported`)
	assert.Contains(t, stderr, "core.fsmonitorHookVersion")
}

func TestFsmonitor_WithoutADaemonGitRescansQuietly(t *testing.T) {
	t.Setenv(registry.EnvRunDir, t.TempDir()) // no daemon registered
	t.Setenv(envSocket, "")
	t.Chdir(t.TempDir())
	code, out, stderr := runHook("2", "")
	assert.Equal(t, exitOK, code)
	assert.Equal(t, "dsh:none\x00/\x00", out, "everything changed")
	assert.Empty(t, stderr, "git prints what the hook says on every command")

	// A socket of a daemon that is down: the same.
	code, out, stderr = runHook("--socket", t.TempDir()+"/gone.sock", "2", "dsh:none")
	assert.Equal(t, exitOK, code)
	assert.Equal(t, "dsh:none\x00/\x00", out)
	assert.Empty(t, stderr)
}

func TestFsmonitor_UsageNeedsVersionAndToken(t *testing.T) {
	code, out, stderr := runHook("2")
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, out)
	assert.Contains(t, stderr, "Usage: dshmount fsmonitor")
}

func TestFsmonitor_LooksInTheUsersRegistryThenRoots(t *testing.T) {
	t.Setenv(registry.EnvRunDir, "")
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1000")
	dirs, refused := hookRegistryDirs() // missing directories are fine (nothing to trust in them)
	assert.Empty(t, refused)
	assert.Equal(t, []string{"/run/user/1000/dshmount", "/run/dshmount"}, dirs,
		"git runs the hook as the user; the daemon often runs as root")
	t.Setenv(registry.EnvRunDir, "/somewhere")
	dirs, _ = hookRegistryDirs()
	assert.Equal(t, []string{"/somewhere"}, dirs, "DSH_RUN_DIR alone when set")
}

// TestFsmonitor_GitWithTheREADMESetupIsQuietWhenTheDaemonIsDown runs git
// with the README's setup (the built binary as the hook) where no daemon
// serves the repository: git prints no hook error and still sees a change
// (the hook answered "/", so git scanned).
func TestFsmonitor_GitWithTheREADMESetupIsQuietWhenTheDaemonIsDown(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	repo := t.TempDir()
	git := func(args ...string) (string, string) {
		t.Helper()
		cmd := exec.Command(gitBin, args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), registry.EnvRunDir+"="+t.TempDir(), envSocket+"=",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		require.NoError(t, cmd.Run(), "git %v: %s", args, errOut.String())
		return out.String(), errOut.String()
	}
	git("init", "-q")
	require.NoError(t, os.WriteFile(filepath.Join(repo, "a.txt"), []byte("a\n"), 0o644))
	git("add", "a.txt")
	git("commit", "-qm", "a")
	// The README's lines, with the built binary's absolute path.
	git("config", "core.fsmonitor", binary(t)+" fsmonitor")
	git("config", "core.fsmonitorHookVersion", "2")
	git("config", "core.untrackedCache", "true")
	for i := range 3 {
		require.NoError(t, os.WriteFile(filepath.Join(repo, "a.txt"), []byte(fmt.Sprintf("a%d\n", i)), 0o644))
		out, stderr := git("status", "--porcelain")
		assert.Empty(t, stderr, "git status %d prints nothing of the hook", i)
		assert.Equal(t, " M a.txt\n", out, "git saw the change")
	}
}
