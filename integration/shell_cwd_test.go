package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runIn runs the dshmount binary in dir with env added to an environment
// without DSH_SOCKET and DSH_SESSION.
func runIn(t *testing.T, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, dshBinary, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DSH_SOCKET=") && !strings.HasPrefix(kv, "DSH_SESSION=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Dir = dir
	return runCaptured(t, cmd)
}

// TestCLI_InsideTheMountNeedsNoSocketAndFollowsTheShell is `cd MOUNT/src &&
// dshmount read main.go`: the daemon's registry entry names the socket, and
// the relative path resolves against the shell's directory. exec finds the
// daemon the same way. The entry goes away with the daemon.
func TestCLI_InsideTheMountNeedsNoSocketAndFollowsTheShell(t *testing.T) {
	runDir := t.TempDir()
	t.Setenv("DSH_RUN_DIR", runDir) // the daemon inherits it
	d := startDaemon(t, daemonOptions{Files: map[string]string{
		"src/main.go": "package main\n", "main.go": "package root\n",
	}})
	reg := []string{"DSH_RUN_DIR=" + runDir}

	out, stderr, code := runIn(t, d.m("src"), reg, "read", "main.go")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "package main")
	out, stderr, code = runIn(t, filepath.Join(d.Src, "src"), reg, "stat", "main.go")
	require.Equal(t, 0, code, stderr)
	assert.True(t, strings.HasPrefix(out, "src/main.go: file"), "inside the workspace directory as well: %s", out)

	out, stderr, code = runIn(t, d.m("src"), reg, "exec", "--", "cat", "main.go")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "package main\n", out)

	d.stop()
	_, stderr, code = runIn(t, d.Src, reg, "read", "main.go")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "no control socket", "the daemon removed its entry when it stopped")
}

// TestExec_RefusalsExplainedAndSessionClosedWithTheTree runs commands on the
// mount under `dshmount exec` without --session: a write the guard refuses
// is explained on stderr after the command fails, and the session exec
// opened is closed only once the last process of the tree (here one left
// running in the background) has exited.
func TestExec_RefusalsExplainedAndSessionClosedWithTheTree(t *testing.T) {
	runDir := t.TempDir()
	t.Setenv("DSH_RUN_DIR", runDir)
	d := startDaemon(t, daemonOptions{Files: map[string]string{"src/main.go": "package main\n"}})
	reg := []string{"DSH_RUN_DIR=" + runDir}

	_, stderr, code := runIn(t, d.m("src"), reg, "exec", "--name", "writer", "--", "sh", "-c", "echo x > main.go")
	assert.NotEqual(t, 0, code)
	assert.Contains(t, stderr, "dshmount: refused ")
	assert.Contains(t, stderr, " src/main.go: FS_NOT_OBSERVED, ", stderr)
	assert.Equal(t, "package main\n", readFile(t, filepath.Join(d.Src, "src/main.go")))

	_, stderr, code = runIn(t, d.m("src"), reg, "exec", "--name", "background", "--",
		"sh", "-c", "(sleep 1; cat main.go > /dev/null && touch done) >/dev/null 2>&1 &")
	require.Equal(t, 0, code, stderr)
	assert.FileExists(t, filepath.Join(d.Src, "src/done"), "exec returned only after the background process finished")
	assert.NotContains(t, stderr, "refused")

	st, err := d.Client.Status(testCtx(t))
	require.NoError(t, err)
	for _, s := range st.Sessions {
		assert.NotEqual(t, "writer", s.Name, "the session of a finished exec is closed")
		assert.NotEqual(t, "background", s.Name, "the session of a finished exec is closed")
	}
}

// readFile reads a file or fails the test.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// TestUnmount_WaitsForTheDaemonAndIsLoggedAsAnUnmount: `dshmount unmount`
// returns once the daemon has exited, and the daemon logs an unmount, not
// a mount "removed from outside".
func TestUnmount_WaitsForTheDaemonAndIsLoggedAsAnUnmount(t *testing.T) {
	runDir := t.TempDir()
	t.Setenv("DSH_RUN_DIR", runDir)
	d := startDaemon(t, daemonOptions{})
	pid := d.cmd.Process.Pid
	d.Client.Close()
	d.Client = nil

	_, stderr, code := runIn(t, t.TempDir(), []string{"DSH_RUN_DIR=" + runDir}, "unmount", d.Mnt)
	require.Equal(t, 0, code, stderr)
	assert.True(t, exitedOrZombie(pid), "the daemon has exited when unmount returns")
	assert.False(t, mounted(d.Mnt))
	d.stop()
	assert.Contains(t, d.log(), "the mount was unmounted")
	assert.NotContains(t, d.log(), "removed from outside")
}

// exitedOrZombie reports whether pid has exited (reaped or not yet).
func exitedOrZombie(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}
