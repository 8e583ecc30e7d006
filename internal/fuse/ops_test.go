package fuse

import (
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/viewrules"
)

func TestMount_PassthroughFileOperations(t *testing.T) {
	eachMode(t, envOptions{}, func(t *testing.T, e *env) {
		e.put("dir/a.txt", "alpha\n")

		// read, stat, readdir
		got, err := os.ReadFile(e.m("dir/a.txt"))
		require.NoError(t, err)
		assert.Equal(t, "alpha\n", string(got))
		var mst, bst unix.Stat_t
		require.NoError(t, unix.Lstat(e.m("dir/a.txt"), &mst))
		require.NoError(t, unix.Lstat(e.b("dir/a.txt"), &bst))
		assert.Equal(t, bst.Ino, mst.Ino, "inode numbers are the backing ones")
		assert.Equal(t, bst.Size, mst.Size)
		assert.Equal(t, bst.Mode, mst.Mode)
		assert.Equal(t, []string{"dir"}, e.names("."))

		// create + write through the mount, then read back from both sides
		require.NoError(t, os.WriteFile(e.m("dir/b.txt"), []byte("bravo"), 0o640))
		got, err = os.ReadFile(e.b("dir/b.txt"))
		require.NoError(t, err)
		assert.Equal(t, "bravo", string(got))
		fi, err := os.Stat(e.b("dir/b.txt"))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm(), "the mode asked for, not the daemon's umask")

		// append and truncate
		f, err := os.OpenFile(e.m("dir/b.txt"), os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteString("+more")
		require.NoError(t, err)
		require.NoError(t, f.Close())
		got, _ = os.ReadFile(e.m("dir/b.txt"))
		assert.Equal(t, "bravo+more", string(got))
		require.NoError(t, os.Truncate(e.m("dir/b.txt"), 3))
		got, _ = os.ReadFile(e.b("dir/b.txt"))
		assert.Equal(t, "bra", string(got))

		// chmod, utimens
		require.NoError(t, os.Chmod(e.m("dir/b.txt"), 0o600))
		fi, _ = os.Stat(e.b("dir/b.txt"))
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		ts := []unix.Timespec{{Sec: 1_000_000, Nsec: 5}, {Sec: 2_000_000, Nsec: 7}}
		require.NoError(t, unix.UtimesNanoAt(unix.AT_FDCWD, e.m("dir/b.txt"), ts, 0))
		require.NoError(t, unix.Lstat(e.b("dir/b.txt"), &bst))
		assert.Equal(t, int64(2_000_000), bst.Mtim.Sec)
		assert.Equal(t, int64(7), bst.Mtim.Nsec)

		// rename, rename NOREPLACE, rename EXCHANGE
		require.NoError(t, os.Rename(e.m("dir/b.txt"), e.m("dir/c.txt")))
		assert.NoFileExists(t, e.b("dir/b.txt"))
		assert.FileExists(t, e.b("dir/c.txt"))
		err = unix.Renameat2(unix.AT_FDCWD, e.m("dir/c.txt"), unix.AT_FDCWD, e.m("dir/a.txt"), unix.RENAME_NOREPLACE)
		assert.ErrorIs(t, err, unix.EEXIST)
		require.NoError(t, unix.Renameat2(unix.AT_FDCWD, e.m("dir/c.txt"), unix.AT_FDCWD, e.m("dir/a.txt"), unix.RENAME_EXCHANGE))
		got, _ = os.ReadFile(e.m("dir/a.txt"))
		assert.Equal(t, "bra", string(got))
		got, _ = os.ReadFile(e.m("dir/c.txt"))
		assert.Equal(t, "alpha\n", string(got))

		// symlink, readlink, hard link
		require.NoError(t, os.Symlink("a.txt", e.m("dir/link")))
		target, err := os.Readlink(e.m("dir/link"))
		require.NoError(t, err)
		assert.Equal(t, "a.txt", target)
		got, _ = os.ReadFile(e.m("dir/link"))
		assert.Equal(t, "bra", string(got))
		require.NoError(t, os.Link(e.m("dir/a.txt"), e.m("dir/hard")))
		require.NoError(t, unix.Lstat(e.m("dir/hard"), &mst))
		assert.Equal(t, uint64(2), mst.Nlink)
		require.NoError(t, unix.Lstat(e.m("dir/a.txt"), &bst))
		assert.Equal(t, bst.Ino, mst.Ino)

		// xattrs
		require.NoError(t, unix.Setxattr(e.m("dir/a.txt"), "user.note", []byte("hi"), 0))
		buf := make([]byte, 64)
		n, err := unix.Getxattr(e.b("dir/a.txt"), "user.note", buf)
		require.NoError(t, err)
		assert.Equal(t, "hi", string(buf[:n]))
		n, err = unix.Getxattr(e.m("dir/a.txt"), "user.note", buf)
		require.NoError(t, err)
		assert.Equal(t, "hi", string(buf[:n]))
		n, err = unix.Listxattr(e.m("dir/a.txt"), buf)
		require.NoError(t, err)
		assert.Contains(t, string(buf[:n]), "user.note\x00")
		require.NoError(t, unix.Removexattr(e.m("dir/a.txt"), "user.note"))
		_, err = unix.Getxattr(e.b("dir/a.txt"), "user.note", buf)
		assert.ErrorIs(t, err, unix.ENODATA)

		// mkdir, rmdir, unlink
		require.NoError(t, os.Mkdir(e.m("sub"), 0o750))
		fi, err = os.Stat(e.b("sub"))
		require.NoError(t, err)
		assert.True(t, fi.IsDir())
		assert.Equal(t, os.FileMode(0o750), fi.Mode().Perm())
		require.NoError(t, os.Remove(e.m("sub")))
		assert.NoDirExists(t, e.b("sub"))
		require.NoError(t, os.Remove(e.m("dir/hard")))
		assert.NoFileExists(t, e.b("dir/hard"))
		assert.ElementsMatch(t, []string{"a.txt", "c.txt", "link"}, e.names("dir"))

		// fallocate, SEEK_DATA, copy_file_range
		f, err = os.OpenFile(e.m("dir/big"), os.O_CREATE|os.O_RDWR, 0o644)
		require.NoError(t, err)
		require.NoError(t, unix.Fallocate(int(f.Fd()), 0, 0, 8192))
		src, err := os.Open(e.m("dir/c.txt"))
		require.NoError(t, err)
		var inOff, outOff int64 = 0, 100
		c, err := unix.CopyFileRange(int(src.Fd()), &inOff, int(f.Fd()), &outOff, 6, 0)
		require.NoError(t, err)
		assert.Equal(t, 6, c)
		require.NoError(t, src.Close())
		off, err := unix.Seek(int(f.Fd()), 0, unix.SEEK_DATA)
		require.NoError(t, err)
		assert.Equal(t, int64(0), off)
		off, err = unix.Seek(int(f.Fd()), 0, unix.SEEK_HOLE)
		require.NoError(t, err)
		bf, err := os.Open(e.b("dir/big"))
		require.NoError(t, err)
		want, err := unix.Seek(int(bf.Fd()), 0, unix.SEEK_HOLE)
		require.NoError(t, err)
		require.NoError(t, bf.Close())
		assert.Equal(t, want, off, "holes are the backing file's")
		require.NoError(t, f.Close())
		got, _ = os.ReadFile(e.b("dir/big"))
		require.Len(t, got, 8192)
		assert.Equal(t, "alpha\n", string(got[100:106]))

		// statfs works, O_TMPFILE is refused without ENOSYS
		var sfs unix.Statfs_t
		require.NoError(t, unix.Statfs(e.mnt, &sfs))
		assert.NotZero(t, sfs.Blocks)
		_, err = unix.Open(e.m("dir"), unix.O_TMPFILE|unix.O_RDWR, 0o600)
		assert.ErrorIs(t, err, unix.EOPNOTSUPP)
	})
}

