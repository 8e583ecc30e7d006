package local

import (
	"errors"
	"fmt"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// beneath is the resolution fence of every descriptor the FS opens: below
// the root and through no symbolic link at all. A path handed to
// openBeneath has been resolved (its links expanded) and judged by the view
// already, so a link met now was swapped in since: following it would reach
// a file the decision never saw (a hidden or read-only one).
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// errLinkSwapped marks an open refused because a symbolic link stood on a
// path that was resolved without one; ioFailure makes it FS_SANDBOX_DENIED.
var errLinkSwapped = errors.New("a symbolic link appeared on the resolved path")

// openBeneath opens rel relative to the root descriptor; the kernel refuses
// any resolution that would leave the root (EXDEV) or meet a symbolic link
// (ELOOP, wrapped with errLinkSwapped), whatever was swapped in since the
// path was resolved.
func (fs *FS) openBeneath(rel string, flags int, mode uint32) (int, error) {
	how := &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: beneath}
	for tries := 0; ; tries++ {
		fd, err := unix.Openat2(fs.rootFD, rel, how)
		// EAGAIN: a concurrent rename raced the ".." check; the kernel asks
		// for a retry.
		if (errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN)) && tries < 64 {
			continue
		}
		if errors.Is(err, unix.ELOOP) {
			return -1, pathErr("openat2", rel, fmt.Errorf("%w: %w", errLinkSwapped, err))
		}
		if err != nil {
			return -1, pathErr("openat2", rel, err)
		}
		return fd, nil
	}
}

// openFile wraps openBeneath into an *os.File named after rel.
func (fs *FS) openFile(rel string, flags int, mode uint32) (*os.File, error) {
	fd, err := fs.openBeneath(rel, flags, mode)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// splitRel splits a root-relative path into its parent and base name.
func splitRel(rel string) (dir, name string) {
	dir, name = path.Split(rel)
	if dir == "" {
		return ".", name
	}
	return path.Clean(dir), name
}

// fstat stats an open descriptor.
func fstat(f *os.File) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := retryEINTR0(func() error { return unix.Fstat(int(f.Fd()), &st) })
	if err != nil {
		return st, pathErr("fstat", f.Name(), err)
	}
	return st, nil
}

// statRel stats the target rel, a resolved path, through no symbolic link
// (one met is errLinkSwapped). ok is false when it does not exist.
func (fs *FS) statRel(rel string) (st unix.Stat_t, ok bool, err error) {
	fd, err := fs.openBeneath(rel, unix.O_PATH, 0)
	if errors.Is(err, unix.ENOENT) {
		return st, false, nil
	}
	if err != nil {
		return st, false, err
	}
	defer unix.Close(fd)
	if err := retryEINTR0(func() error { return unix.Fstat(fd, &st) }); err != nil {
		return st, false, pathErr("fstat", rel, err)
	}
	return st, true, nil
}

// lstatRel stats the path entry rel itself. ok is false when it does not
// exist.
func (fs *FS) lstatRel(rel string) (st unix.Stat_t, ok bool, err error) {
	if rel == "." {
		st, ok, err := fs.statRel(rel)
		return st, ok, err
	}
	dir, name := splitRel(rel)
	fd, err := fs.openBeneath(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if errors.Is(err, unix.ENOENT) {
		return st, false, nil
	}
	if err != nil {
		return st, false, err
	}
	defer unix.Close(fd)
	err = retryEINTR0(func() error { return unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) })
	if errors.Is(err, unix.ENOENT) {
		return st, false, nil
	}
	if err != nil {
		return st, false, pathErr("fstatat", rel, err)
	}
	return st, true, nil
}
