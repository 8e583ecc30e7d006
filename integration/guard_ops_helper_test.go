package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The guard-ops helper: a process bound to a session (run under `dshmount
// exec`) that performs one system call per request line, so a test can put
// a file into any state between the calls (opened while fresh, then changed
// by someone else) and see the errno each call gets.
//
// Requests (paths are relative to the working directory, the mount):
//
//	read P            read the whole file
//	open P            open P O_RDWR and keep the descriptor
//	close P           close the kept descriptor
//	pwrite P          pwrite "BOUND" at offset 0 through the kept descriptor
//	ftruncate P       ftruncate the kept descriptor to 2 bytes
//	punch P           fallocate(PUNCH_HOLE|KEEP_SIZE) the first 4 KiB
//	copy P            copy_file_range 5 bytes of a file it creates into P
//	mmap P            mmap the kept descriptor shared, store "MMAP!", msync
//	write P           open O_WRONLY, write "BOUND", close
//	trunc P           open O_WRONLY|O_TRUNC, close
//	truncate P        truncate(P, 1)
//	rename A B        rename(A, B)
//	exchange A B      renameat2(A, B, RENAME_EXCHANGE)
//	unlink P          unlink(P)
//	link A B          link(A, B)
//	chmod P           chmod(P, 0644)
//	touch P           utimes(P, now)
//	setxattr P        setxattr(P, user.test, "x")
//
// Each answer is one line: "ok" or "err <errno number> <message>".
const helperGuardOps = "guard-ops"

// runGuardOps serves guard-ops requests from in until EOF.
func runGuardOps(in io.Reader, out io.Writer) int {
	held := map[string]*os.File{}
	sc := bufio.NewScanner(in)
	w := bufio.NewWriter(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		err := guardOp(held, f)
		if err == nil {
			fmt.Fprintln(w, "ok")
		} else {
			fmt.Fprintf(w, "err %d %s\n", int(errnoOf(err)), strings.ReplaceAll(err.Error(), "\n", " "))
		}
		if err := w.Flush(); err != nil {
			return 1
		}
	}
	return 0
}

// guardOp performs one request.
func guardOp(held map[string]*os.File, f []string) error {
	if len(f) < 2 {
		return fmt.Errorf("bad request %q", f)
	}
	p := f[1]
	fd := func() (*os.File, error) {
		h := held[p]
		if h == nil {
			return nil, syscall.EBADF
		}
		return h, nil
	}
	switch f[0] {
	case "read":
		_, err := os.ReadFile(p)
		return err
	case "open":
		h, err := os.OpenFile(p, os.O_RDWR, 0)
		if err == nil {
			held[p] = h
		}
		return err
	case "close":
		h, err := fd()
		if err != nil {
			return err
		}
		delete(held, p)
		return h.Close()
	case "pwrite":
		h, err := fd()
		if err != nil {
			return err
		}
		_, err = h.WriteAt([]byte("BOUND"), 0)
		return err
	case "ftruncate":
		h, err := fd()
		if err != nil {
			return err
		}
		return h.Truncate(2)
	case "punch":
		h, err := fd()
		if err != nil {
			return err
		}
		return unix.Fallocate(int(h.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, 4096)
	case "copy":
		h, err := fd()
		if err != nil {
			return err
		}
		src := fmt.Sprintf(".copy-src-%d", time.Now().UnixNano())
		if err := os.WriteFile(src, []byte("COPY!"), 0o644); err != nil {
			return fmt.Errorf("create copy source: %w", err)
		}
		defer os.Remove(src)
		s, err := os.Open(src)
		if err != nil {
			return err
		}
		defer s.Close()
		var off int64
		_, err = unix.CopyFileRange(int(s.Fd()), nil, int(h.Fd()), &off, 5, 0)
		return err
	case "mmap":
		h, err := fd()
		if err != nil {
			return err
		}
		mem, err := unix.Mmap(int(h.Fd()), 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			return fmt.Errorf("mmap: %w", err)
		}
		defer unix.Munmap(mem)
		copy(mem, "MMAP!")
		if err := unix.Msync(mem, unix.MS_SYNC); err != nil {
			return fmt.Errorf("msync: %w", err)
		}
		return h.Sync()
	case "write":
		return os.WriteFile(p, []byte("BOUND"), 0o644)
	case "trunc":
		h, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			return err
		}
		return h.Close()
	case "truncate":
		return os.Truncate(p, 1)
	case "unlink":
		return os.Remove(p)
	case "chmod":
		return os.Chmod(p, 0o644)
	case "touch":
		now := time.Now()
		return os.Chtimes(p, now, now)
	case "setxattr":
		return unix.Setxattr(p, "user.test", []byte("x"), 0)
	}
	if len(f) < 3 {
		return fmt.Errorf("bad request %q", f)
	}
	switch f[0] {
	case "rename":
		return os.Rename(f[1], f[2])
	case "exchange":
		return unix.Renameat2(unix.AT_FDCWD, f[1], unix.AT_FDCWD, f[2], unix.RENAME_EXCHANGE)
	case "link":
		return os.Link(f[1], f[2])
	}
	return fmt.Errorf("unknown request %q", f[0])
}

