// Package beneath owns the resolution fence of the host-disk writers: every
// path is relative to one directory's descriptor and resolved with openat2
// (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS), so no call
// leaves the directory or follows a symbolic link, whatever was swapped
// into the path since it was looked at (such a path fails with ELOOP,
// wrapped with ErrLinkSwapped, or EXDEV). The workspace backend
// (provider/local) opens through it, and the commit journal makes its
// primitive changes with it (primitives.go). It must not know what the
// files mean: versions, guards and targets belong to its callers.
package beneath

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// Resolve is the openat2 resolution of every open through a Root: below
// the directory and through no symbolic link at all.
const Resolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// NewDirMode is the mode of a directory OpenDirAll makes, before the umask.
const NewDirMode = 0o755

// ErrLinkSwapped marks an open refused because a symbolic link stood on
// the path: one the caller resolved without a link was swapped in since.
var ErrLinkSwapped = errors.New("a symbolic link appeared on the resolved path")

// Root is a directory and the fenced calls beneath it. It borrows the
// descriptor: its owner closes it after the Root's last use.
type Root struct {
	fd   int    // O_PATH (or O_RDONLY) descriptor of the directory
	path string // the directory's host path, for messages
}

// New returns the calls beneath the open directory fd, whose host path is
// dir (used in messages only).
func New(fd int, dir string) *Root { return &Root{fd: fd, path: dir} }

// Open opens rel relative to the directory; the kernel refuses any
// resolution that would leave it (EXDEV) or meet a symbolic link (ELOOP,
// wrapped with ErrLinkSwapped). The caller closes the descriptor.
func (r *Root) Open(rel string, flags int, mode uint32) (int, error) {
	how := &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: Resolve}
	for tries := 0; ; tries++ {
		fd, err := unix.Openat2(r.fd, rel, how)
		// EAGAIN: a concurrent rename raced the ".." check; the kernel asks
		// for a retry.
		if (errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN)) && tries < 64 {
			continue
		}
		if errors.Is(err, unix.ELOOP) {
			return -1, PathErr("openat2", rel, fmt.Errorf("%w: %w", ErrLinkSwapped, err))
		}
		if err != nil {
			return -1, PathErr("openat2", rel, err)
		}
		return fd, nil
	}
}

// OpenFile is Open wrapped into an *os.File named after rel.
func (r *Root) OpenFile(rel string, flags int, mode uint32) (*os.File, error) {
	fd, err := r.Open(rel, flags, mode)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// StatTarget stats the file rel through no symbolic link (one met is
// ErrLinkSwapped). ok is false when it does not exist.
func (r *Root) StatTarget(rel string) (st unix.Stat_t, ok bool, err error) {
	fd, err := r.Open(rel, unix.O_PATH, 0)
	if errors.Is(err, unix.ENOENT) {
		return st, false, nil
	}
	if err != nil {
		return st, false, err
	}
	defer unix.Close(fd)
	if err := RetryEINTR0(func() error { return unix.Fstat(fd, &st) }); err != nil {
		return st, false, PathErr("fstat", rel, err)
	}
	return st, true, nil
}

// StatEntry stats the entry rel itself (a final symbolic link is not
// followed). ok is false when it does not exist.
func (r *Root) StatEntry(rel string) (st unix.Stat_t, ok bool, err error) {
	if rel == "." {
		return r.StatTarget(rel)
	}
	dir, name := Split(rel)
	fd, err := r.Open(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if errors.Is(err, unix.ENOENT) {
		return st, false, nil
	}
	if err != nil {
		return st, false, err
	}
	defer unix.Close(fd)
	err = RetryEINTR0(func() error { return unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) })
	if errors.Is(err, unix.ENOENT) {
		return st, false, nil
	}
	if err != nil {
		return st, false, PathErr("fstatat", rel, err)
	}
	return st, true, nil
}

// OpenDirAll opens the directory rel, making it and its missing parents
// (NewDirMode, owned like their parent when the process runs as root)
// one component at a time. The caller closes the directory.
func (r *Root) OpenDirAll(rel string) (*os.File, error) {
	if f, err := r.OpenFile(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0); !errors.Is(err, unix.ENOENT) {
		return f, err
	}
	cur, err := r.OpenFile(".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	how := &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: Resolve}
	for _, c := range components(rel) {
		curFD := int(cur.Fd())
		fd, err := RetryEINTR(func() (int, error) { return unix.Openat2(curFD, c, how) })
		if errors.Is(err, unix.ENOENT) {
			err = RetryEINTR0(func() error { return unix.Mkdirat(curFD, c, NewDirMode) })
			created := err == nil
			if created || errors.Is(err, unix.EEXIST) {
				fd, err = RetryEINTR(func() (int, error) { return unix.Openat2(curFD, c, how) })
			}
			if created && err == nil {
				InheritOwner(fd, curFD)
			}
		}
		cur.Close()
		if err != nil {
			return nil, PathErr("mkdirat", rel, err)
		}
		cur = os.NewFile(uintptr(fd), c)
	}
	return cur, nil
}

// InheritOwner gives a file created by a root daemon the owner of its
// directory, so a person's workspace does not fill with root-owned files.
func InheritOwner(fd, dirFD int) {
	var dir unix.Stat_t
	if unix.Geteuid() != 0 || unix.Fstat(dirFD, &dir) != nil || dir.Uid == 0 && dir.Gid == 0 {
		return
	}
	_ = unix.Fchown(fd, int(dir.Uid), int(dir.Gid))
}

// Split splits a relative path into its parent ("." at the top) and base
// name.
func Split(rel string) (dir, name string) {
	dir, name = path.Split(rel)
	if dir == "" {
		return ".", name
	}
	return path.Clean(dir), name
}

// ReadlinkAt returns the target of the symbolic link name below dirFD.
func ReadlinkAt(dirFD int, name string) (string, error) {
	buf := make([]byte, 256)
	for {
		n, err := RetryEINTR(func() (int, error) { return unix.Readlinkat(dirFD, name, buf) })
		if err != nil {
			return "", err
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		buf = make([]byte, 2*len(buf))
	}
}

// components splits a relative path into its names, dropping empty ones
// and ".".
func components(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// RetryEINTR repeats a raw system call interrupted by a signal.
func RetryEINTR[T any](call func() (T, error)) (T, error) {
	for {
		v, err := call()
		if !errors.Is(err, unix.EINTR) {
			return v, err
		}
	}
}

// RetryEINTR0 is RetryEINTR for calls without a result.
func RetryEINTR0(call func() error) error {
	_, err := RetryEINTR(func() (struct{}, error) { return struct{}{}, call() })
	return err
}

// PathErr wraps an errno with the call and the path, unless err already
// names a path.
func PathErr(syscallName, path string, err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return err
	}
	return &os.PathError{Op: syscallName, Path: path, Err: err}
}
