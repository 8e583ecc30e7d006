// Package mounttest is the mount behaviour suite: the POSIX behaviour a
// user's tools (editors, shells, compilers, git) rely on, written once as
// cases that take a directory on a mount, and run over every backend the
// mount serves (the workspace and a branch), unbound and bound to a
// session. go-fuse's posixtest.All is the pattern.
//
// A case owns the empty directory it is given and touches nothing else, so
// a process bound to a strict session is never refused: every file it
// changes is one it created. The few outcomes a backend decides by design
// (a branch's copy-on-write layer refuses hard links, docs/branches.md)
// are the Backend's column, not a skipped case.
//
// The package knows nothing of dshmount's daemon, protocol or guard: a
// case sees only system calls, so it runs on the disk as well (its own
// test), which is the reference.
package mounttest

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// Backend says what serves the directory a case runs in, for the outcomes
// a backend decides by design.
type Backend int

const (
	// Disk is a host directory, or a mount with the disk's semantics:
	// the workspace mount.
	Disk Backend = iota
	// Branch is a branch mount: a copy-on-write layer that refuses hard
	// links and renaming a directory onto an existing one with EXDEV
	// (docs/branches.md, "A branch mount refuses what a copy-on-write
	// layer cannot keep").
	Branch
)

// String names the backend in test output.
func (b Backend) String() string {
	if b == Branch {
		return "branch"
	}
	return "disk"
}

// Mount is what serves the directory a case runs in, and how the
// process running the case is bound: the columns of the outcomes decided
// by design.
type Mount struct {
	Backend Backend
	// Bound is set when the process runs bound to a session (dshmount
	// exec): the guard then refuses a write through a descriptor whose
	// name no longer holds the file with ESTALE (docs/guard.md, "the name
	// must still hold the file").
	Bound bool
}

// String names the mount in test output.
func (m Mount) String() string {
	if m.Bound {
		return m.Backend.String() + ", bound"
	}
	return m.Backend.String() + ", unbound"
}

// Case is one behaviour: it runs in dir, an empty directory it owns, on
// mount m.
type Case func(t *testing.T, dir string, m Mount)

// All holds every case by name.
var All = map[string]Case{
	"CreateWriteRead":        CreateWriteRead,
	"AppendWrite":            AppendWrite,
	"TruncatePath":           TruncatePath,
	"Ftruncate":              Ftruncate,
	"RenameOverExistingFile": RenameOverExistingFile,
	"RenameDirectory":        RenameDirectory,
	"RenameDirOntoEmptyDir":  RenameDirOntoEmptyDir,
	"UnlinkOpenFile":         UnlinkOpenFile,
	"MkdirRmdir":             MkdirRmdir,
	"ReadDirEntries":         ReadDirEntries,
	"ReadDirOffsets":         ReadDirOffsets,
	"ReadDirAcrossChanges":   ReadDirAcrossChanges,
	"SymlinkReadlink":        SymlinkReadlink,
	"HardLink":               HardLink,
	"ChmodStat":              ChmodStat,
	"Utimes":                 Utimes,
	"StatFields":             StatFields,
	"Xattrs":                 Xattrs,
	"CreateExclusive":        CreateExclusive,
	"Fsync":                  Fsync,
	"MmapWriteThenRead":      MmapWriteThenRead,
	"LargeSparseWrite":       LargeSparseWrite,
	"OpenFileAcrossRename":   OpenFileAcrossRename,
}

// Names returns the names of All, sorted.
func Names() []string {
	names := make([]string, 0, len(All))
	for n := range All {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Run runs every case of All as a subtest named after it, each in a new
// directory root/<name>.
func Run(t *testing.T, root string, m Mount) {
	t.Helper()
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(root, name)
			require.NoError(t, os.MkdirAll(dir, 0o755))
			All[name](t, dir, m)
		})
	}
}

// fx is a case's directory with helpers that fail the test on an error.
type fx struct {
	t   *testing.T
	dir string
}

// p is the path of name in the case's directory.
func (f fx) p(name string) string { return filepath.Join(f.dir, name) }

// write creates or replaces name with content.
func (f fx) write(name, content string) {
	f.t.Helper()
	require.NoError(f.t, os.WriteFile(f.p(name), []byte(content), 0o644), "write %s", name)
}

// read returns name's bytes.
func (f fx) read(name string) string {
	f.t.Helper()
	b, err := os.ReadFile(f.p(name))
	require.NoError(f.t, err, "read %s", name)
	return string(b)
}

// lstat stats name without following a symbolic link.
func (f fx) lstat(name string) unix.Stat_t {
	f.t.Helper()
	var st unix.Stat_t
	require.NoError(f.t, unix.Lstat(f.p(name), &st), "lstat %s", name)
	return st
}

// fstat stats an open descriptor.
func (f fx) fstat(fd int) unix.Stat_t {
	f.t.Helper()
	var st unix.Stat_t
	require.NoError(f.t, unix.Fstat(fd, &st), "fstat")
	return st
}

// open opens name and closes the descriptor when the case ends (a case
// may close it earlier with close).
func (f fx) open(name string, flags int, mode uint32) int {
	f.t.Helper()
	fd, err := unix.Open(f.p(name), flags|unix.O_CLOEXEC, mode)
	require.NoError(f.t, err, "open %s", name)
	open := true
	f.t.Cleanup(func() {
		if open {
			_ = unix.Close(fd)
		}
	})
	return fd
}

// close closes fd and checks the close succeeded (FUSE flushes at close).
func (f fx) close(fd int) {
	f.t.Helper()
	require.NoError(f.t, unix.Close(fd), "close")
}

// pwrite writes s at off through fd.
func (f fx) pwrite(fd int, s string, off int64) {
	f.t.Helper()
	n, err := unix.Pwrite(fd, []byte(s), off)
	require.NoError(f.t, err, "pwrite at %d", off)
	require.Equal(f.t, len(s), n, "pwrite at %d", off)
}

// pread reads n bytes at off through fd.
func (f fx) pread(fd int, n int, off int64) string {
	f.t.Helper()
	buf := make([]byte, n)
	got, err := unix.Pread(fd, buf, off)
	require.NoError(f.t, err, "pread at %d", off)
	return string(buf[:got])
}

// missing checks that name does not exist.
func (f fx) missing(name string) {
	f.t.Helper()
	var st unix.Stat_t
	require.ErrorIs(f.t, unix.Lstat(f.p(name), &st), unix.ENOENT, "%s must not exist", name)
}

// names lists dir (relative to the case's directory) sorted.
func (f fx) names(dir string) []string {
	f.t.Helper()
	entries, err := os.ReadDir(f.p(dir))
	require.NoError(f.t, err, "readdir %s", dir)
	names := []string{}
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// errnoOf returns the errno an error carries, 0 for nil.
func errnoOf(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	if err != nil {
		return unix.Errno(0xffff)
	}
	return 0
}
