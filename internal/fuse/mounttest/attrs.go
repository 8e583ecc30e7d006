package mounttest

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// ChmodStat: chmod by name and fchmod by descriptor set the permission
// bits stat reports (files and directories), and change the ctime; chmod
// of a missing name is ENOENT.
func ChmodStat(t *testing.T, dir string, _ Mount) {
	f := fx{t, dir}
	f.write("f", "x")
	before := f.lstat("f")
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, unix.Chmod(f.p("f"), 0o600))
	st := f.lstat("f")
	assert.Equal(t, uint32(unix.S_IFREG|0o600), st.Mode)
	assert.True(t, later(st.Ctim, before.Ctim), "chmod changes the ctime: %v then %v", before.Ctim, st.Ctim)
	fd := f.open("f", unix.O_RDONLY, 0)
	require.NoError(t, unix.Fchmod(fd, 0o751))
	assert.Equal(t, uint32(unix.S_IFREG|0o751), f.fstat(fd).Mode)
	assert.Equal(t, uint32(unix.S_IFREG|0o751), f.lstat("f").Mode)
	require.NoError(t, os.Mkdir(f.p("d"), 0o755))
	require.NoError(t, unix.Chmod(f.p("d"), 0o700))
	assert.Equal(t, uint32(unix.S_IFDIR|0o700), f.lstat("d").Mode)
	require.ErrorIs(t, unix.Chmod(f.p("missing"), 0o600), unix.ENOENT)
}

// Utimes: utimensat sets access and modification times to the
// nanosecond, UTIME_OMIT leaves one alone, and AT_SYMLINK_NOFOLLOW sets a
// symbolic link's own times.
func Utimes(t *testing.T, dir string, _ Mount) {
	f := fx{t, dir}
	f.write("f", "x")
	at, mt := unix.Timespec{Sec: 1_000_000_000, Nsec: 123_456_789}, unix.Timespec{Sec: 1_500_000_000, Nsec: 5}
	require.NoError(t, unix.UtimesNanoAt(unix.AT_FDCWD, f.p("f"), []unix.Timespec{at, mt}, 0))
	st := f.lstat("f")
	assert.Equal(t, at, st.Atim)
	assert.Equal(t, mt, st.Mtim)
	mt2 := unix.Timespec{Sec: 1_600_000_000, Nsec: 7}
	require.NoError(t, unix.UtimesNanoAt(unix.AT_FDCWD, f.p("f"), []unix.Timespec{{Nsec: unix.UTIME_OMIT}, mt2}, 0))
	st = f.lstat("f")
	assert.Equal(t, at, st.Atim, "UTIME_OMIT keeps the access time")
	assert.Equal(t, mt2, st.Mtim)

	require.NoError(t, unix.Symlink("nowhere", f.p("l")))
	lt := unix.Timespec{Sec: 43, Nsec: 2000}
	require.NoError(t, unix.UtimesNanoAt(unix.AT_FDCWD, f.p("l"), []unix.Timespec{lt, lt}, unix.AT_SYMLINK_NOFOLLOW))
	assert.Equal(t, lt, f.lstat("l").Mtim, "a symbolic link's own mtime")
}

