package beneath

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestBeneath_NoPrimitiveFollowsALinkOrLeavesTheRoot runs every primitive
// through a directory that is a symbolic link (to a directory outside the
// root) and through "..": each fails and the outside directory is
// unchanged.
func TestBeneath_NoPrimitiveFollowsALinkOrLeavesTheRoot(t *testing.T) {
	root, b := newTestRoot(t)
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "f"), []byte("outside"), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "link")))
	require.NoError(t, os.WriteFile(filepath.Join(root, "f"), []byte("inside"), 0o644))

	for name, call := range map[string]func() error{
		"rename into":   func() error { return b.Rename("f", "link/g") },
		"rename from":   func() error { return b.Rename("link/f", "g") },
		"remove":        func() error { return b.Remove("link/f") },
		"remove all":    func() error { return b.RemoveAll("link/f") },
		"mkdir":         func() error { return b.Mkdir("link/d", 0o755) },
		"mkdir all":     func() error { return b.MkdirAll("link/d/e") },
		"link into":     func() error { return b.Link("f", "link/h") },
		"link from":     func() error { return b.Link("link/f", "h") },
		"symlink":       func() error { return b.Symlink("x", "link/s") },
		"write file":    func() error { return b.WriteFile("link/w", []byte("x"), 0o644) },
		"readlink":      func() error { _, err := b.Readlink("link/s"); return err },
		"lstat":         func() error { _, err := b.Lstat("link/f"); return err },
		"read dir":      func() error { _, err := b.ReadDir("link"); return err },
		"dot-dot":       func() error { return b.Rename("f", "../escaped") },
		"dot-dot mkdir": func() error { return b.Mkdir("../escaped", 0o755) },
	} {
		err := call()
		require.Error(t, err, name)
		require.True(t, errorsIsAny(err, unix.ELOOP, unix.EXDEV, unix.EINVAL), "%s: %v", name, err)
	}
	names, err := os.ReadDir(outside)
	require.NoError(t, err)
	require.Len(t, names, 1, "nothing was made outside")
	got, err := os.ReadFile(filepath.Join(outside, "f"))
	require.NoError(t, err)
	require.Equal(t, "outside", string(got))
	_, err = os.Stat(filepath.Join(filepath.Dir(root), "escaped"))
	require.True(t, os.IsNotExist(err))
}

// TestBeneath_PrimitivesWorkInsideTheRoot pins what each primitive does.
func TestBeneath_PrimitivesWorkInsideTheRoot(t *testing.T) {
	root, b := newTestRoot(t)
	require.NoError(t, b.MkdirAll("a/b"))
	require.NoError(t, b.WriteFile("a/b/f", []byte("data"), 0o600))
	mode, err := b.Lstat("a/b/f")
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), mode, "the mode is set exactly, not through the umask")
	require.Error(t, b.WriteFile("a/b/f", []byte("again"), 0o600), "WriteFile creates, never replaces")
	require.NoError(t, b.WriteFile("a/suid", nil, os.ModeSetuid|0o755))
	mode, err = b.Lstat("a/suid")
	require.NoError(t, err)
	require.Equal(t, os.ModeSetuid|0o755, mode, "set-id bits are kept")
	require.NoError(t, b.Mkdir("a/shared", os.ModeSetgid|0o775))
	mode, err = b.Lstat("a/shared")
	require.NoError(t, err)
	require.Equal(t, os.ModeDir|os.ModeSetgid|0o775, mode)
	require.NoError(t, b.Link("a/b/f", "a/hard"))
	require.NoError(t, b.Rename("a/b/f", "a/moved"))
	require.NoError(t, b.Symlink("moved", "a/sym"))
	target, err := b.Readlink("a/sym")
	require.NoError(t, err)
	require.Equal(t, "moved", target)
	mode, err = b.Lstat("a/sym")
	require.NoError(t, err)
	require.NotZero(t, mode&os.ModeSymlink, "Lstat does not follow")
	require.NoError(t, b.Mkdir("a/d", 0o701))
	mode, err = b.Lstat("a/d")
	require.NoError(t, err)
	require.Equal(t, os.ModeDir|0o701, mode)
	require.ErrorIs(t, b.Mkdir("a/d", 0o755), os.ErrExist)
	names, err := b.ReadDir("a")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"b", "hard", "moved", "sym", "d", "suid", "shared"}, names)
	require.NoError(t, b.Remove("a/d"))
	require.NoError(t, b.RemoveAll("a"))
	require.NoError(t, b.RemoveAll("a"), "a missing tree is no error")
	_, err = os.Stat(filepath.Join(root, "a"))
	require.True(t, os.IsNotExist(err))
	require.NoError(t, b.Sync())
}

func errorsIsAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// newTestRoot returns a temporary directory and the calls beneath it.
func newTestRoot(t *testing.T) (string, *Root) {
	t.Helper()
	dir := t.TempDir()
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = unix.Close(fd) })
	return dir, New(fd, dir)
}