// guardOps is a running guard-ops helper bound to a session of a daemon.
type guardOps struct {
	t       *testing.T
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     *bufio.Scanner
	stderr  lockedBuffer
	Session string
	mu      sync.Mutex
}

// lockedBuffer is a bytes.Buffer safe to read while a process writes it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startGuardOps starts a guard-ops helper under `dshmount exec` with a new
// session, its working directory the mount.
func startGuardOps(t *testing.T, d *daemon) *guardOps {
	t.Helper()
	// A session that is not strict, bound with exec --strict: the strict
	// binding is what makes the helper read before every write.
	sess, err := d.Client.OpenSession(testCtx(t), "guard-ops")
	require.NoError(t, err)
	g := &guardOps{t: t, Session: string(sess)}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	g.cmd = exec.CommandContext(ctx, dshBinary, "exec", "--socket", d.Socket, "--strict", "--session", string(sess), "--",
		testBinary(t), "-test.run=^$")
	g.cmd.Env = append(os.Environ(), helperEnv+"="+helperGuardOps)
	g.cmd.Dir = d.Mnt
	g.cmd.Stderr = &g.stderr
	g.in, err = g.cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := g.cmd.StdoutPipe()
	require.NoError(t, err)
	g.out = bufio.NewScanner(stdout)
	require.NoError(t, g.cmd.Start())
	t.Cleanup(func() {
		_ = g.in.Close()
		_ = g.cmd.Wait()
	})
	return g
}

// do sends one request and returns the errno it got (0: success).
func (g *guardOps) do(req ...string) syscall.Errno {
	g.t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	_, err := fmt.Fprintln(g.in, strings.Join(req, " "))
	require.NoError(g.t, err, "helper stderr: %s", g.stderr.String())
	require.True(g.t, g.out.Scan(), "helper ended: %s", g.stderr.String())
	line := g.out.Text()
	if line == "ok" {
		return 0
	}
	f := strings.SplitN(line, " ", 3)
	require.Len(g.t, f, 3, "reply %q", line)
	n, err := strconv.Atoi(f[1])
	require.NoError(g.t, err)
	if n == 0 {
		n = -1 // an error without an errno: never mistaken for success
	}
	return syscall.Errno(n)
}

// TestHelperGuardOps checks the helper's protocol on a plain directory.
func TestHelperGuardOps(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	require.NoError(t, os.WriteFile("f", []byte("0123456789"), 0o644))
	var out bytes.Buffer
	code := runGuardOps(strings.NewReader("open f\npwrite f\nclose f\nread missing\nexchange f g\nbogus f\n"), &out)
	require.Equal(t, 0, code)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 6)
	assert.Equal(t, []string{"ok", "ok", "ok"}, lines[:3])
	assert.True(t, strings.HasPrefix(lines[3], fmt.Sprintf("err %d ", int(syscall.ENOENT))), lines[3])
	assert.True(t, strings.HasPrefix(lines[4], fmt.Sprintf("err %d ", int(syscall.ENOENT))), lines[4])
	assert.True(t, strings.HasPrefix(lines[5], "err 0 "), lines[5])
	got, err := os.ReadFile(filepath.Join(dir, "f"))
	require.NoError(t, err)
	assert.Equal(t, "BOUND56789", string(got))
}
