package fuse

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/version"
)

// The one guard chokepoint of the mount.
//
// Every operation of a bound process that changes an existing file's bytes
// or removes or replaces its name calls guardChange (open for writing or
// truncation, SETATTR of the size, unlink, both sides of a rename, and
// every write, fallocate and copy_file_range through a bound descriptor,
// which call guardHandle). The decision is the policy's (Engine.CheckMount,
// the same table as the socket): the session's observation against the
// file's content version now, hashed from the bytes on disk under the
// per-target lock.
//
// A session's own writes through the mount are its own: bytes it changed
// since its last guarded point are not in its observation yet (they are
// folded in when the descriptor is flushed), so the node remembers, per
// session, the backing stat right after its last own change (ownWrites).
// While the file still has that stat, the session passes without a hash;
// any other writer (a person's passthrough write, an agent's publish, an
// out-of-band program) moves the stat and the session is judged by its
// observation again, which is then stale: ESTALE.

// ownWrites is what the node knows of a bound session's own changes. Most
// nodes never see one (people's files, files only read): the record is
// allocated by the first, so an idle node costs a pointer.
type ownWrites struct {
	mu  sync.Mutex
	own *ownRecord // nil until a bound session changes the file
}

// ownRecord is a bound session's last own change of the file.
type ownRecord struct {
	session policy.SessionID
	expect  bytesStat // the file right after the session's last own change
	// The session's last record of its own change: the version it hashed
	// and the file as it was throughout that hash (recorded).
	recStat bytesStat
	recVer  provider.Version
}

// bytesStat is what of a stat tells whether a file's bytes may have moved:
// its identity, size and modification time.
type bytesStat struct {
	dev, ino uint64
	size     int64
	mtim     unix.Timespec
}

// bytesOf is st's bytesStat.
func bytesOf(st *unix.Stat_t) bytesStat {
	return bytesStat{dev: st.Dev, ino: st.Ino, size: st.Size, mtim: st.Mtim}
}

