package fuse

import (
	"context"
	"errors"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/overlay"
	"github.com/dshmount/dshmount/policy"
	"github.com/dshmount/dshmount/provider/local"
)

// Rename implements fs.NodeRenamer, with RENAME_NOREPLACE and
// RENAME_EXCHANGE (renameat2 flags are passed through).
//
// A bound caller needs a fresh observation of a file it renames over (and,
// for an exchange, of both files, since each replaces the other); moving a
// file to an absent name is allowed like a create. The moved identity gets a
// new generation, so its version at the new name differs from any token for
// the old one, and the replaced identity is bumped too (its other hard
// links, if any, changed link count).
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	m := n.m
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	srcRel := joinRel(n.rel(), name)
	dstRel := joinRel(np.rel(), newName)
	if errno := m.changeable(srcRel); errno != 0 {
		return errno
	}
	exchange := flags&unix.RENAME_EXCHANGE != 0
	switch m.access(dstRel) {
	case overlay.Hidden:
		if exchange {
			return syscall.ENOENT
		}
		return syscall.EACCES
	case overlay.ReadOnly:
		return syscall.EROFS
	}

	a := m.actor(ctx)
	srcT, dstT := m.target(srcRel), m.target(dstRel)
	unlock, errno := m.lock(ctx, srcT, dstT)
	if errno != 0 {
		return errno
	}
	defer unlock()
	srcE, err := m.entryAt(srcRel)
	if err != nil {
		return errnoOf(err)
	}
	defer srcE.close()
	dstE, err := m.entryAt(dstRel)
	if err != nil {
		return errnoOf(err)
	}
	defer dstE.close()
	src, err := statAt(srcE.dir, srcE.name, false)
	if err != nil {
		return errnoOf(err)
	}
	if errno := m.movableDir(srcRel, &src.st); errno != 0 {
		return errno
	}
	srcBefore := m.version(&src.st)
	dst, err := statAt(dstE.dir, dstE.name, false)
	dstExists := err == nil
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return errnoOf(err)
	}
	dstBefore := m.version(&dst.st)
	if exchange && dstExists {
		if errno := m.movableDir(dstRel, &dst.st); errno != 0 {
			return errno
		}
	}

	switch {
	case exchange:
		if !dstExists {
			return syscall.ENOENT
		}
		if !isDir(&src.st) {
			if errno := m.checkChange(a, "rename", srcT, &srcBefore); errno != 0 {
				return errno
			}
		}
		if !isDir(&dst.st) {
			if errno := m.checkChange(a, "rename", dstT, &dstBefore); errno != 0 {
				return errno
			}
		}
	case dstExists && flags&unix.RENAME_NOREPLACE != 0:
		return syscall.EEXIST
	case dstExists && !isDir(&dst.st):
		if errno := m.checkChange(a, "rename", dstT, &dstBefore); errno != 0 {
			return errno
		}
	case !dstExists:
		if errno := m.checkCreate(a, "rename", dstT); errno != 0 {
			return errno
		}
	}

	if err := unix.Renameat2(srcE.dir, srcE.name, dstE.dir, dstE.name, uint(flags)); err != nil {
		return errnoOf(err)
	}

	moved, err := statAt(dstE.dir, dstE.name, false)
	if err != nil {
		m.log.Warn("stat renamed file", "path", dstRel, "err", err)
		return 0
	}
	movedAfter := m.bump(&moved.st)
	if exchange {
		other, err := statAt(srcE.dir, srcE.name, false)
		if err != nil {
			m.log.Warn("stat exchanged file", "path", srcRel, "err", err)
			return 0
		}
		otherAfter := m.bump(&other.st)
		m.record(ctx, a, policy.OpRename, srcT, srcBefore, movedAfter, &dstT)
		m.record(ctx, a, policy.OpRename, dstT, dstBefore, otherAfter, &srcT)
		// Each record marks its source absent for a bound caller; both
		// names exist after an exchange.
		m.observe(a, dstT, policy.Present(movedAfter))
		return 0
	}
	// The replaced identity changes version when it lives on under other
	// names (a rename onto another name of the same file replaces nothing).
	if dstExists && fileID(&dst.st) != fileID(&moved.st) {
		local.BumpIfLinked(m.gens, &dst.st)
	}
	m.record(ctx, a, policy.OpRename, srcT, srcBefore, movedAfter, &dstT)
	return 0
}

// isDir reports whether st is a directory.
func isDir(st *unix.Stat_t) bool { return st.Mode&syscall.S_IFMT == syscall.S_IFDIR }

// movableDir refuses to move a directory that holds paths of anchored hide
// or read-only rules ("secrets/keys" when renaming "secrets"): moved, they
// would leave their rule.
func (m *mountState) movableDir(rel string, st *unix.Stat_t) syscall.Errno {
	if !isDir(st) {
		return 0
	}
	switch m.cfg.View.AccessBelow(rel) {
	case overlay.Hidden:
		return syscall.EACCES
	case overlay.ReadOnly:
		return syscall.EROFS
	}
	return 0
}
