package fuse

import (
	"context"
	"errors"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/version"
	"github.com/dshmount/dshmount/internal/viewrules"
)

// Rename implements fs.NodeRenamer, with RENAME_NOREPLACE and
// RENAME_EXCHANGE (renameat2 flags are passed through).
//
// A bound caller needs a fresh observation of a file it moves away (its
// name is removed) and of a file it renames over (and, for an exchange, of
// both files, since each replaces the other); moving a file to an absent
// name is allowed like a create. A rename changes no bytes: the session's
// observation moves with the file to its new name, and a directory rename
// carries the observations of everything under it. A directory needs no
// observation of its own, but moving it moves every entry below out from
// under its name: it needs the right to change each (guardTree).
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
	case viewrules.Hidden:
		if exchange {
			return syscall.ENOENT
		}
		return syscall.EACCES
	case viewrules.ReadOnly:
		return syscall.EROFS
	}

	a := m.actor(ctx)
	srcT, dstT := m.target(srcRel), m.target(dstRel)
	unlock, errno := m.lock(ctx, srcT, dstT)
	if errno != 0 {
		return errno
	}
	defer unlock()
	srcE, err := m.be.entry(srcRel)
	if err != nil {
		return errnoOf(err)
	}
	defer srcE.close()
	dstE, err := m.be.entry(dstRel)
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
	dst, err := statAt(dstE.dir, dstE.name, false)
	dstExists := err == nil
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return errnoOf(err)
	}
	srcNode, dstNode := n.childNode(name), np.childNode(newName)
	var srcBefore, dstBefore provider.Version
	guardSrc := func() syscall.Errno {
		return m.guardChange(a, "rename", srcNode, srcT, &src.st, func() (provider.Version, error) {
			v, err := m.versionOfEntry(srcE, &src.st)
			srcBefore = v
			return v, err
		})
	}
	guardDst := func() syscall.Errno {
		return m.guardChange(a, "rename", dstNode, dstT, &dst.st, func() (provider.Version, error) {
			v, err := m.versionOfEntry(dstE, &dst.st)
			dstBefore = v
			return v, err
		})
	}
	if exchange && dstExists {
		if errno := m.movableDir(dstRel, &dst.st); errno != 0 {
			return errno
		}
	}

	if exchange && !dstExists {
		return syscall.ENOENT
	}
	if dstExists && !exchange && flags&unix.RENAME_NOREPLACE != 0 {
		return syscall.EEXIST
	}
	sameFile := dstExists && fileID(&dst.st) == fileID(&src.st)
	if !isDir(&src.st) && !sameFile {
		if errno := guardSrc(); errno != 0 {
			return errno
		}
	}
	if isDir(&src.st) && !sameFile {
		if errno := m.guardTree(a, srcRel, srcE); errno != 0 {
			return errno
		}
	}
	if exchange && isDir(&dst.st) && !sameFile {
		if errno := m.guardTree(a, dstRel, dstE); errno != 0 {
			return errno
		}
	}
	switch {
	case dstExists && !isDir(&dst.st) && !sameFile:
		if errno := guardDst(); errno != 0 {
			return errno
		}
	case !dstExists:
		if errno := m.checkCreate(a, "rename", dstT); errno != 0 {
			return errno
		}
	}

	defer m.cfg.Engine.Changing(srcT, dstT)()
	if err := m.be.rename(ctx, srcRel, dstRel, srcE, dstE, flags); err != nil {
		return errnoOf(err)
	}
	m.dirs.forget(srcRel) // cached descriptors at and below both names are elsewhere now
	m.dirs.forget(dstRel)

	movedE, err := m.be.moved(dstRel, dstE)
	if err != nil {
		m.log.Warn("stat renamed file", "path", dstRel, "err", err)
		return 0
	}
	defer movedE.close()
	moved, err := statAt(movedE.dir, movedE.name, false)
	if err != nil {
		m.log.Warn("stat renamed file", "path", dstRel, "err", err)
		return 0
	}
	movedAfter := m.renamedVersion(a, dstT, srcBefore, srcNode, movedE, &moved.st)
	if exchange {
		other, err := statAt(srcE.dir, srcE.name, false)
		if err != nil {
			m.log.Warn("stat exchanged file", "path", srcRel, "err", err)
			return 0
		}
		otherAfter := m.renamedVersion(a, srcT, dstBefore, dstNode, srcE, &other.st)
		m.carryDir(a, &moved.st, srcT, dstT)
		m.record(ctx, a, policy.OpRename, srcT, srcBefore, movedAfter, &dstT)
		m.record(ctx, a, policy.OpRename, dstT, dstBefore, otherAfter, &srcT)
		// Each record marks its source absent for a bound caller; both
		// names exist after an exchange.
		if movedAfter != "" {
			m.observe(a, dstT, policy.Present(movedAfter))
		}
		return 0
	}
	m.carryDir(a, &moved.st, srcT, dstT)
	m.record(ctx, a, policy.OpRename, srcT, srcBefore, movedAfter, &dstT)
	return 0
}

// renamedVersion is the version to record for a file renamed by a, now the
// entry e with stat st (its bytes did not change) whose node is n (nil:
// the kernel holds none): the one its guard hashed, else the one the
// session's last record of its own change hashed while the file is still
// as that record left it (ownWrites.recordedVersion), else the trusted
// cached one, else for a bound session (whose observation moves with the
// file) a fresh hash; nothing new outside the guard (t, the name it has
// now). An object without bytes gets its metadata version now: the rename
// moved its ctime (a symbolic link's token holds it), and the session's
// own rename must not make its observation stale.
func (m *mountState) renamedVersion(a policy.Actor, t provider.Target, guarded provider.Version, n *node, e entry, st *unix.Stat_t) provider.Version {
	if guarded != "" && a.Session != "" && !isRegularStat(st) {
		return version.OfMetadata(st)
	}
	if guarded != "" || a.Session == "" || m.cfg.Engine.OutsideGuard(a, t) {
		return guarded
	}
	if n != nil && isRegularStat(st) {
		if ver, ok := n.own.recordedVersion(a.Session, st); ok {
			return ver
		}
	}
	if ver, ok := m.vers.Cached(st); ok {
		return ver
	}
	ver, err := m.versionOfEntry(e, st)
	if err != nil {
		m.log.Warn("version of renamed file", "err", err)
	}
	return ver
}

// carryDir moves a bound session's observations of everything below a
// directory it renamed.
func (m *mountState) carryDir(a policy.Actor, st *unix.Stat_t, from, to provider.Target) {
	if a.Session == "" || !isDir(st) {
		return
	}
	if err := m.cfg.Engine.CarryMount(a, from, to); err != nil {
		m.log.Warn("carry observations of a renamed directory", "from", from.DisplayPath, "to", to.DisplayPath, "err", err)
	}
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
	case viewrules.Hidden:
		return syscall.EACCES
	case viewrules.ReadOnly:
		return syscall.EROFS
	}
	return 0
}
