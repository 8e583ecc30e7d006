package fuse

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

// changingAttrs are the SETATTR fields that change a file (FATTR_FH and
// FATTR_LOCKOWNER only identify the request).
const changingAttrs = gofuse.FATTR_MODE | gofuse.FATTR_UID | gofuse.FATTR_GID | gofuse.FATTR_SIZE |
	gofuse.FATTR_ATIME | gofuse.FATTR_MTIME | gofuse.FATTR_ATIME_NOW | gofuse.FATTR_MTIME_NOW |
	gofuse.FATTR_CTIME | gofuse.FATTR_KILL_SUIDGID

// Setattr implements fs.NodeSetattrer: chmod, chown, truncate, utimens.
// Truncation by a bound caller goes through the guard (the kernel sends
// open(O_TRUNC) as an open followed by a SETATTR of size 0, and ftruncate
// as a SETATTR with the descriptor); mode, owner and times change no bytes:
// they are allowed, recorded, and grant no observation. Every change is
// recorded.
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *gofuse.SetAttrIn, out *gofuse.AttrOut) syscall.Errno {
	m := n.m
	rel := n.rel()
	if in.Valid&changingAttrs == 0 && !n.killRequest(ctx, in) { // killpriv.go
		return n.Getattr(ctx, f, out)
	}
	h := asHandle(f)
	if h != nil && !h.writable && m.cfg.Branch != nil {
		h = nil // a branch's read-only handle may hold the workspace's file: change by name
	}
	if h == nil || n.linked() {
		if errno := m.changeable(rel); errno != 0 {
			return errno
		}
	}
	a := m.actor(ctx)
	if h != nil && h.actor.Session != "" {
		a = h.actor // a change through a bound descriptor is its opener's
	}
	_, truncating := in.GetSize()

	t := m.target(rel)
	unlock, lockErr := m.lock(ctx, t)
	if lockErr != 0 {
		return lockErr
	}
	defer unlock()
	var before backingStat
	var err error
	if h != nil {
		before, err = fstat(h.fd())
	} else {
		before, err = n.lstatAt(rel)
	}
	if err != nil {
		return errnoOf(err)
	}
	if truncating {
		if errno := m.guardTruncate(a, n, h, rel, t, &before.st); errno != 0 {
			return errno
		}
	}

	defer m.cfg.Engine.Changing(t)()
	var errno syscall.Errno
	if h != nil {
		errno = h.lf.Setattr(ctx, in, out)
	} else {
		errno = errnoOf(n.setattrBacking(rel, in))
	}
	if errno != 0 {
		return errno
	}

	var after backingStat
	if h != nil {
		after, err = fstat(h.fd())
	} else {
		after, err = n.lstatAt(rel)
	}
	if err == nil && in.Valid&gofuse.FATTR_KILL_SUIDGID != 0 {
		err = n.killOnSetattr(h, &after.st) // killpriv.go
	}
	if err != nil {
		return errnoOf(err)
	}
	if h != nil && !n.linked() {
		rel, t = h.rel, m.target(h.rel)
	}
	op := policy.OpSetattr
	beforeVer := m.knownVersion(a, &before.st)
	var afterVer provider.Version
	if truncating {
		op = policy.OpTruncate
		m.be.changed(rel)
		n.own.note(a.Session, &after.st)
		if h != nil {
			afterVer = m.recordVersion(a, t, h.fd())
		} else if a.Session != "" && !m.cfg.Engine.OutsideGuard(a, t) {
			afterVer, _ = m.versionOfRel(rel, &after.st)
		}
	} else {
		n.own.advance(a.Session, &before.st, &after.st)
		m.keepOwnMeta(a, t, &before.st, &after.st)
		afterVer = m.knownVersion(a, &after.st)
	}
	m.record(ctx, a, op, t, beforeVer, afterVer, nil)
	if h != nil && h.writable {
		h.noteSetattr(&after.st, afterVer)
	}
	fillAttr(&out.Attr, &after.st)
	return 0
}

