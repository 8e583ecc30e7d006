package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
)

// dshBinary is the path of the dshmount binary built once by TestMain.
var dshBinary string

func TestMain(m *testing.M) {
	code := func() int {
		dir, err := os.MkdirTemp("", "dshmount-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "integration: temp dir:", err)
			return 2
		}
		defer os.RemoveAll(dir)
		dshBinary = filepath.Join(dir, "dshmount")
		build := exec.Command("go", "build", "-race", "-o", dshBinary, "../cmd/dshmount")
		build.Stdout, build.Stderr = os.Stdout, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "integration: building dshmount:", err)
			return 2
		}
		return m.Run()
	}()
	os.Exit(code)
}

// requireFUSE skips the test when FUSE mounts are impossible here, or fails
// it when DSH_REQUIRE_FUSE=1 says they must work.
func requireFUSE(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration mounts are not run with -short")
	}
	reason := ""
	if _, err := os.Stat("/dev/fuse"); err != nil {
		reason = "/dev/fuse is missing: " + err.Error()
	} else if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			reason = "not root and no fusermount3 in PATH"
		}
	}
	if reason == "" {
		return
	}
	if os.Getenv("DSH_REQUIRE_FUSE") == "1" {
		t.Fatalf("FUSE required (DSH_REQUIRE_FUSE=1) but unavailable: %s", reason)
	}
	t.Skipf("FUSE unavailable: %s (set DSH_REQUIRE_FUSE=1 to make this a failure)", reason)
}

// daemon is one running `dshmount serve` with its directories and a client.
type daemon struct {
	t       *testing.T
	Src     string // backing workspace
	Mnt     string // mountpoint
	State   string // state directory
	Socket  string // control socket
	cmd     *exec.Cmd
	logPath string
	Client  *control.Client
	exited  chan error
	ready   chan string    // the ready line
	gate    io.WriteCloser // stdin of a Gated daemon's shell, until release
}

// daemonOptions adjust startDaemon.
type daemonOptions struct {
	Args  []string          // extra serve flags
	Files map[string]string // initial workspace files (relative path → content)
	Dirs  *daemonDirs       // reuse directories (restart tests)
	// Gated starts the process at once but lets it exec dshmount only at
	// release. A process forked while the test holds files open on a hung
	// mount would hang at exec (closing them flushes to the dead daemon);
	// one forked earlier does not hold them.
	Gated bool
	// Binary runs this dshmount binary instead of the -race one.
	Binary string
}

// daemonDirs are the directories of a daemon, kept across restarts.
type daemonDirs struct{ Src, Mnt, State string }

// startDaemon starts `dshmount serve` on a fresh temporary workspace and
// waits for it to be ready.
func startDaemon(t *testing.T, opts daemonOptions) *daemon {
	t.Helper()
	requireFUSE(t)
	dirs := opts.Dirs
	if dirs == nil {
		base := t.TempDir()
		dirs = &daemonDirs{Src: filepath.Join(base, "src"), Mnt: filepath.Join(base, "mnt"), State: filepath.Join(base, "state")}
		require.NoError(t, os.MkdirAll(dirs.Src, 0o755))
		require.NoError(t, os.MkdirAll(dirs.Mnt, 0o755))
	}
	for rel, content := range opts.Files {
		p := filepath.Join(dirs.Src, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	d := &daemon{t: t, Src: dirs.Src, Mnt: dirs.Mnt, State: dirs.State,
		Socket: filepath.Join(dirs.State, "run", "control.sock"), exited: make(chan error, 1)}
	d.logPath = filepath.Join(t.TempDir(), "serve.log")
	logFile, err := os.Create(d.logPath)
	require.NoError(t, err)
	args := append([]string{"serve", "--state", d.State, "--socket", d.Socket}, opts.Args...)
	args = append(args, d.Src, d.Mnt)
	bin := dshBinary
	if opts.Binary != "" {
		bin = opts.Binary
	}
	d.cmd = exec.Command(bin, args...)
	if opts.Gated {
		d.cmd = exec.Command("/bin/sh", append([]string{"-c", `read -r _ && exec "$0" "$@"`, dshBinary}, args...)...)
		if d.gate, err = d.cmd.StdinPipe(); err != nil {
			require.NoError(t, err)
		}
	}
	stdout, err := d.cmd.StdoutPipe()
	require.NoError(t, err)
	d.cmd.Stderr = logFile
	require.NoError(t, d.cmd.Start())
	d.ready = make(chan string, 1)
	ready := d.ready
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logFile, "stdout:", line)
			if strings.HasPrefix(line, "ready") {
				select {
				case ready <- line:
				default:
				}
			}
		}
	}()
	go func() { d.exited <- d.cmd.Wait(); logFile.Close() }()
	t.Cleanup(d.stop)
	if opts.Gated {
		return d
	}
	d.waitReady()
	return d
}

