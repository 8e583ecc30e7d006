package fuse

import (
	"context"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/viewrules"
)

// VersionXattr is the read-only extended attribute that holds a file's
// current version token, the same token the control socket reports:
//
//	getfattr --only-values -n user.dsh.version FILE
const VersionXattr = "user.dsh.version"

// xattrReply answers a get/list request for value: its size when dest is
// empty (a size probe), ERANGE when dest is too small, else the copy.
func xattrReply(value, dest []byte) (uint32, syscall.Errno) {
	if len(dest) == 0 {
		return uint32(len(value)), 0
	}
	if len(dest) < len(value) {
		return uint32(len(value)), syscall.ERANGE
	}
	return uint32(copy(dest, value)), 0
}

// xattrFd opens the node's own file as O_PATH for an attribute call
// through procPath; a symbolic link (whose attributes cannot be reached
// without following it) answers link. The caller closes the descriptor.
func (n *node) xattrFd() (fd int, link bool, err error) {
	e, err := n.m.be.entry(n.rel())
	if err != nil {
		return -1, false, err
	}
	defer e.close()
	fd, err = e.pathFd()
	if err != nil {
		return -1, false, n.staleIfGone(err)
	}
	bs, err := fstat(fd)
	if err == nil {
		err = n.current(&bs)
	}
	if err != nil {
		_ = unix.Close(fd)
		return -1, false, err
	}
	return fd, bs.st.Mode&syscall.S_IFMT == syscall.S_IFLNK, nil
}

// Getxattr implements fs.NodeGetxattrer.
func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	rel := n.rel()
	if n.m.access(rel) == viewrules.Hidden {
		return 0, syscall.ENOENT
	}
	if attr == VersionXattr {
		bs, err := n.lstat()
		if err != nil {
			return 0, errnoOf(err)
		}
		ver, ok := n.m.vers.Cached(&bs.st)
		if !ok {
			if ver, err = n.m.versionOfRel(rel, &bs.st); err != nil {
				return 0, errnoOf(err)
			}
		}
		return xattrReply([]byte(ver), dest)
	}
	bit, epoch, absent := n.cachedXattrAbsent(attr)
	if absent {
		return 0, syscall.ENODATA
	}
	fd, link, err := n.xattrFd()
	if err != nil {
		return 0, errnoOf(err)
	}
	defer unix.Close(fd)
	if link {
		return 0, syscall.ENODATA
	}
	sz, err := unix.Getxattr(procPath(fd), attr, dest)
	n.learnXattr(bit, epoch, err)
	if err != nil {
		return uint32(max(sz, 0)), errnoOf(err)
	}
	return uint32(sz), 0
}

// Listxattr implements fs.NodeListxattrer: the backing file's attributes
// plus VersionXattr.
func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	rel := n.rel()
	if n.m.access(rel) == viewrules.Hidden {
		return 0, syscall.ENOENT
	}
	fd, link, err := n.xattrFd()
	if err != nil {
		return 0, errnoOf(err)
	}
	defer unix.Close(fd)
	var names []byte
	for !link {
		p := procPath(fd)
		sz, err := unix.Listxattr(p, nil)
		if err != nil {
			return 0, errnoOf(err)
		}
		names = make([]byte, sz)
		sz, err = unix.Listxattr(p, names)
		if err == unix.ERANGE {
			continue // grew between the two calls
		}
		if err != nil {
			return 0, errnoOf(err)
		}
		names = names[:sz]
		break
	}
	names = append(names, VersionXattr+"\x00"...)
	return xattrReply(names, dest)
}

// Setxattr implements fs.NodeSetxattrer; VersionXattr cannot be set.
func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	if attr == VersionXattr {
		return syscall.EPERM
	}
	return n.changeXattr(ctx, func(p string) error { return unix.Setxattr(p, attr, data, int(flags)) })
}

// Removexattr implements fs.NodeRemovexattrer; VersionXattr cannot be
// removed.
func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	if attr == VersionXattr {
		return syscall.EPERM
	}
	return n.changeXattr(ctx, func(p string) error { return unix.Removexattr(p, attr) })
}

// changeXattr applies an attribute change (through the procPath of the
// node's own file) and records it as a setattr.
func (n *node) changeXattr(ctx context.Context, change func(path string) error) syscall.Errno {
	m := n.m
	defer m.xattrs.bump() // after the change: see xattrcache.go
	rel := n.rel()
	if errno := m.changeable(rel); errno != 0 {
		return errno
	}
	a := m.actor(ctx)
	if err := m.be.prepare(rel, false); err != nil {
		return errnoOf(n.staleIfGone(err))
	}
	fd, link, err := n.xattrFd()
	if err != nil {
		return errnoOf(err)
	}
	defer unix.Close(fd)
	if link {
		return syscall.EPERM // as the disk answers for user attributes of links
	}
	before, err := fstat(fd)
	if err != nil {
		return errnoOf(err)
	}
	defer m.cfg.Engine.Changing(m.target(rel))()
	if err := change(procPath(fd)); err != nil {
		return errnoOf(err)
	}
	after, err := fstat(fd)
	if err != nil {
		return errnoOf(err)
	}
	// An attribute changes no bytes: recorded, grants nothing, and the
	// version stays what it was (reported when the cache knows it).
	ver := m.knownVersion(a, &before.st)
	n.own.advance(a.Session, &before.st, &after.st)
	m.keepOwnMeta(a, m.target(rel), &before.st, &after.st)
	m.record(ctx, a, policy.OpSetattr, m.target(rel), ver, ver, nil)
	return 0
}
