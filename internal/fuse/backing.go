package fuse

import (
	"errors"
	"path"
	"strconv"
	"strings"
	"syscall"

	"github.com/dshmount/dshmount/internal/beneath"
	"golang.org/x/sys/unix"
)

// Every backing operation is relative to the mount's root descriptor: the
// directory holding the entry is opened with openat2 below the root,
// refusing every symbolic link on the way (a FUSE path never contains one:
// the kernel resolves links itself), and the entry is then changed with an
// *at call that does not follow a final link. So a backing directory or file
// swapped out of band for a link cannot lead an operation outside the
// workspace (or to another file inside it), and the relative paths are never
// longer than the mount-relative ones (no ENAMETOOLONG for a backing path
// longer than PATH_MAX).

// openatRetries bounds the retries of an openat2 that reports a concurrent
// rename (EAGAIN) during its resolution.
const openatRetries = 8

// openRel opens rel below the root with openat2 (no symbolic links, no
// escape). A refused link or escape is EACCES: the operation never reaches
// what the link points to. A path the kernel would refuse as longer than
// PATH_MAX (a caller whose working directory is deep in the mount may name
// 4,095 bytes below it) is opened piece by piece: each run of leading
// directories shorter than PATH_MAX relative to the previous one's
// descriptor, with the same resolution. So no operation fails with
// ENAMETOOLONG for a depth the kernel accepted.
//
// With the directory cache on (dirfds.go), the directory holding rel comes
// from it and only the last name is resolved, with the same resolution.
func (m *mountState) openRel(rel string, flags int, mode uint32) (int, error) {
	if rel == "" {
		rel = "."
	}
	if rel != "." && strings.IndexByte(rel, '/') > 0 && m.dirs.on() {
		e, err := m.entryAt(rel)
		if err != nil {
			return -1, err
		}
		defer e.close()
		return openat2(e.dir, e.name, flags, mode)
	}
	dir, own := m.rootFd, false
	for len(rel) >= unix.PathMax {
		cut := strings.LastIndexByte(rel[:unix.PathMax], '/')
		if cut <= 0 {
			if own {
				_ = unix.Close(dir)
			}
			return -1, unix.ENAMETOOLONG // a single name that long: the disk refuses it too
		}
		fd, err := openat2(dir, rel[:cut], unix.O_PATH|unix.O_DIRECTORY, 0)
		if own {
			_ = unix.Close(dir)
		}
		if err != nil {
			return -1, err
		}
		dir, own, rel = fd, true, rel[cut+1:]
	}
	fd, err := openat2(dir, rel, flags, mode)
	if own {
		_ = unix.Close(dir)
	}
	return fd, err
}

// openat2 opens rel below dir with the backing resolution, retrying a
// concurrent rename (EAGAIN) and EINTR, and maps refusals with refused.
func openat2(dir int, rel string, flags int, mode uint32) (int, error) {
	how := &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: beneath.Resolve}
	var fd int
	var err error
	for range openatRetries {
		fd, err = unix.Openat2(dir, rel, how)
		if err != unix.EAGAIN && err != unix.EINTR {
			break
		}
	}
	return fd, refused(err)
}

// refused maps openat2's refusals of a symbolic link (ELOOP) or of an
// escape from the root (EXDEV) to EACCES.
func refused(err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
		return unix.EACCES
	}
	return err
}

// entry is a backing entry addressed as (directory descriptor, name). The
// root itself is (rootFd, ".").
type entry struct {
	dir  int
	name string
	own  bool   // dir was opened for this entry and must be closed
	ref  *dirFd // dir is this cached descriptor, held until close
}

// close releases the directory descriptor when the entry owns it, or its
// hold on a cached one.
func (e entry) close() {
	if e.own {
		_ = unix.Close(e.dir)
	}
	if e.ref != nil {
		e.ref.release()
	}
}

// entryAt opens the directory holding rel (O_PATH, no links, below the
// root) and returns it with rel's last name. With the directory cache on,
// the directory's descriptor is the cached one (held until close).
func (m *mountState) entryAt(rel string) (entry, error) {
	if rel == "" || rel == "." {
		return entry{dir: m.rootFd, name: "."}, nil
	}
	dir, name := path.Split(rel)
	if dir == "" {
		return entry{dir: m.rootFd, name: name}, nil
	}
	if m.dirs.on() {
		fd, ref, err := m.dirs.get(dir[:len(dir)-1])
		if err != nil {
			return entry{}, err
		}
		return entry{dir: fd, name: name, own: ref == nil, ref: ref}, nil
	}
	fd, err := m.openRel(dir[:len(dir)-1], unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return entry{}, err
	}
	return entry{dir: fd, name: name, own: true}, nil
}

// statRel stats rel without following a final symbolic link.
func (m *mountState) statRel(rel string) (backingStat, error) {
	if rel == "" || rel == "." {
		return fstat(m.rootFd)
	}
	e, err := m.entryAt(rel)
	if err != nil {
		return backingStat{}, err
	}
	defer e.close()
	return statAt(e.dir, e.name, false)
}

// pathFd opens the entry itself as O_PATH without following a final link;
// the caller closes it.
func (e entry) pathFd() (int, error) {
	if e.name == "." {
		return unix.Openat(e.dir, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	return unix.Openat(e.dir, e.name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// procPath names the file behind an O_PATH descriptor for the calls that
// have no descriptor form accepting O_PATH (chmod, truncate, xattrs). The
// magic link resolves to the very inode the descriptor holds, never through
// a name.
func procPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// chmodAt sets the mode of the entry (not of what a final link points to).
func chmodAt(dir int, name string, mode uint32) error {
	e := entry{dir: dir, name: name}
	fd, err := e.pathFd()
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	bs, err := fstat(fd)
	if err != nil {
		return err
	}
	if bs.st.Mode&syscall.S_IFMT == syscall.S_IFLNK {
		return unix.EOPNOTSUPP // links have no mode of their own
	}
	return unix.Chmod(procPath(fd), mode)
}

// dirSetgid reports whether the directory dir has the set-group-ID bit, so
// new entries inherit its group (and new directories the bit itself).
func dirSetgid(dir int) bool {
	bs, err := fstat(dir)
	return err == nil && bs.st.Mode&unix.S_ISGID != 0
}
