package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy"
)

// Bindings that cannot be shed (issue 14, case 4): every process started by
// `dshmount exec` stays bound to its session, whatever happens to its
// parents, its session or the daemon. Each test runs twice: with binding
// cgroups (the default where cgroup v2 is writable) and with the parent
// chain only (serve --bind-cgroups=false, where exec stays alive as the
// subreaper of its tree).

// bindingModes are the serve flags of the two binding mechanisms.
var bindingModes = []struct {
	name string
	args []string
}{
	{"cgroup", nil},
	{"parent-chain", []string{"--bind-cgroups=false"}},
}

// forEachBindingMode runs test once per binding mechanism.
func forEachBindingMode(t *testing.T, test func(t *testing.T, args []string)) {
	for _, mode := range bindingModes {
		t.Run(mode.name, func(t *testing.T) { test(t, mode.args) })
	}
}

// openBindingSession opens a session for a bound process of d.
func openBindingSession(t *testing.T, d *daemon) policy.SessionID {
	t.Helper()
	sess, err := openStrict(testCtx(t), d, "binding")
	require.NoError(t, err)
	return sess
}

// waitForFile waits for a file a background process writes when it is done
// and returns its contents.
func waitForFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && strings.HasSuffix(string(b), "\n") {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not written within 30s", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// refusedWrite is a shell fragment that writes EVIL to target and records
// the write's exit status and error message in dir/status and dir/err.
func refusedWrite(target, dir string) string {
	return "{ echo EVIL > " + target + "; } 2> " + filepath.Join(dir, "err") + "; echo $? > " + filepath.Join(dir, "status")
}

// assertRefused checks what refusedWrite recorded: the write failed with
// EACCES (the shell's "Permission denied").
func assertRefused(t *testing.T, dir string) {
	t.Helper()
	status := waitForFile(t, filepath.Join(dir, "status"))
	errText, _ := os.ReadFile(filepath.Join(dir, "err"))
	assert.NotEqual(t, "0\n", status, "the bound process's write went through unguarded")
	assert.Contains(t, string(errText), "Permission denied", "refused with EACCES")
}

// TestBinding_OrphanStaysBound pins that a grandchild whose parent exited
// (reparented away from the bound command) is still bound: its write of a
// file it never read is refused (EACCES), and the file keeps its bytes.
func TestBinding_OrphanStaysBound(t *testing.T) {
	forEachBindingMode(t, func(t *testing.T, args []string) {
		d := startDaemon(t, daemonOptions{Args: args, Files: map[string]string{"f": "person\n"}})
		sess := openBindingSession(t, d)
		out := t.TempDir()
		script := "(sleep 0.2; " + refusedWrite(d.m("f"), out) + ") & exit 0"
		_, stderr, code := d.dsh("exec", "--session", string(sess), "--", "sh", "-c", script)
		require.Equal(t, 0, code, stderr)
		assertRefused(t, out)
		assertBacking(t, d, "f", "person\n")
	})
}

// TestBinding_SetsidDoubleForkStaysBound pins that leaving the session and
// process group (setsid) and double forking does not shed the binding.
func TestBinding_SetsidDoubleForkStaysBound(t *testing.T) {
	forEachBindingMode(t, func(t *testing.T, args []string) {
		d := startDaemon(t, daemonOptions{Args: args, Files: map[string]string{"g": "person\n"}})
		sess := openBindingSession(t, d)
		out := t.TempDir()
		inner := "(sleep 0.2; " + refusedWrite(d.m("g"), out) + ") & exit 0"
		script := "setsid -f sh -c '" + inner + "'; exit 0"
		_, stderr, code := d.dsh("exec", "--session", string(sess), "--", "sh", "-c", script)
		require.Equal(t, 0, code, stderr)
		assertRefused(t, out)
		assertBacking(t, d, "g", "person\n")
	})
}

// TestBinding_ClosingItsOwnSessionDoesNotUnbind pins that a bound process
// that closes its own session is refused afterwards (EACCES) on every
// guarded operation, on a file it had read as on a new one, instead of
// writing unguarded.
func TestBinding_ClosingItsOwnSessionDoesNotUnbind(t *testing.T) {
	forEachBindingMode(t, func(t *testing.T, args []string) {
		d := startDaemon(t, daemonOptions{Args: args, Files: map[string]string{"f": "person\n"}})
		sess := openBindingSession(t, d)
		script := `set -u
cat f > /dev/null
"$DSH" session close "$DSH_SESSION" || exit 10
echo EVIL > f && exit 11
echo NEW > new && exit 12
rm f && exit 13
exit 0`
		_, stderr, code := d.dsh("exec", "--session", string(sess), "--", "env", "DSH="+dshBinary, "sh", "-c", script)
		assert.Equal(t, 0, code, "a write after closing the session went through (exit 11 write, 12 create, 13 unlink): %s", stderr)
		assert.Contains(t, stderr, "Permission denied")
		assertBacking(t, d, "f", "person\n")
		_, err := os.Stat(filepath.Join(d.Src, "new"))
		assert.True(t, os.IsNotExist(err), "no file was created: %v", err)
	})
}

// TestBinding_SurvivesDaemonKill9AndRestart pins that a bound process that
// outlives its daemon (killed with SIGKILL) is still bound by the next
// daemon on the same state: its write is refused.
func TestBinding_SurvivesDaemonKill9AndRestart(t *testing.T) {
	forEachBindingMode(t, func(t *testing.T, args []string) {
		d := startDaemon(t, daemonOptions{Args: args, Files: map[string]string{"f": "person\n"}})
		dirs := d.dirs()
		t.Cleanup(func() {
			if mounted(dirs.Mnt) {
				_ = syscall.Unmount(dirs.Mnt, syscall.MNT_DETACH)
			}
		})
		sess := openBindingSession(t, d)
		out := t.TempDir()
		ready, goFile := filepath.Join(out, "ready"), filepath.Join(out, "go")
		script := "echo > " + ready + "; while [ ! -e " + goFile + " ]; do sleep 0.05; done; " + refusedWrite(d.m("f"), out)
		bound := exec.Command(dshBinary, "exec", "--socket", d.Socket, "--session", string(sess), "--", "sh", "-c", script)
		bound.Dir = out // not on the mount, which dies with the daemon
		var stderr strings.Builder
		bound.Stderr = &stderr
		require.NoError(t, bound.Start())
		exited := make(chan error, 1)
		go func() { exited <- bound.Wait() }()
		t.Cleanup(func() {
			_ = bound.Process.Kill()
			<-exited
		})
		waitForFile(t, ready) // bound, and running the script
		if args == nil && !strings.Contains(d.log(), "parent chain only") {
			cg, err := os.ReadFile("/proc/" + strconv.Itoa(bound.Process.Pid) + "/cgroup")
			require.NoError(t, err)
			assert.Contains(t, string(cg), "/dshmount/s-", "where cgroup v2 is writable, exec runs the command in a binding cgroup")
		}

		next := startDaemon(t, daemonOptions{Args: args, Dirs: dirs, Gated: true})
		killHard(t, d)
		next.release()
		require.NoError(t, os.WriteFile(goFile, nil, 0o644))
		assertRefused(t, out)
		assertBacking(t, next, "f", "person\n")
		select {
		case err := <-exited:
			exited <- err
			assert.NoError(t, err, "dshmount exec: %s", stderr.String())
		case <-time.After(30 * time.Second):
			t.Errorf("the bound process did not exit")
		}
	})
}