// release lets a Gated daemon exec dshmount and waits until it is ready.
func (d *daemon) release() {
	d.t.Helper()
	_, err := io.WriteString(d.gate, "go\n")
	require.NoError(d.t, err, "release the gated daemon")
	require.NoError(d.t, d.gate.Close())
	d.waitReady()
}

// waitReady waits for the daemon's ready line and dials its socket.
func (d *daemon) waitReady() {
	t := d.t
	t.Helper()
	select {
	case <-d.ready:
	case err := <-d.exited:
		d.exited <- err
		t.Fatalf("dshmount serve exited before ready: %v\n%s", err, d.log())
	case <-time.After(30 * time.Second):
		t.Fatalf("dshmount serve not ready after 30s\n%s", d.log())
	}
	var err error
	d.Client, err = control.Dial(d.Socket)
	require.NoError(t, err, "dial control socket")
}

// log returns the daemon's stderr so far.
func (d *daemon) log() string {
	b, _ := os.ReadFile(d.logPath)
	return string(b)
}

// stop terminates the daemon with SIGTERM and waits for a clean unmount.
func (d *daemon) stop() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	if d.Client != nil {
		d.Client.Close()
		d.Client = nil
	}
	select {
	case err := <-d.exited:
		d.exited <- err
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.exited:
		d.exited <- err // stop may run again (a test's own call, then the cleanup)
	case <-time.After(20 * time.Second):
		_ = d.cmd.Process.Kill()
		select {
		case err := <-d.exited:
			d.exited <- err
		case <-time.After(10 * time.Second):
			d.t.Errorf("dshmount serve (pid %d) did not die after SIGKILL", d.cmd.Process.Pid)
		}
		_ = syscall.Unmount(d.Mnt, syscall.MNT_DETACH)
		d.t.Errorf("dshmount serve did not exit 20s after SIGTERM\n%s", d.log())
	}
	if mounted(d.Mnt) {
		_ = syscall.Unmount(d.Mnt, syscall.MNT_DETACH)
		d.t.Errorf("%s still mounted after the daemon exited", d.Mnt)
	}
}

// dirs returns the daemon's directories for a restart.
func (d *daemon) dirs() *daemonDirs { return &daemonDirs{Src: d.Src, Mnt: d.Mnt, State: d.State} }

// mounted reports whether dir is a mountpoint according to /proc/self/mountinfo.
func mounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// m returns the path of rel on the mount.
func (d *daemon) m(rel string) string { return filepath.Join(d.Mnt, rel) }

// sh runs a shell command with the mount as working directory and returns
// its combined output, failing the test on a non-zero exit.
func (d *daemon) sh(script string) string {
	d.t.Helper()
	out, err := d.shErr(script)
	require.NoError(d.t, err, "sh -c %q:\n%s", script, out)
	return out
}

// shErr runs a shell command in the mount and returns output and error.
func (d *daemon) shErr(script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Dir = d.Mnt
	cmd.Env = append(os.Environ(), "HOME="+d.t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// dsh runs a dshmount client verb against this daemon's socket.
func (d *daemon) dsh(args ...string) (string, string, int) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, dshBinary, args...)
	cmd.Env = append(os.Environ(), "DSH_SOCKET="+d.Socket)
	cmd.Dir = d.Mnt
	return runCaptured(d.t, cmd)
}

// runCaptured runs cmd and returns its stdout, its stderr and its exit
// code; a command that cannot be started fails the test.
func runCaptured(t *testing.T, cmd *exec.Cmd) (string, string, int) {
	t.Helper()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return stdout.String(), stderr.String(), ee.ExitCode()
	}
	require.NoError(t, err, "run %v", cmd.Args)
	return stdout.String(), stderr.String(), 0
}

// ctx returns a test context bounded by a minute.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
