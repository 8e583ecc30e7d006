package beneath

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// The primitives below are the way in for writers that act on paths
// rather than versions: the commit journal of branches and atomic patches.
// Each resolves its path's parent through Open, so none leaves the
// directory or follows a symbolic link.

// parent opens the directory holding rel and returns it with rel's base
// name; the caller closes the descriptor.
func (r *Root) parent(rel string) (int, string, error) {
	dir, name := Split(rel)
	if name == "" || name == "." || name == ".." {
		return -1, "", PathErr("openat2", rel, unix.EINVAL)
	}
	fd, err := r.Open(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, "", err
	}
	return fd, name, nil
}

// Rename renames from to to, replacing a file at to.
func (r *Root) Rename(from, to string) error {
	fromDir, fromName, err := r.parent(from)
	if err != nil {
		return err
	}
	defer unix.Close(fromDir)
	toDir, toName, err := r.parent(to)
	if err != nil {
		return err
	}
	defer unix.Close(toDir)
	if err := RetryEINTR0(func() error { return unix.Renameat(fromDir, fromName, toDir, toName) }); err != nil {
		return &os.LinkError{Op: "renameat", Old: from, New: to, Err: err}
	}
	return nil
}

// Remove removes the file, symbolic link or empty directory rel.
func (r *Root) Remove(rel string) error {
	dir, name, err := r.parent(rel)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	err = RetryEINTR0(func() error { return unix.Unlinkat(dir, name, 0) })
	if errors.Is(err, unix.EISDIR) {
		err = RetryEINTR0(func() error { return unix.Unlinkat(dir, name, unix.AT_REMOVEDIR) })
	}
	if err != nil {
		return PathErr("unlinkat", rel, err)
	}
	return nil
}

// RemoveAll removes rel and everything below it; a missing rel is no
// error. Symbolic links below it are removed, never followed.
func (r *Root) RemoveAll(rel string) error {
	err := r.Remove(rel)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) {
		return err
	}
	names, err := r.ReadDir(rel)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := r.RemoveAll(rel + "/" + name); err != nil {
			return err
		}
	}
	return ignoreNotExist(r.Remove(rel))
}

// ReadDir lists the names in the directory rel.
func (r *Root) ReadDir(rel string) ([]string, error) {
	f, err := r.OpenFile(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
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
func (r *Root) Mkdir(rel string, perm os.FileMode) error {
	dir, name, err := r.parent(rel)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	if err := RetryEINTR0(func() error { return unix.Mkdirat(dir, name, uint32(perm.Perm())) }); err != nil {
		return PathErr("mkdirat", rel, err)
	}
	// mkdirat applied the umask; set the bits through the new directory's
	// own descriptor, never through a name something could replace.
	f, err := r.OpenFile(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
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
func (r *Root) MkdirAll(rel string) error {
	f, err := r.OpenDirAll(rel)
	if err != nil {
		return err
	}
	return f.Close()
}

// Link makes name a new hard link to the file existing (a symbolic link
// itself, never its target).
func (r *Root) Link(existing, name string) error {
	fromDir, fromName, err := r.parent(existing)
	if err != nil {
		return err
	}
	defer unix.Close(fromDir)
	toDir, toName, err := r.parent(name)
	if err != nil {
		return err
	}
	defer unix.Close(toDir)
	if err := RetryEINTR0(func() error { return unix.Linkat(fromDir, fromName, toDir, toName, 0) }); err != nil {
		return &os.LinkError{Op: "linkat", Old: existing, New: name, Err: err}
	}
	return nil
}

// Symlink makes name a symbolic link to target.
func (r *Root) Symlink(target, name string) error {
	dir, base, err := r.parent(name)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	if err := RetryEINTR0(func() error { return unix.Symlinkat(target, dir, base) }); err != nil {
		return &os.LinkError{Op: "symlinkat", Old: target, New: name, Err: err}
	}
	return nil
}

// WriteFile creates the new file rel (it must not exist) with data and
// the mode bits perm (permissions, set-id and sticky; not filtered by the
// umask).
func (r *Root) WriteFile(rel string, data []byte, perm os.FileMode) error {
	f, err := r.OpenFile(rel, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, uint32(perm.Perm()))
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
func (r *Root) Lstat(rel string) (os.FileMode, error) {
	st, ok, err := r.StatEntry(rel)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, PathErr("fstatat", rel, unix.ENOENT)
	}
	return fileMode(st.Mode), nil
}

// Readlink returns the target of the symbolic link rel.
func (r *Root) Readlink(rel string) (string, error) {
	dir, name, err := r.parent(rel)
	if err != nil {
		return "", err
	}
	defer unix.Close(dir)
	target, err := ReadlinkAt(dir, name)
	if err != nil {
		return "", PathErr("readlinkat", rel, err)
	}
	return target, nil
}

// Sync flushes the filesystem holding the workspace (syncfs).
func (r *Root) Sync() error {
	fd, err := r.Open(".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Syncfs(fd); err != nil {
		return fmt.Errorf("syncfs %s: %w", r.path, err)
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
