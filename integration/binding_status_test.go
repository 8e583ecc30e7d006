package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBindingStatus_ABindingWhoseProcessTreeIsGoneIsShown is item 9 of
// issue 28: after the dshmount exec that bound a session was killed, with
// its children left running, dshmount status lists the session's bindings
// and says the process tree is gone.
func TestBindingStatus_ABindingWhoseProcessTreeIsGoneIsShown(t *testing.T) {
	forEachBindingMode(t, func(t *testing.T, args []string) {
		d := startDaemon(t, daemonOptions{Args: args})
		sess := openBindingSession(t, d)
		pidFile := filepath.Join(t.TempDir(), "pid")
		cmd := exec.Command(dshBinary, "exec", "--session", string(sess), "--", "sh", "-c",
			"sleep 60 </dev/null >/dev/null 2>&1 & echo $! > "+pidFile+"; wait")
		cmd.Env = append(os.Environ(), "DSH_SOCKET="+d.Socket)
		cmd.Dir = d.Mnt
		require.NoError(t, cmd.Start())
		pid, err := strconv.Atoi(strings.TrimSpace(waitForFile(t, pidFile)))
		require.NoError(t, err)
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
		// The exec parent is killed; sh and sleep run on, reparented.
		require.NoError(t, cmd.Process.Kill())
		_ = cmd.Wait()

		out, stderr, code := d.dsh("status")
		require.Equal(t, 0, code, stderr)
		assert.Contains(t, out, "bindings:\n")
		assert.Contains(t, out, "  "+string(sess)+"  pid ")
		assert.Contains(t, out, "(process tree gone", "%s", out)
	})
}