// StatFields: a new file belongs to the caller, has one link, the size
// written, blocks for its bytes and a stable inode number; a write later
// moves mtime and ctime forward; a directory has at least two links.
func StatFields(t *testing.T, dir string, _ Mount) {
	f := fx{t, dir}
	fd := f.open("f", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o640)
	f.pwrite(fd, strings.Repeat("s", 5000), 0)
	require.NoError(t, unix.Fsync(fd))
	f.close(fd)
	st := f.lstat("f")
	assert.Equal(t, uint32(unix.S_IFREG)|0o640&^currentUmask(), st.Mode)
	assert.EqualValues(t, 1, st.Nlink)
	assert.EqualValues(t, os.Geteuid(), st.Uid)
	assert.EqualValues(t, os.Getegid(), st.Gid)
	assert.EqualValues(t, 5000, st.Size)
	assert.GreaterOrEqual(t, st.Blocks*512, int64(5000), "blocks hold the bytes")
	assert.Positive(t, st.Blksize)
	assert.NotZero(t, st.Ino)
	assert.Equal(t, st.Ino, f.lstat("f").Ino, "the inode number is stable")

	time.Sleep(20 * time.Millisecond)
	fd = f.open("f", unix.O_WRONLY, 0)
	f.pwrite(fd, "t", 0)
	f.close(fd)
	after := f.lstat("f")
	assert.True(t, later(after.Mtim, st.Mtim), "a write moves mtime: %v then %v", st.Mtim, after.Mtim)
	assert.True(t, later(after.Ctim, st.Ctim), "a write moves ctime: %v then %v", st.Ctim, after.Ctim)
	assert.Equal(t, st.Ino, after.Ino)

	require.NoError(t, os.Mkdir(f.p("d"), 0o755))
	assert.GreaterOrEqual(t, f.lstat("d").Nlink, uint64(2))
	assert.Equal(t, uint32(unix.S_IFDIR), f.lstat("d").Mode&unix.S_IFMT)
}

// Xattrs: a user extended attribute reads back, XATTR_CREATE refuses an
// existing one (EEXIST), XATTR_REPLACE a missing one (ENODATA), it is
// listed, and removed it is ENODATA.
func Xattrs(t *testing.T, dir string, _ Mount) {
	f := fx{t, dir}
	f.write("f", "x")
	p := f.p("f")
	require.NoError(t, unix.Setxattr(p, "user.mt", []byte("v1"), 0))
	assert.Equal(t, "v1", getxattr(t, p, "user.mt"))
	require.ErrorIs(t, unix.Setxattr(p, "user.mt", []byte("v2"), unix.XATTR_CREATE), unix.EEXIST)
	require.ErrorIs(t, unix.Setxattr(p, "user.other", []byte("v2"), unix.XATTR_REPLACE), unix.ENODATA)
	require.NoError(t, unix.Setxattr(p, "user.mt", []byte("value 2"), unix.XATTR_REPLACE))
	assert.Equal(t, "value 2", getxattr(t, p, "user.mt"))
	require.NoError(t, unix.Setxattr(p, "user.empty", nil, 0))
	assert.Equal(t, "", getxattr(t, p, "user.empty"))
	names := listxattr(t, p)
	assert.Contains(t, names, "user.mt")
	assert.Contains(t, names, "user.empty")
	require.NoError(t, unix.Removexattr(p, "user.mt"))
	_, err := unix.Getxattr(p, "user.mt", make([]byte, 64))
	require.ErrorIs(t, err, unix.ENODATA)
	require.ErrorIs(t, unix.Removexattr(p, "user.mt"), unix.ENODATA)
	assert.NotContains(t, listxattr(t, p), "user.mt")
	assert.Equal(t, "x", f.read("f"), "attributes leave the bytes alone")
}

// getxattr reads attribute name of path.
func getxattr(t *testing.T, path, name string) string {
	t.Helper()
	buf := make([]byte, 256)
	n, err := unix.Getxattr(path, name, buf)
	require.NoError(t, err, "getxattr %s", name)
	return string(buf[:n])
}

// listxattr lists path's attribute names, sorted.
func listxattr(t *testing.T, path string) []string {
	t.Helper()
	buf := make([]byte, 4096)
	n, err := unix.Listxattr(path, buf)
	require.NoError(t, err, "listxattr")
	var names []string
	for n := range strings.SplitSeq(string(buf[:n]), "\x00") {
		if n != "" {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// later reports whether a is after b.
func later(a, b unix.Timespec) bool {
	return a.Sec > b.Sec || a.Sec == b.Sec && a.Nsec > b.Nsec
}

// currentUmask reads the process's umask (setting it back at once).
func currentUmask() uint32 {
	m := unix.Umask(0)
	unix.Umask(m)
	return uint32(m)
}