// ownedBy reports whether st is the file as session s left it with its
// own last change through the mount.
func (o *ownWrites) ownedBy(s policy.SessionID, st *unix.Stat_t) bool {
	if s == "" {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.own != nil && o.own.session == s && o.own.expect == bytesOf(st)
}

// note records that session s just changed the file, which now has stat st.
func (o *ownWrites) note(s policy.SessionID, st *unix.Stat_t) {
	if s == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.own == nil {
		o.own = &ownRecord{}
	}
	if o.own.session != s {
		o.own.recVer = ""
	}
	o.own.session, o.own.expect = s, bytesOf(st)
}

// recorded notes that session s recorded its own change of the file as
// version v, hashed while the file had stat st throughout.
func (o *ownWrites) recorded(s policy.SessionID, st *unix.Stat_t, v provider.Version) {
	if s == "" || v == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.own != nil && o.own.session == s {
		o.own.recStat, o.own.recVer = bytesOf(st), v
	}
}

// recordedVersion is the version session s last recorded for the file,
// when the file (stat st) is still as that record and the session's own
// last change left it (ownedBy): its bytes have not changed since the
// hash, so a change that moves no bytes (a rename) records it again
// without reading them.
func (o *ownWrites) recordedVersion(s policy.SessionID, st *unix.Stat_t) (provider.Version, bool) {
	if s == "" {
		return "", false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	r := o.own
	if r == nil || r.session != s || r.recVer == "" || r.expect != bytesOf(st) || r.recStat != bytesOf(st) {
		return "", false
	}
	return r.recVer, true
}

// advance moves the remembered stat from before to after when session s
// changed only metadata (utimes moves the mtime) of a file it owns.
func (o *ownWrites) advance(s policy.SessionID, before, after *unix.Stat_t) {
	if o.ownedBy(s, before) {
		o.note(s, after)
	}
}

// keepOwnMeta carries a bound session's observation of t across its own
// metadata change (chmod, chown, utimes, an extended attribute) of an
// object without bytes, whose metadata version may include the ctime that
// change moved (a symbolic link's does, so a reused inode is told from the
// old one): the session's own change never makes its own observation
// stale, anyone else's still does. Regular files are judged by their bytes,
// which a metadata change leaves alone.
func (m *mountState) keepOwnMeta(a policy.Actor, t provider.Target, before, after *unix.Stat_t) {
	if a.Session == "" || isRegularStat(before) || isRegularStat(after) {
		return
	}
	if err := m.cfg.Engine.KeepMount(a, t, version.OfMetadata(before), version.OfMetadata(after)); err != nil {
		m.log.Warn("keep own observation", "path", t.DisplayPath, "session", a.Session, "err", err)
	}
}

// ioModes counts a node's open handles by kernel I/O mode. The kernel keeps
// one I/O mode per inode: while a passthrough handle is open every other
// open of the inode must be passthrough too (else the open fails with
// EIO), and a passthrough open fails while a cached handle is open. A
// passthrough write bypasses the daemon, so a bound writer's handle is
// never passthrough. The rule (choose):
//
//   - a passthrough handle is open (a person's, unbound): a bound writer's
//     open is refused (EBUSY, audited; see refusePassthrough) until it is
//     closed, since its writes could not be guarded; anyone else's new
//     handle is passthrough too;
//   - a cached or direct-I/O handle is open, or the caller is bound: the
//     new handle is not passthrough; a bound writer's is direct I/O, so
//     every write reaches guardHandle;
//   - otherwise (an unbound caller on a file nobody holds open) it is
//     passthrough when the mount allows it and the release of the node's
//     last cached handle has left go-fuse's bookkeeping (releaseGate).
type ioModes struct {
	mu    sync.Mutex
	pt    int // open passthrough handles
	other int // open cached or direct-I/O handles
	// released is set, with its epoch, when a cached handle was released:
	// passthrough waits until that release has ended (releaseGate).
	released      bool
	releasedEpoch uint64
}

// choose decides the mode of a new handle and counts it; ok is false (and
// nothing is counted) for a bound writer while a passthrough handle is
// open. A handle joins passthrough while one is open, but starts it only
// once the release of the node's last cached handle has ended in gate.
func (io *ioModes) choose(allowPT, bound, writable bool, gate *releaseGate) (pt, direct, ok bool) {
	io.mu.Lock()
	defer io.mu.Unlock()
	switch {
	case !allowPT:
	case io.pt > 0 && bound && writable:
		return false, false, false
	case io.pt > 0:
		pt = true
	case io.other > 0 || bound:
	case io.released && !gate.ended(io.releasedEpoch):
	default:
		pt = true
	}
	if pt {
		io.pt++
	} else {
		io.other++
	}
	return pt, !pt && bound && writable, true
}

// refusePassthrough refuses (EBUSY) and audits a bound writer's open of a
// file another process holds open with kernel passthrough: its writes would
// bypass the daemon, so the guard could not see a person's change in
// between (a lost update).
func (m *mountState) refusePassthrough(a policy.Actor, t provider.Target) syscall.Errno {
	err := provider.NewError(provider.CodePermissionDenied, "open", t.DisplayPath, nil,
		"another process holds the file open with kernel passthrough, whose writes the guard cannot see; a bound process may open it for writing once that descriptor is closed")
	m.cfg.Engine.AuditRefusal(withMountChannel(a), policy.OpWrite, t, err)
	m.log.Info("mount open refused", "path", t.DisplayPath, "session", a.Session, "pid", a.PID,
		"errno", syscall.EBUSY.Error(), "reason", provider.MessageOf(err))
	return syscall.EBUSY
}

// withMountChannel labels a's audit entries as the mount's.
func withMountChannel(a policy.Actor) policy.Actor {
	if a.Channel == "" {
		a.Channel = policy.ChannelMount
	}
	return a
}

// busyFor reports whether a bound writer's open must be refused now (a
// passthrough handle is open); the open checks it before it touches the
// backing file (O_TRUNC), and choose checks again as it counts.
func (io *ioModes) busyFor(a policy.Actor) bool {
	if a.Session == "" {
		return false
	}
	io.mu.Lock()
	defer io.mu.Unlock()
	return io.pt > 0
}

// release uncounts a handle; a cached handle's release is noted with the
// gate's epoch (see choose). It runs inside the RELEASE request.
func (io *ioModes) release(pt bool, gate *releaseGate) {
	io.mu.Lock()
	defer io.mu.Unlock()
	if pt {
		io.pt--
		return
	}
	io.other--
	io.released, io.releasedEpoch = true, gate.now()
}

// guardChange decides whether a may change the bytes of, or remove or
// replace, the existing entry t whose node is n (nil: the kernel holds
// none) and whose backing stat is st. version computes the entry's
// version now; it is called only when the decision needs it. The caller
// holds t's per-target lock. Unbound callers always pass.
func (m *mountState) guardChange(a policy.Actor, op string, n *node, t provider.Target, st *unix.Stat_t,
	version func() (provider.Version, error)) syscall.Errno {
	if a.Session == "" {
		return 0
	}
	if n != nil && n.own.ownedBy(a.Session, st) {
		return 0
	}
	return m.checkChange(a, op, t, policy.FileNow{Version: version,
		Ctime: time.Unix(st.Ctim.Unix()), Links: uint64(st.Nlink)})
}

// guardHandle is guardChange for a change through the bound descriptor h:
// the name must still hold h's file (an agent's publish replaced it:
// ESTALE, the write would reach a file nobody sees), and the file must be
// as the session left it or as it last saw it. It returns the per-target
// unlock the caller runs after the change (and after noting it with
// h.noteOwn). Unbound handles pass with a no-op unlock.
func (m *mountState) guardHandle(ctx context.Context, h *handle, op string) (func(), syscall.Errno) {
	if h.actor.Session == "" {
		return func() {}, 0
	}
	rel := h.node.rel()
	t := m.target(rel)
	unlock, errno := m.lock(ctx, t)
	if errno != 0 {
		return nil, errno
	}
	bs, err := fstat(h.fd())
	if err != nil {
		unlock()
		return nil, errnoOf(err)
	}
	if !h.holdsName(&bs.st) {
		unlock()
		m.log.Info("mount write refused", "op", op, "path", rel, "session", h.actor.Session,
			"reason", "the name no longer holds the file this descriptor writes")
		return nil, syscall.ESTALE
	}
	if errno := m.guardChange(h.actor, op, h.node, t, &bs.st, func() (provider.Version, error) {
		return m.versionOfFd(h.fd())
	}); errno != 0 {
		unlock()
		return nil, errno
	}
	return unlock, 0
}

// noteOwn records, after a change through a bound handle, the stat the
// session left the file with.
func (h *handle) noteOwn() {
	if h.actor.Session == "" {
		return
	}
	if bs, err := fstat(h.fd()); err == nil {
		h.node.own.note(h.actor.Session, &bs.st)
	}
}

// versionOfFd is the content version of the file open as fd, hashed now.
// A descriptor that cannot be read (opened write-only or O_PATH) is
// reopened for reading through /proc; a file the daemon may not read gets
// its metadata version.
func (m *mountState) versionOfFd(fd int) (provider.Version, error) {
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err == nil && flags&unix.O_PATH == 0 && flags&unix.O_ACCMODE != unix.O_WRONLY {
		ver, _, err := m.vers.Fresh(fd)
		return ver, err
	}
	rfd, err := unix.Open(procPath(fd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		bs, serr := fstat(fd)
		if serr != nil {
			return "", serr
		}
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || !isRegularStat(&bs.st) {
			return version.OfMetadata(&bs.st), nil
		}
		return "", err
	}
	defer unix.Close(rfd)
	ver, _, err := m.vers.Fresh(rfd)
	return ver, err
}

// cachedVersionOfFd is versionOfFd through the digest cache (for reports:
// the version attribute, a bound reader's observation), not for guards.
func (m *mountState) cachedVersionOfFd(fd int, st *unix.Stat_t) (provider.Version, error) {
	if ver, ok := m.vers.Cached(st); ok {
		return ver, nil
	}
	return m.versionOfFd(fd)
}

// versionOfEntry is the content version of the entry e (not following a
// final link) whose stat is st, hashed now: the guard's view of a name.
func (m *mountState) versionOfEntry(e entry, st *unix.Stat_t) (provider.Version, error) {
	if !isRegularStat(st) {
		return version.OfMetadata(st), nil
	}
	fd, err := unix.Openat(e.dir, e.name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
		return version.OfMetadata(st), nil
	}
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	ver, _, err := m.vers.Fresh(fd)
	return ver, err
}

// versionOfRel is versionOfEntry for a workspace-relative path.
func (m *mountState) versionOfRel(rel string, st *unix.Stat_t) (provider.Version, error) {
	e, err := m.be.entry(rel)
	if err != nil {
		return "", err
	}
	defer e.close()
	return m.versionOfEntry(e, st)
}

// recordVersion is the version to record after a change made through the
// file open as fd (stat st): exact for a bound session (it becomes the
// session's observation). An unbound writer's change is recorded without
// a version: hashing every file a person's build writes would cost a
// second read of it, and no guard depends on it (guards hash the bytes
// themselves).
func (m *mountState) recordVersion(a policy.Actor, t provider.Target, fd int) provider.Version {
	if a.Session == "" || m.cfg.Engine.OutsideGuard(a, t) {
		return ""
	}
	ver, err := m.versionOfFd(fd)
	if err != nil {
		m.log.Warn("hash changed file", "err", err)
		return ""
	}
	return ver
}

// knownVersion is the version of a file with stat st for the audit entry of
// a bound session's change that did not hash it: the trusted cached one,
// if any. Unbound changes are recorded without a version (recordVersion).
func (m *mountState) knownVersion(a policy.Actor, st *unix.Stat_t) provider.Version {
	if a.Session == "" {
		return ""
	}
	ver, _ := m.vers.Cached(st)
	return ver
}

// isRegularStat reports whether st is a regular file.
func isRegularStat(st *unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFREG }
