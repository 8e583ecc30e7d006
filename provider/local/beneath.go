package local

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// Beneath makes primitive changes to root-relative paths of a workspace:
// every path is resolved from the root's descriptor with openat2
// (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS), so no call leaves the root or
// follows a symbolic link, whatever was swapped into the path (such a path
// fails with ELOOP or EXDEV). It is the way in for writers that act on
// paths rather than versions: the commit journal of branches and atomic
// patches.
type Beneath struct{ fs *FS }

// Beneath returns the workspace's fenced primitives.
func (fs *FS) Beneath() *Beneath { return &Beneath{fs: fs} }

// parent opens the directory holding rel and returns it with rel's base
// name; the caller closes the descriptor.
func (b *Beneath) parent(rel string) (int, string, error) {
	dir, name := splitRel(rel)
	if name == "" || name == "." || name == ".." {
		return -1, "", pathErr("openat2", rel, unix.EINVAL)
	}
	fd, err := b.fs.openBeneath(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, "", err
	}
	return fd, name, nil
}

// Rename renames from to to, replacing a file at to.
func (b *Beneath) Rename(from, to string) error {
	fromDir, fromName, err := b.parent(from)
	if err != nil {
		return err
	}
	defer unix.Close(fromDir)
	toDir, toName, err := b.parent(to)
	if err != nil {
		return err
	}
	defer unix.Close(toDir)
	if err := retryEINTR0(func() error { return unix.Renameat(fromDir, fromName, toDir, toName) }); err != nil {
		return &os.LinkError{Op: "renameat", Old: from, New: to, Err: err}
	}
	return nil
}

// Remove removes the file, symbolic link or empty directory rel.
func (b *Beneath) Remove(rel string) error {
	dir, name, err := b.parent(rel)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	err = retryEINTR0(func() error { return unix.Unlinkat(dir, name, 0) })
	if errors.Is(err, unix.EISDIR) {
		err = retryEINTR0(func() error { return unix.Unlinkat(dir, name, unix.AT_REMOVEDIR) })
	}
	if err != nil {
		return pathErr("unlinkat", rel, err)
	}
	return nil
}

// RemoveAll removes rel and everything below it; a missing rel is no
// error. Symbolic links below it are removed, never followed.
func (b *Beneath) RemoveAll(rel string) error {
	err := b.Remove(rel)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) {
		return err
	}
	names, err := b.ReadDir(rel)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := b.RemoveAll(rel + "/" + name); err != nil {
			return err
		}
	}
	return ignoreNotExist(b.Remove(rel))
}

// ReadDir lists the names in the directory rel.
func (b *Beneath) ReadDir(rel string) ([]string, error) {
	f, err := b.fs.openFile(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("read directory %s: %w", rel, err)
	}
	return names, nil
}

// modeBits are the mode bits Mkdir and WriteFile set: permissions, set-id
// and sticky.
const modeBits = os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky

// Mkdir makes the directory rel with the mode bits perm (permissions,
// set-id and sticky; not filtered by the umask); an existing one is
// fs.ErrExist.
func (b *Beneath) Mkdir(rel string, perm os.FileMode) error {
	dir, name, err := b.parent(rel)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	if err := retryEINTR0(func() error { return unix.Mkdirat(dir, name, uint32(perm.Perm())) }); err != nil {
		return pathErr("mkdirat", rel, err)
	}
	// mkdirat applied the umask; set the bits through the new directory's
	// own descriptor, never through a name something could replace.
	f, err := b.fs.openFile(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Chmod(perm & modeBits); err != nil {
		return fmt.Errorf("mkdir %s: set its mode: %w", rel, err)
	}
	return nil
}

// MkdirAll makes the directory rel and its missing parents.
func (b *Beneath) MkdirAll(rel string) error {
	f, err := b.fs.mkdirAll(rel)
	if err != nil {
		return err
	}
	return f.Close()
}

// Link makes name a new hard link to the file existing (a symbolic link
// itself, never its target).
func (b *Beneath) Link(existing, name string) error {
	fromDir, fromName, err := b.parent(existing)
	if err != nil {
		return err
	}
	defer unix.Close(fromDir)
	toDir, toName, err := b.parent(name)
	if err != nil {
		return err
	}
	defer unix.Close(toDir)
	if err := retryEINTR0(func() error { return unix.Linkat(fromDir, fromName, toDir, toName, 0) }); err != nil {
		return &os.LinkError{Op: "linkat", Old: existing, New: name, Err: err}
	}
	return nil
}

// Symlink makes name a symbolic link to target.
func (b *Beneath) Symlink(target, name string) error {
	dir, base, err := b.parent(name)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	if err := retryEINTR0(func() error { return unix.Symlinkat(target, dir, base) }); err != nil {
		return &os.LinkError{Op: "symlinkat", Old: target, New: name, Err: err}
	}
	return nil
}

// WriteFile creates the new file rel (it must not exist) with data and
// the mode bits perm (permissions, set-id and sticky; not filtered by the
// umask).
func (b *Beneath) WriteFile(rel string, data []byte, perm os.FileMode) error {
	f, err := b.fs.openFile(rel, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, uint32(perm.Perm()))
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	merr := f.Chmod(perm & modeBits) // creation applied the umask and dropped set-id bits
	cerr := f.Close()
	if err := errors.Join(werr, merr, cerr); err != nil {
		return fmt.Errorf("write %s: %w", rel, err)
	}
	return nil
}

// Lstat returns the mode of the entry rel itself (a symbolic link is
// not followed); a missing rel is fs.ErrNotExist.
func (b *Beneath) Lstat(rel string) (os.FileMode, error) {
	st, ok, err := b.fs.lstatRel(rel)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, pathErr("fstatat", rel, unix.ENOENT)
	}
	return fileMode(st.Mode), nil
}

// Readlink returns the target of the symbolic link rel.
func (b *Beneath) Readlink(rel string) (string, error) {
	dir, name, err := b.parent(rel)
	if err != nil {
		return "", err
	}
	defer unix.Close(dir)
	target, err := readlinkAt(dir, name)
	if err != nil {
		return "", pathErr("readlinkat", rel, err)
	}
	return target, nil
}

// Sync flushes the filesystem holding the workspace (syncfs).
func (b *Beneath) Sync() error {
	fd, err := b.fs.openBeneath(".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Syncfs(fd); err != nil {
		return fmt.Errorf("syncfs %s: %w", b.fs.root, err)
	}
	return nil
}

// ignoreNotExist drops a not-exist error.
func ignoreNotExist(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// fileMode turns a stat mode into an os.FileMode (type and permission
// bits).
func fileMode(m uint32) os.FileMode {
	mode := os.FileMode(m & 0o777)
	for bit, flag := range map[uint32]os.FileMode{unix.S_ISUID: os.ModeSetuid, unix.S_ISGID: os.ModeSetgid, unix.S_ISVTX: os.ModeSticky} {
		if m&bit != 0 {
			mode |= flag
		}
	}
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= os.ModeDir
	case unix.S_IFLNK:
		mode |= os.ModeSymlink
	case unix.S_IFIFO:
		mode |= os.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= os.ModeSocket
	case unix.S_IFCHR:
		mode |= os.ModeDevice | os.ModeCharDevice
	case unix.S_IFBLK:
		mode |= os.ModeDevice
	}
	return mode
}
