package fuse

import (
	"context"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/overlay"
	"github.com/dshmount/dshmount/policy"
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

// Getxattr implements fs.NodeGetxattrer.
func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	rel := n.rel()
	if n.m.access(rel) == overlay.Hidden {
		return 0, syscall.ENOENT
	}
	if attr == VersionXattr {
		bs, err := n.lstat()
		if err != nil {
			return 0, errnoOf(err)
		}
		return xattrReply([]byte(n.m.version(&bs.st)), dest)
	}
	sz, err := unix.Lgetxattr(n.m.abs(rel), attr, dest)
	if err != nil {
		return uint32(max(sz, 0)), errnoOf(err)
	}
	return uint32(sz), 0
}

// Listxattr implements fs.NodeListxattrer: the backing file's attributes
// plus VersionXattr.
func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	rel := n.rel()
	if n.m.access(rel) == overlay.Hidden {
		return 0, syscall.ENOENT
	}
	p := n.m.abs(rel)
	var names []byte
	for {
		sz, err := unix.Llistxattr(p, nil)
		if err != nil {
			return 0, errnoOf(err)
		}
		names = make([]byte, sz)
		sz, err = unix.Llistxattr(p, names)
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
	return n.changeXattr(ctx, func(p string) error { return unix.Lsetxattr(p, attr, data, int(flags)) })
}

// Removexattr implements fs.NodeRemovexattrer; VersionXattr cannot be
// removed.
func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	if attr == VersionXattr {
		return syscall.EPERM
	}
	return n.changeXattr(ctx, func(p string) error { return unix.Lremovexattr(p, attr) })
}

// changeXattr applies an attribute change and records it as a setattr.
func (n *node) changeXattr(ctx context.Context, change func(path string) error) syscall.Errno {
	m := n.m
	rel := n.rel()
	if errno := m.changeable(rel); errno != 0 {
		return errno
	}
	a := m.actor(ctx)
	p := m.abs(rel)
	before, err := statAt(unix.AT_FDCWD, p, n.IsRoot())
	if err != nil {
		return errnoOf(err)
	}
	if err := change(p); err != nil {
		return errnoOf(err)
	}
	after, err := statAt(unix.AT_FDCWD, p, n.IsRoot())
	if err != nil {
		return errnoOf(err)
	}
	m.record(ctx, a, policy.OpSetattr, m.target(rel), m.version(&before.st), m.bump(&after.st), nil)
	return 0
}