func TestMount_FileUnlinkedWhileOpenKeepsWorking(t *testing.T) {
	eachMode(t, envOptions{}, func(t *testing.T, e *env) {
		e.put("tmp.txt", "data")
		f, err := os.OpenFile(e.m("tmp.txt"), os.O_RDWR, 0)
		require.NoError(t, err)
		defer f.Close()
		require.NoError(t, os.Remove(e.m("tmp.txt")))
		fi, err := f.Stat()
		require.NoError(t, err)
		assert.Equal(t, int64(4), fi.Size())
		_, err = f.WriteAt([]byte("more"), 4)
		require.NoError(t, err)
		buf := make([]byte, 8)
		n, err := f.ReadAt(buf, 0)
		require.NoError(t, err)
		assert.Equal(t, "datamore", string(buf[:n]))
		require.NoError(t, f.Close())
		assert.NoFileExists(t, e.b("tmp.txt"))
	})
}

func TestMount_HiddenPathsDoNotExist(t *testing.T) {
	e := newEnv(t, envOptions{rules: viewrules.Rules{Hide: []string{".git", "*.key"}}})
	e.put(".git/HEAD", "ref")
	e.put("sub/id.key", "secret")
	e.put("sub/main.go", "package main")

	assert.Equal(t, []string{"sub"}, e.names("."))
	assert.Equal(t, []string{"main.go"}, e.names("sub"))
	for _, p := range []string{".git", ".git/HEAD", "sub/id.key"} {
		_, err := os.Lstat(e.m(p))
		assert.ErrorIs(t, err, os.ErrNotExist, p)
	}
	err := os.WriteFile(e.m("sub/new.key"), []byte("x"), 0o600)
	assert.ErrorIs(t, err, syscall.EACCES)
	assert.NoFileExists(t, e.b("sub/new.key"))
	err = os.Rename(e.m("sub/main.go"), e.m("sub/main.key"))
	assert.ErrorIs(t, err, syscall.EACCES)
	assert.FileExists(t, e.b("sub/main.go"))
}