// guardTruncate is the guard of a size change: through a descriptor it is
// guardHandle's decision (name still holds the file, session's own bytes
// or a fresh observation), by name it is guardChange's.
func (m *mountState) guardTruncate(a policy.Actor, n *node, h *handle, rel string, t provider.Target, st *unix.Stat_t) syscall.Errno {
	if a.Session == "" {
		return 0
	}
	if h != nil {
		if !h.holdsName(st) {
			return syscall.ESTALE
		}
		return m.guardChange(a, "truncate", n, t, st, func() (provider.Version, error) {
			return m.versionOfFd(h.fd())
		})
	}
	return m.guardChange(a, "truncate", n, t, st, func() (provider.Version, error) {
		return m.versionOfRel(rel, st)
	})
}

// setattrBacking applies a SETATTR without an open handle to the node's own
// backing file, opened as O_PATH without following a link (a file swapped
// for a link out of band is never changed through it): chmod and truncate
// through procPath (the descriptor's inode, not a name), chown on the
// descriptor, times on the name in its directory without following it.
// Truncation comes before the times, so an explicit mtime is kept.
func (n *node) setattrBacking(rel string, in *gofuse.SetAttrIn) error {
	size, truncating := in.GetSize()
	e, fd, bs, done, err := n.ownPathFd(rel, truncating && size == 0)
	if err != nil {
		return err
	}
	defer done()
	link := bs.st.Mode&syscall.S_IFMT == syscall.S_IFLNK
	if mode, ok := in.GetMode(); ok {
		if link {
			return unix.EOPNOTSUPP
		}
		if err := unix.Chmod(procPath(fd), mode&07777); err != nil {
			return err
		}
		n.m.be.changed(rel)
	}
	uid, uok := in.GetUID()
	gid, gok := in.GetGID()
	if uok || gok {
		suid, sgid := -1, -1
		if uok {
			suid = int(uid)
		}
		if gok {
			sgid = int(gid)
		}
		if err := unix.Fchownat(fd, "", suid, sgid, unix.AT_EMPTY_PATH); err != nil {
			return err
		}
	}
	if size, ok := in.GetSize(); ok {
		if bs.st.Mode&syscall.S_IFMT != syscall.S_IFREG {
			return unix.EINVAL
		}
		if err := unix.Truncate(procPath(fd), int64(size)); err != nil {
			return err
		}
	}
	mtime, mok := in.GetMTime()
	atime, aok := in.GetATime()
	if mok || aok {
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
		if aok {
			ts[0] = unix.NsecToTimespec(atime.UnixNano())
		}
		if mok {
			ts[1] = unix.NsecToTimespec(mtime.UnixNano())
		}
		if err := unix.UtimesNanoAt(e.dir, e.name, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	return nil
}

// ownPathFd prepares the node's own backing file for a metadata change
// (a branch copies it up first, without content when empty) and opens it
// as O_PATH without following a link; it checks that the file is still the
// node's. done closes what it opened.
func (n *node) ownPathFd(rel string, empty bool) (e entry, fd int, bs backingStat, done func(), err error) {
	if err := n.m.be.prepare(rel, empty); err != nil {
		return entry{}, -1, bs, nil, n.staleIfGone(err)
	}
	if e, err = n.m.be.entry(rel); err != nil {
		return entry{}, -1, bs, nil, err
	}
	if fd, err = e.pathFd(); err != nil {
		e.close()
		return entry{}, -1, bs, nil, n.staleIfGone(err)
	}
	done = func() { _ = unix.Close(fd); e.close() }
	bs, err = fstat(fd)
	if err == nil {
		err = n.current(&bs)
	}
	if err != nil {
		done()
		return entry{}, -1, bs, nil, err
	}
	return e, fd, bs, done, nil
}
