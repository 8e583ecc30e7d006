package mounttest

import (
	"encoding/binary"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// RenameOverExistingFile: a rename over an existing file replaces it in
// one step (the new bytes under the old name, the source name gone), and
// a descriptor open on the replaced file still reads the old bytes.
func RenameOverExistingFile(t *testing.T, dir string, _ Mount) {
	f := fx{t, dir}
	f.write("a", "new")
	f.write("b", "old")
	old := f.open("b", unix.O_RDONLY, 0)
	srcIno := f.lstat("a").Ino
	require.NoError(t, unix.Rename(f.p("a"), f.p("b")))
	f.missing("a")
	assert.Equal(t, "new", f.read("b"))
	assert.Equal(t, srcIno, f.lstat("b").Ino, "the destination name is the source's inode")
	assert.Equal(t, "old", f.pread(old, 10, 0), "the replaced file, through a descriptor opened before")
	assert.Equal(t, []string{"b"}, f.names("."))
}

// RenameDirectory: a directory renamed keeps its children under the new
// name; a file moves between directories.
func RenameDirectory(t *testing.T, dir string, _ Mount) {
	f := fx{t, dir}
	require.NoError(t, os.MkdirAll(f.p("d/sub"), 0o755))
	f.write("d/f", "x")
	f.write("d/sub/g", "y")
	require.NoError(t, unix.Rename(f.p("d"), f.p("e")))
	f.missing("d")
	assert.Equal(t, []string{"f", "sub"}, f.names("e"))
	assert.Equal(t, "x", f.read("e/f"))
	assert.Equal(t, "y", f.read("e/sub/g"))
	require.NoError(t, unix.Rename(f.p("e/sub/g"), f.p("g")))
	assert.Equal(t, "y", f.read("g"))
	assert.Equal(t, []string{}, f.names("e/sub"))
	assert.Equal(t, []string{"e", "g"}, f.names("."))
}

// RenameDirOntoEmptyDir: renaming a directory onto an empty one replaces
// it on the disk, and onto a non-empty one is ENOTEMPTY; a branch refuses
// both with EXDEV by design (docs/branches.md), leaving both directories.
func RenameDirOntoEmptyDir(t *testing.T, dir string, m Mount) {
	f := fx{t, dir}
	require.NoError(t, os.Mkdir(f.p("d"), 0o755))
	f.write("d/f", "x")
	require.NoError(t, os.Mkdir(f.p("empty"), 0o755))
	require.NoError(t, os.Mkdir(f.p("full"), 0o755))
	f.write("full/h", "h")
	err := unix.Rename(f.p("d"), f.p("full"))
	want := unix.ENOTEMPTY
	if m.Backend == Branch {
		want = unix.EXDEV
	}
	require.ErrorIs(t, err, want, "rename onto a non-empty directory")
	err = unix.Rename(f.p("d"), f.p("empty"))
	if m.Backend == Branch {
		require.ErrorIs(t, err, unix.EXDEV, "a branch refuses renaming onto an existing directory")
		assert.Equal(t, []string{"d", "empty", "full"}, f.names("."))
		assert.Equal(t, "x", f.read("d/f"))
		return
	}
	require.NoError(t, err)
	assert.Equal(t, []string{"empty", "full"}, f.names("."))
	assert.Equal(t, "x", f.read("empty/f"))
}

// MkdirRmdir: mkdir makes a directory with the mode asked (less the
// umask), refuses an existing name; rmdir refuses a non-empty directory
// and a file, removes an empty one.
func MkdirRmdir(t *testing.T, dir string, _ Mount) {
	f := fx{t, dir}
	require.NoError(t, unix.Mkdir(f.p("d"), 0o750))
	st := f.lstat("d")
	assert.Equal(t, uint32(unix.S_IFDIR), st.Mode&unix.S_IFMT)
	assert.Equal(t, uint32(0o750)&^currentUmask(), st.Mode&0o7777)
	assert.GreaterOrEqual(t, st.Nlink, uint64(2))
	require.ErrorIs(t, unix.Mkdir(f.p("d"), 0o755), unix.EEXIST)
	f.write("d/f", "x")
	require.ErrorIs(t, unix.Rmdir(f.p("d")), unix.ENOTEMPTY)
	require.ErrorIs(t, unix.Rmdir(f.p("d/f")), unix.ENOTDIR)
	require.NoError(t, unix.Unlink(f.p("d/f")))
	require.NoError(t, unix.Rmdir(f.p("d")))
	f.missing("d")
	require.ErrorIs(t, unix.Rmdir(f.p("d")), unix.ENOENT)
	assert.Equal(t, []string{}, f.names("."))
}

// ReadDirEntries: a listing has every entry once, with its type, and "."
// and "..".
func ReadDirEntries(t *testing.T, dir string, _ Mount) {
	f := fx{t, dir}
	var want []string
	for _, n := range []string{"f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7"} {
		f.write(n, n)
		want = append(want, n)
	}
	require.NoError(t, os.Mkdir(f.p("sub"), 0o755))
	require.NoError(t, unix.Symlink("f0", f.p("ln")))
	want = append(want, "ln", "sub")
	slices.Sort(want)
	assert.Equal(t, want, f.names("."))
	fd := f.open(".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	types := map[string]uint8{}
	for _, e := range readAll(t, fd, 4096) {
		_, dup := types[e.name]
		assert.False(t, dup, "%s listed twice", e.name)
		types[e.name] = e.typ
	}
	assert.Len(t, types, len(want)+2)
	assert.Contains(t, types, ".")
	assert.Contains(t, types, "..")
	assert.Equal(t, uint8(unix.DT_REG), types["f3"])
	assert.Equal(t, uint8(unix.DT_DIR), types["sub"])
	assert.Equal(t, uint8(unix.DT_LNK), types["ln"])
}

// ReadDirOffsets: seeking a directory to an entry's offset continues the
// listing after that entry; seeking to 0 after changes lists the
// directory as it is now.
func ReadDirOffsets(t *testing.T, dir string, _ Mount) {
	f := fx{t, dir}
	for i := range 40 {
		f.write(entryName(i), "")
	}
	fd := f.open(".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	full := readAll(t, fd, 512)
	require.Len(t, full, 42)
	for _, k := range []int{0, 7, 20, 40} {
		_, err := unix.Seek(fd, full[k].off, 0)
		require.NoError(t, err)
		rest := readAll(t, fd, 512)
		assert.Equal(t, direntNames(full[k+1:]), direntNames(rest), "after seeking to the offset of entry %d", k)
	}
	require.NoError(t, unix.Unlink(f.p(entryName(5))))
	f.write("added", "")
	_, err := unix.Seek(fd, 0, 0)
	require.NoError(t, err)
	now := direntNames(readAll(t, fd, 512))
	assert.Len(t, now, 42)
	assert.Contains(t, now, "added")
	assert.NotContains(t, now, entryName(5))
}

// ReadDirAcrossChanges: a listing continued after entries were removed
// and added lists every entry nobody touched exactly once, and no entry
// twice (POSIX leaves open whether the changed ones appear).
func ReadDirAcrossChanges(t *testing.T, dir string, _ Mount) {
	f := fx{t, dir}
	for i := range 40 {
		f.write(entryName(i), "")
	}
	fd := f.open(".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	first := readSome(t, fd, 512)
	require.NotEmpty(t, first)
	seen := map[string]int{}
	for _, e := range first {
		seen[e.name]++
	}
	var removed string
	for i := 39; i >= 0; i-- {
		if seen[entryName(i)] == 0 {
			removed = entryName(i)
			break
		}
	}
	require.NotEmpty(t, removed, "the first read listed every entry: make the buffer smaller")
	require.NoError(t, unix.Unlink(f.p(removed)))
	f.write("added", "")
	for _, e := range readAll(t, fd, 512) {
		seen[e.name]++
	}
	for i := range 40 {
		n := entryName(i)
		if n == removed {
			assert.LessOrEqual(t, seen[n], 1, "%s listed twice", n)
			continue
		}
		assert.Equal(t, 1, seen[n], "%s, untouched, is listed once", n)
	}
	assert.LessOrEqual(t, seen["added"], 1)
}

// SymlinkReadlink: a symbolic link reads back its target, lstat shows a
// link the size of the target, stat and open follow it (through a
// directory too), a dangling one reads back and does not resolve.
func SymlinkReadlink(t *testing.T, dir string, _ Mount) {
	f := fx{t, dir}
	f.write("target", "target bytes")
	require.NoError(t, unix.Symlink("target", f.p("l")))
	buf := make([]byte, 256)
	n, err := unix.Readlink(f.p("l"), buf)
	require.NoError(t, err)
	assert.Equal(t, "target", string(buf[:n]))
	st := f.lstat("l")
	assert.Equal(t, uint32(unix.S_IFLNK), st.Mode&unix.S_IFMT)
	assert.EqualValues(t, len("target"), st.Size)
	var fst unix.Stat_t
	require.NoError(t, unix.Stat(f.p("l"), &fst))
	assert.Equal(t, uint32(unix.S_IFREG), fst.Mode&unix.S_IFMT)
	assert.Equal(t, f.lstat("target").Ino, fst.Ino)
	assert.Equal(t, "target bytes", f.read("l"))
	require.ErrorIs(t, unix.Symlink("other", f.p("l")), unix.EEXIST)

	require.NoError(t, os.Mkdir(f.p("d"), 0o755))
	f.write("d/in", "inside")
	require.NoError(t, unix.Symlink("d", f.p("dl")))
	assert.Equal(t, "inside", f.read("dl/in"))

	require.NoError(t, unix.Symlink("missing/../nowhere", f.p("dangling")))
	n, err = unix.Readlink(f.p("dangling"), buf)
	require.NoError(t, err)
	assert.Equal(t, "missing/../nowhere", string(buf[:n]))
	require.ErrorIs(t, unix.Stat(f.p("dangling"), &fst), unix.ENOENT)
	require.NoError(t, unix.Unlink(f.p("l")))
	assert.Equal(t, "target bytes", f.read("target"), "removing the link keeps the target")
}

// HardLink: on the disk a hard link is a second name of one inode (same
// inode number, link count 2, a write through one name read through the
// other, removing one name keeps the other). A branch refuses it with
// EXDEV by design (docs/branches.md: `cp`, `git` and editors fall back to
// a copy), leaving the source alone.
func HardLink(t *testing.T, dir string, m Mount) {
	f := fx{t, dir}
	f.write("a", "one")
	err := unix.Link(f.p("a"), f.p("b"))
	if m.Backend == Branch {
		require.ErrorIs(t, err, unix.EXDEV, "a branch refuses hard links")
		f.missing("b")
		assert.EqualValues(t, 1, f.lstat("a").Nlink)
		assert.Equal(t, "one", f.read("a"))
		return
	}
	require.NoError(t, err)
	sa, sb := f.lstat("a"), f.lstat("b")
	assert.Equal(t, sa.Ino, sb.Ino)
	assert.EqualValues(t, 2, sa.Nlink)
	assert.EqualValues(t, 2, sb.Nlink)
	fd := f.open("b", unix.O_WRONLY|unix.O_APPEND, 0)
	_, err = unix.Write(fd, []byte("+two"))
	require.NoError(t, err)
	f.close(fd)
	assert.Equal(t, "one+two", f.read("a"), "a write through one name is read through the other")
	require.ErrorIs(t, unix.Link(f.p("a"), f.p("b")), unix.EEXIST)
	require.NoError(t, unix.Unlink(f.p("a")))
	assert.EqualValues(t, 1, f.lstat("b").Nlink)
	assert.Equal(t, "one+two", f.read("b"))
}

// dirent is one entry of a getdents64 answer.
type dirent struct {
	name string
	off  int64 // the offset to seek to for the entry after this one
	typ  uint8
}

// readSome makes one getdents64 call with a buffer of size bytes.
func readSome(t *testing.T, fd, size int) []dirent {
	t.Helper()
	buf := make([]byte, size)
	n, err := unix.Getdents(fd, buf)
	require.NoError(t, err, "getdents64")
	var out []dirent
	for b := buf[:n]; len(b) > 0; {
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		name := b[19:reclen]
		if i := slices.Index(name, 0); i >= 0 {
			name = name[:i]
		}
		out = append(out, dirent{name: string(name), off: int64(binary.NativeEndian.Uint64(b[8:16])), typ: b[18]})
		b = b[reclen:]
	}
	return out
}

// readAll lists fd from its offset to the end, size bytes per call.
func readAll(t *testing.T, fd, size int) []dirent {
	t.Helper()
	var out []dirent
	for {
		some := readSome(t, fd, size)
		if len(some) == 0 {
			return out
		}
		out = append(out, some...)
	}
}

// direntNames are the names of es in order.
func direntNames(es []dirent) []string {
	names := []string{}
	for _, e := range es {
		names = append(names, e.name)
	}
	return names
}

// entryName is the i-th file name of the directory cases, long enough that
// a small buffer holds only a few entries.
func entryName(i int) string {
	return "entry-with-a-longer-name-" + string(rune('a'+i/26)) + string(rune('a'+i%26))
}