func TestMount_ReadOnlyPathsRefuseEveryMutation(t *testing.T) {
	e := newEnv(t, envOptions{rules: viewrules.Rules{ReadOnly: []string{"docs", "lib/vendored"}, Hide: []string{"conf/secret"}}})
	e.put("docs/guide.md", "guide")
	e.put("free.txt", "free")
	e.put("lib/vendored/x.go", "package x")
	e.put("conf/secret/key", "k")

	got, err := os.ReadFile(e.m("docs/guide.md"))
	require.NoError(t, err)
	assert.Equal(t, "guide", string(got))

	mutations := map[string]func() error{
		"write":       func() error { return os.WriteFile(e.m("docs/guide.md"), []byte("x"), 0o644) },
		"create":      func() error { return os.WriteFile(e.m("docs/new.md"), []byte("x"), 0o644) },
		"truncate":    func() error { return os.Truncate(e.m("docs/guide.md"), 0) },
		"chmod":       func() error { return os.Chmod(e.m("docs/guide.md"), 0o600) },
		"unlink":      func() error { return os.Remove(e.m("docs/guide.md")) },
		"rename out":  func() error { return os.Rename(e.m("docs/guide.md"), e.m("guide.md")) },
		"rename in":   func() error { return os.Rename(e.m("free.txt"), e.m("docs/free.txt")) },
		"mkdir":       func() error { return os.Mkdir(e.m("docs/sub"), 0o755) },
		"symlink":     func() error { return os.Symlink("x", e.m("docs/l")) },
		"link":        func() error { return os.Link(e.m("free.txt"), e.m("docs/free.txt")) },
		"link out":    func() error { return os.Link(e.m("docs/guide.md"), e.m("guide.md")) },
		"move parent": func() error { return os.Rename(e.m("lib"), e.m("lib2")) },
		"setxattr":    func() error { return unix.Setxattr(e.m("docs/guide.md"), "user.x", []byte("1"), 0) },
		"rmdir":       func() error { return os.Remove(e.m("docs")) },
		"open rdwr":   func() error { f, err := os.OpenFile(e.m("docs/guide.md"), os.O_RDWR, 0); f.Close(); return err },
		"utimens now": func() error { return unix.UtimesNanoAt(unix.AT_FDCWD, e.m("docs/guide.md"), nil, 0) },
	}
	for name, mutate := range mutations {
		t.Run(name, func(t *testing.T) {
			assert.ErrorIs(t, mutate(), syscall.EROFS)
		})
	}
	got, _ = os.ReadFile(e.b("docs/guide.md"))
	assert.Equal(t, "guide", string(got))
	assert.FileExists(t, e.b("free.txt"))
	assert.ErrorIs(t, os.Rename(e.m("conf"), e.m("conf2")), syscall.EACCES, "moving a parent would reveal a hidden path")
	assert.FileExists(t, e.b("conf/secret/key"))
	assert.FileExists(t, e.b("lib/vendored/x.go"))
	require.NoError(t, os.Mkdir(e.m("lib/other"), 0o755))
	require.NoError(t, os.Rename(e.m("lib/other"), e.m("lib/other2")), "directories without protected paths move")
	assert.NoFileExists(t, e.b("docs/new.md"))
}
