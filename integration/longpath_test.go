package integration

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// Paths of PATH_MAX relative to a deep working directory (issue 20, item
// 2): the kernel accepts a path of 4,095 bytes relative to the caller's
// working directory, however deep that directory sits in the mount, so the
// mount-relative path the daemon serves is longer than PATH_MAX. Every
// operation must then work as on the disk, and a path one byte longer must
// fail with ENAMETOOLONG as on the disk.

// cwdComponents are the names from the tree's top to the working
// directory: 1,600 bytes deep, so that a 4,095-byte path below it is a
// 5,696-byte path below the mount.
func cwdComponents() []string {
	var comps []string
	for i := range 8 {
		comps = append(comps, strings.Repeat(string(rune('a'+i)), 199))
	}
	return comps
}

// pathMaxLayout is the tree below the working directory: dirs (15 names of
// 255 bytes) and a last name of 255 bytes make a 4,095-byte path.
type pathMaxLayout struct {
	dirs []string
}

func newPathMaxLayout() pathMaxLayout {
	var l pathMaxLayout
	for i := range 15 {
		l.dirs = append(l.dirs, strings.Repeat(string(rune('A'+i)), 255))
	}
	return l
}

// path returns the cwd-relative path of name in the deepest directory.
func (l pathMaxLayout) path(name string) string {
	return strings.Join(l.dirs, "/") + "/" + name
}

func TestPOSIX_PathMaxRelativeToADeepWorkingDirectory(t *testing.T) {
	requireFUSE(t)
	if os.Geteuid() != 0 {
		t.Skip("the steps chown a file: they need root")
	}
	d := startDaemon(t, daemonOptions{})
	native := t.TempDir()
	l := newPathMaxLayout()
	full := l.path(strings.Repeat("f", 255))
	require.Len(t, full, unix.PathMax-1, "the file's path relative to the working directory is 4,095 bytes")

	want := pathMaxSteps(t, native, l)
	got := pathMaxSteps(t, d.Mnt, l)
	for _, s := range want {
		t.Logf("disk: %s", s)
	}
	assert.Equal(t, want, got, "disk vs mount at 4,095 bytes below a deep working directory")
}

// pathMaxSteps builds the working directory and the tree below it under
// root (with *at calls), then runs each operation on a thread whose working
// directory is the deep one, with paths relative to it, and returns each
// step's outcome.
func pathMaxSteps(t *testing.T, root string, l pathMaxLayout) []string {
	t.Helper()
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	var cwdFd int
	for i, c := range append(cwdComponents(), l.dirs...) {
		require.NoError(t, unix.Mkdirat(fd, c, 0o755), "mkdirat %d below %s", i, root)
		next, err := unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		require.NoError(t, err, "openat %d below %s", i, root)
		unix.Close(fd)
		fd = next
		if i == len(cwdComponents())-1 {
			cwdFd, err = unix.Dup(fd)
			require.NoError(t, err)
		}
	}
	unix.Close(fd)
	defer unix.Close(cwdFd)

	var out []string
	err = inDirectory(cwdFd, func() error {
		step := func(name string, err error) bool {
			out = append(out, name+": "+errText(err))
			return err == nil
		}
		f := l.path(strings.Repeat("f", 255))
		g := l.path(strings.Repeat("g", 255))
		sub := l.path(strings.Repeat("s", 255))
		if fd, err := unix.Open(f, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644); step("create", err) {
			_, werr := unix.Write(fd, []byte("deep\n"))
			step("write and close", errors.Join(werr, unix.Close(fd)))
		}
		if fd, err := unix.Open(f, unix.O_RDONLY|unix.O_CLOEXEC, 0); step("open existing", err) {
			buf := make([]byte, 64)
			n, rerr := unix.Read(fd, buf)
			step("read "+string(buf[:max(n, 0)]), errors.Join(rerr, unix.Close(fd)))
		}
		if fd, err := unix.Open(f, unix.O_RDWR|unix.O_TRUNC|unix.O_CLOEXEC, 0); step("open O_TRUNC", err) {
			_, werr := unix.Write(fd, []byte("again\n"))
			step("write and close", errors.Join(werr, unix.Close(fd)))
		}
		step("truncate", unix.Truncate(f, 3))
		step("link", unix.Link(f, g))
		step("chmod", unix.Chmod(f, 0o640))
		step("chown", unix.Lchown(f, 65534, 65534))
		out = append(out, "stat "+statText(g))
		step("unlink link", unix.Unlink(g))
		step("mkdir", unix.Mkdir(sub, 0o750))
		if fd, err := unix.Open(sub, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); step("open directory stream", err) {
			buf := make([]byte, 4096)
			_, rerr := unix.Getdents(fd, buf)
			step("getdents", errors.Join(rerr, unix.Close(fd)))
		}
		step("rmdir", unix.Rmdir(sub))

		// One byte past PATH_MAX, every name within NAME_MAX: the same
		// paths with one slash doubled.
		over := strings.Replace(f, "/", "//", 1)
		overDir := strings.Replace(sub, "/", "//", 1)
		if len(over) != unix.PathMax || len(overDir) != unix.PathMax {
			return fmt.Errorf("the paths past PATH_MAX are %d and %d bytes", len(over), len(overDir))
		}
		_, err := unix.Open(over, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		step("create beyond PATH_MAX", err)
		_, err = unix.Open(over, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		step("open beyond PATH_MAX", err)
		step("truncate beyond PATH_MAX", unix.Truncate(over, 0))
		step("link to beyond PATH_MAX", unix.Link(f, over))
		step("chmod beyond PATH_MAX", unix.Chmod(over, 0o600))
		step("chown beyond PATH_MAX", unix.Lchown(over, 0, 0))
		step("unlink beyond PATH_MAX", unix.Unlink(over))
		step("mkdir beyond PATH_MAX", unix.Mkdir(overDir, 0o755))
		_, err = unix.Open(overDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		step("open directory beyond PATH_MAX", err)

		step("unlink", unix.Unlink(f))
		var st unix.Stat_t
		step("stat after unlink", unix.Lstat(f, &st))
		return nil
	})
	require.NoError(t, err)
	return out
}

// statText summarises the file at p (relative to the working directory).
func statText(p string) string {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return errText(err)
	}
	return fmt.Sprintf("mode=%o nlink=%d size=%d %d:%d", st.Mode, st.Nlink, st.Size, st.Uid, st.Gid)
}

// inDirectory runs fn on a thread of its own whose working directory is the
// directory dirFd (its file-system attributes unshared, so the rest of the
// process keeps its own). The thread stays locked and exits with the
// goroutine, taking the changed working directory with it.
func inDirectory(dirFd int, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			errc <- fmt.Errorf("unshare CLONE_FS: %w", err)
			return
		}
		if err := unix.Fchdir(dirFd); err != nil {
			errc <- fmt.Errorf("fchdir: %w", err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}
