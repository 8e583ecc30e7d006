package mounttest

import (
	"bytes"
	"crypto/rand"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// CreateWriteRead: a created file reads back what was written, through
// the descriptor before close and through the name after; a write in the
// middle replaces bytes in place.
func CreateWriteRead(t *testing.T, dir string, _ Mount) {
	f := fx{t, dir}
	fd := f.open("f", unix.O_CREAT|unix.O_EXCL|unix.O_RDWR, 0o644)
	f.pwrite(fd, "hello", 0)
	assert.Equal(t, "hello", f.pread(fd, 100, 0), "read through the descriptor before close")
	assert.EqualValues(t, 5, f.fstat(fd).Size)
	f.close(fd)
	assert.Equal(t, "hello", f.read("f"))
	fd = f.open("f", unix.O_WRONLY, 0)
	f.pwrite(fd, "J", 0)
	f.close(fd)
	assert.Equal(t, "Jello", f.read("f"), "a write in the middle keeps the rest")
}

// AppendWrite: every write through an O_APPEND descriptor lands at the end
// of the file, whatever the descriptor's offset and whoever else wrote.
func AppendWrite(t *testing.T, dir string, _ Mount) {
	f := fx{t, dir}
	f.write("f", "ab")
	fd := f.open("f", unix.O_WRONLY|unix.O_APPEND, 0)
	_, err := unix.Write(fd, []byte("cd"))
	require.NoError(t, err)
	_, err = unix.Seek(fd, 0, 0)
	require.NoError(t, err)
	_, err = unix.Write(fd, []byte("ef"))
	require.NoError(t, err)
	other := f.open("f", unix.O_WRONLY, 0)
	f.pwrite(other, "gh", 6)
	f.close(other)
	_, err = unix.Write(fd, []byte("ij"))
	require.NoError(t, err)
	f.close(fd)
	assert.Equal(t, "abcdefghij", f.read("f"))
}

// TruncatePath: truncate by name shrinks a file and grows it with zeros.
func TruncatePath(t *testing.T, dir string, _ Mount) {
	f := fx{t, dir}
	f.write("f", "0123456789")
	require.NoError(t, unix.Truncate(f.p("f"), 4))
	assert.Equal(t, "0123", f.read("f"))
	assert.EqualValues(t, 4, f.lstat("f").Size)
	require.NoError(t, unix.Truncate(f.p("f"), 8))
	assert.Equal(t, "0123\x00\x00\x00\x00", f.read("f"))
	require.ErrorIs(t, unix.Truncate(f.p("missing"), 0), unix.ENOENT)
}

// Ftruncate: truncating an open descriptor after unflushed writes keeps
// the prefix; a later write beyond the end leaves a hole of zeros; the
// name shows it before and after close.
func Ftruncate(t *testing.T, dir string, _ Mount) {
	f := fx{t, dir}
	fd := f.open("f", unix.O_CREAT|unix.O_RDWR, 0o644)
	f.pwrite(fd, "0123456789", 0)
	require.NoError(t, unix.Ftruncate(fd, 3))
	assert.EqualValues(t, 3, f.fstat(fd).Size)
	f.pwrite(fd, "X", 6)
	assert.Equal(t, "012\x00\x00\x00X", f.read("f"), "through the name while open")
	f.close(fd)
	assert.Equal(t, "012\x00\x00\x00X", f.read("f"), "through the name after close")
	assert.EqualValues(t, 7, f.lstat("f").Size)
}

// UnlinkOpenFile: an unlinked file stays readable through a descriptor
// opened before, and writable unless the process is bound (the guard
// refuses a write whose name no longer holds the file: ESTALE); its name
// is gone at once; fstat says no link is left.
func UnlinkOpenFile(t *testing.T, dir string, m Mount) {
	f := fx{t, dir}
	f.write("f", "data")
	fd := f.open("f", unix.O_RDWR, 0)
	require.NoError(t, unix.Unlink(f.p("f")))
	f.missing("f")
	assert.Equal(t, []string{}, f.names("."))
	assert.Equal(t, "data", f.pread(fd, 10, 0))
	want := "DATA+"
	if m.Bound {
		_, err := unix.Pwrite(fd, []byte("DATA+"), 0)
		require.ErrorIs(t, err, unix.ESTALE, "a bound write to an unlinked file")
		want = "data"
	} else {
		f.pwrite(fd, "DATA+", 0)
	}
	assert.Equal(t, want, f.pread(fd, 10, 0))
	st := f.fstat(fd)
	assert.EqualValues(t, 0, st.Nlink, "fstat of an unlinked file")
	assert.EqualValues(t, len(want), st.Size)
	f.close(fd)
	f.missing("f")
}

// CreateExclusive: O_CREAT|O_EXCL creates a new file and refuses an
// existing name (a file or a dangling symbolic link) with EEXIST; O_CREAT
// alone opens an existing file without truncating it.
func CreateExclusive(t *testing.T, dir string, _ Mount) {
	f := fx{t, dir}
	fd := f.open("f", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o600)
	f.pwrite(fd, "first", 0)
	f.close(fd)
	_, err := unix.Open(f.p("f"), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	require.ErrorIs(t, err, unix.EEXIST, "O_EXCL on an existing file")
	require.NoError(t, unix.Symlink("nowhere", f.p("dangling")))
	_, err = unix.Open(f.p("dangling"), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	require.ErrorIs(t, err, unix.EEXIST, "O_EXCL on a dangling symbolic link")
	f.missing("nowhere")
	fd = f.open("f", unix.O_CREAT|unix.O_WRONLY, 0o600)
	f.close(fd)
	assert.Equal(t, "first", f.read("f"), "O_CREAT without O_TRUNC keeps the bytes")
}

// Fsync: fsync and fdatasync of a written file and fsync of its directory
// succeed, and the bytes are visible through the name before close.
func Fsync(t *testing.T, dir string, _ Mount) {
	f := fx{t, dir}
	fd := f.open("f", unix.O_CREAT|unix.O_RDWR, 0o644)
	f.pwrite(fd, "durable", 0)
	require.NoError(t, unix.Fsync(fd), "fsync")
	f.pwrite(fd, "D", 0)
	require.NoError(t, unix.Fdatasync(fd), "fdatasync")
	assert.Equal(t, "Durable", f.read("f"))
	ro := f.open("f", unix.O_RDONLY, 0)
	require.NoError(t, unix.Fsync(ro), "fsync of a read-only descriptor")
	d := f.open(".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	require.NoError(t, unix.Fsync(d), "fsync of the directory")
	f.close(fd)
}

// MmapWriteThenRead: stores through a shared mapping reach the file (read
// through another descriptor and the name), and a write through a
// descriptor is seen through a new mapping.
func MmapWriteThenRead(t *testing.T, dir string, _ Mount) {
	f := fx{t, dir}
	page := os.Getpagesize()
	fd := f.open("f", unix.O_CREAT|unix.O_RDWR, 0o644)
	require.NoError(t, unix.Ftruncate(fd, int64(2*page)))
	mem, err := unix.Mmap(fd, 0, 2*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	require.NoError(t, err)
	copy(mem[10:], "MMAP")
	copy(mem[page+5:], "TAIL")
	require.NoError(t, unix.Msync(mem, unix.MS_SYNC))
	require.NoError(t, unix.Munmap(mem))
	other := f.open("f", unix.O_RDONLY, 0)
	assert.Equal(t, "MMAP", f.pread(other, 4, 10))
	assert.Equal(t, "TAIL", f.pread(other, 4, int64(page+5)))
	f.close(fd)
	b := f.read("f")
	require.Len(t, b, 2*page)
	assert.Equal(t, "MMAP", b[10:14])
	assert.Equal(t, "TAIL", b[page+5:page+9])

	fd = f.open("f", unix.O_RDWR, 0)
	f.pwrite(fd, "WROTE", 100)
	mem, err = unix.Mmap(fd, 0, page, unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	assert.Equal(t, "WROTE", string(mem[100:105]), "a new mapping sees a descriptor's write")
	require.NoError(t, unix.Munmap(mem))
	f.close(fd)
}

// LargeSparseWrite: a write a gibibyte past the start makes a file of that
// size whose hole reads as zeros and takes (almost) no blocks; an 8 MiB
// write in one call reads back byte for byte.
func LargeSparseWrite(t *testing.T, dir string, _ Mount) {
	f := fx{t, dir}
	const far = 1 << 30
	fd := f.open("sparse", unix.O_CREAT|unix.O_RDWR, 0o644)
	f.pwrite(fd, "end", far)
	f.close(fd)
	st := f.lstat("sparse")
	assert.EqualValues(t, far+3, st.Size)
	assert.Less(t, st.Blocks*512, int64(1<<20), "the hole takes no blocks")
	fd = f.open("sparse", unix.O_RDONLY, 0)
	assert.Equal(t, strings.Repeat("\x00", 4096), f.pread(fd, 4096, far/2), "the hole reads as zeros")
	assert.Equal(t, "end", f.pread(fd, 10, far))
	f.close(fd)

	big := make([]byte, 8<<20)
	_, err := rand.Read(big)
	require.NoError(t, err)
	fd = f.open("big", unix.O_CREAT|unix.O_WRONLY, 0o644)
	n, err := unix.Write(fd, big)
	require.NoError(t, err)
	require.Equal(t, len(big), n)
	f.close(fd)
	got, err := os.ReadFile(f.p("big"))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(big, got), "8 MiB read back: %d bytes, equal=false", len(got))
}

// OpenFileAcrossRename: a descriptor keeps its file when the name moves
// (into another directory): its writes show under the new name, the old
// name is gone.
func OpenFileAcrossRename(t *testing.T, dir string, _ Mount) {
	f := fx{t, dir}
	f.write("a", "abc")
	require.NoError(t, os.Mkdir(f.p("d"), 0o755))
	fd := f.open("a", unix.O_RDWR, 0)
	f.pwrite(fd, "1", 3)
	require.NoError(t, unix.Rename(f.p("a"), f.p("d/b")))
	f.pwrite(fd, "2", 4)
	assert.Equal(t, "abc12", f.pread(fd, 10, 0))
	assert.EqualValues(t, 5, f.fstat(fd).Size)
	f.missing("a")
	assert.Equal(t, "abc12", f.read("d/b"), "the new name before close")
	f.close(fd)
	assert.Equal(t, "abc12", f.read("d/b"), "the new name after close")
}
