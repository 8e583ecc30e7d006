package fuse

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/version"
	"github.com/dshmount/dshmount/internal/viewrules"
)

// mountState is shared by every node of one mount.
type mountState struct {
	cfg    Config
	log    *slog.Logger
	root   string // canonical backing root, absolute
	rootFd int    // O_PATH descriptor of root: every backing call is relative to it
	// rootInode is the mount's root node, for workspace-relative paths.
	rootInode *fs.Inode
	rootDev   uint64
	asRoot    bool               // the daemon runs as root: created files are chowned to the caller
	vers      *version.Versioner // content versions, shared with the provider
	kernel    *kernelCalls       // the node bridge's calls into the kernel, to the Transport's Conn
	closed    atomic.Bool
	callers   callerCache  // calling threads' processes and sessions
	dirs      *dirFds      // cached directory descriptors (nil: none; dirfds.go)
	be        backend      // where paths live: the workspace or a branch over it
	xattrs    xattrEpochs  // when remembered xattr absences hold (xattrcache.go)
	releases  *releaseGate // RELEASE requests in flight (releasegate.go; nil before mounting)
}

// rel helpers --------------------------------------------------------------

// joinRel appends a name to a workspace-relative directory path.
func joinRel(dir, name string) string {
	if dir == "." || dir == "" {
		return name
	}
	return dir + "/" + name
}

// access is the view's verdict on rel.
func (m *mountState) access(rel string) viewrules.Access { return m.cfg.View.Access(rel) }

// target is the provider target of rel.
func (m *mountState) target(rel string) provider.Target { return m.be.target(rel) }

// callers -----------------------------------------------------------------

// actor is who sent the request in ctx: pid and uid from the FUSE header,
// and the session the pid is bound to, if any.
func (m *mountState) actor(ctx context.Context) policy.Actor {
	a := policy.Actor{Channel: policy.ChannelMount}
	caller, ok := gofuse.FromContext(ctx)
	if !ok || caller == nil {
		return a
	}
	a.PID = int32(caller.Pid)
	a.UID = caller.Uid
	if caller.Pid != 0 && m.cfg.Bindings != nil {
		if ci := m.caller(caller.Pid); ci.bound {
			a.Session, a.Strict = ci.session, ci.strict
		}
	}
	return a
}

// owner is the uid/gid of the caller in ctx, for chowning created entries.
func owner(ctx context.Context) (uid, gid int, ok bool) {
	caller, found := gofuse.FromContext(ctx)
	if !found || caller == nil {
		return 0, 0, false
	}
	return int(caller.Uid), int(caller.Gid), true
}

// guards --------------------------------------------------------------------

// checkChange asks the policy whether a may change the existing file t
// (f: its stat, and its version hashed if the decision needs it). Unbound
// actors always pass.
func (m *mountState) checkChange(a policy.Actor, op string, t provider.Target, f policy.FileNow) syscall.Errno {
	if a.Session == "" {
		return 0
	}
	if a.PID > 0 {
		a.PID = m.caller(uint32(a.PID)).pid // the process, not its thread
	}
	err := m.cfg.Engine.CheckMountFile(a, policy.MutationOp(op), t, f)
	if err == nil {
		return 0
	}
	if provider.CodeOf(err) == "" {
		return errnoOf(err) // the file could not be hashed (gone, unreadable): no decision
	}
	errno := errnoOfGuard(err)
	m.log.Info("mount write refused", "op", op, "path", t.DisplayPath, "session", a.Session,
		"pid", a.PID, "code", provider.CodeOf(err), "errno", errno.Error(), "reason", provider.MessageOf(err))
	return errno
}

// checkCreate asks the policy whether a may create t, absent now.
func (m *mountState) checkCreate(a policy.Actor, op string, t provider.Target) syscall.Errno {
	if a.Session == "" {
		return 0
	}
	if a.PID > 0 {
		a.PID = m.caller(uint32(a.PID)).pid
	}
	err := m.cfg.Engine.CheckMountCreate(a, policy.MutationOp(op), t, nil)
	if err == nil {
		return 0
	}
	errno := errnoOfGuard(err)
	m.log.Info("mount create refused", "op", op, "path", t.DisplayPath, "session", a.Session,
		"pid", a.PID, "code", provider.CodeOf(err), "errno", errno.Error(), "reason", provider.MessageOf(err))
	return errno
}

// observe records what a bound actor saw (nothing outside the guard).
func (m *mountState) observe(a policy.Actor, t provider.Target, obs policy.Observation) {
	if a.Session == "" || m.cfg.Engine.OutsideGuard(a, t) {
		return
	}
	if err := m.cfg.Engine.ObserveMount(a, t, obs); err != nil {
		m.log.Warn("record mount observation", "path", t.DisplayPath, "session", a.Session, "err", err)
	}
}

// record reports a completed mutation (last writer, audit entry, the bound
// session's new observation, observers). The mutation is on disk already,
// so a failure is logged, never returned to the kernel. The request's
// cancellation (an interrupt of the calling program) must not lose the
// record, so it runs on a context that is never cancelled.
func (m *mountState) record(ctx context.Context, a policy.Actor, op policy.MutationOp, t provider.Target, before, after provider.Version, to *provider.Target) {
	if a.PID > 0 {
		a.PID = m.caller(uint32(a.PID)).pid
	}
	err := m.cfg.Engine.RecordMount(context.WithoutCancel(ctx), a, op, t, before, after, to)
	if err != nil && !errors.Is(err, policy.ErrObserverFailed) {
		m.log.Error("record mount mutation", "op", op, "path", t.DisplayPath, "err", err)
	} else if err != nil {
		m.log.Warn("mount mutation observer failed", "op", op, "path", t.DisplayPath, "err", err)
	}
	if m.log.Enabled(ctx, slog.LevelDebug) { // the arguments alone cost allocations per change
		m.log.Debug("mount mutation", "op", op, "path", t.DisplayPath, "pid", a.PID, "session", a.Session,
			"before", before, "after", after)
	}
}

// persistRecords writes the records of the mount's changes so far to the
// store. A program that fsyncs expects its change to survive a crash; its
// version and audit entry then survive a daemon killed right after the
// fsync returned, too (otherwise they wait for the store's next batch).
func (m *mountState) persistRecords(op string, n *node) {
	if err := m.cfg.Engine.Flush(); err != nil {
		m.log.Warn("records not written yet; the store retries", "op", op, "path", n.rel(), "err", err)
	}
}

// chownToCaller gives a created entry to the calling user when the daemon
// runs as root (otherwise every file created through the mount would belong
// to root). In a set-group-ID directory the entry keeps the group it
// inherited from the directory, as on the disk. fd is the created file's
// descriptor (-1: none; e then addresses the entry, and e.dir = -1 means
// it is looked up from rel).
func (m *mountState) chownToCaller(ctx context.Context, fd int, e entry, rel string) {
	if !m.asRoot {
		return
	}
	uid, gid, ok := owner(ctx)
	if !ok {
		return
	}
	if e.dir < 0 {
		var err error
		if e, err = m.be.entry(rel); err != nil {
			m.log.Warn("give created entry to its creator", "path", rel, "uid", uid, "err", err)
			return
		}
		defer e.close()
	}
	if dirSetgid(e.dir) {
		gid = -1
	}
	var err error
	if fd >= 0 {
		err = unix.Fchown(fd, uid, gid)
	} else {
		err = unix.Fchownat(e.dir, e.name, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
	}
	if err != nil {
		m.log.Warn("give created entry to its creator", "path", rel, "uid", uid, "err", err)
	}
}

// isWrite reports whether open flags can change the file.
func isWrite(flags uint32) bool {
	return flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0
}

// euidIsRoot reports whether the daemon runs as root.
func euidIsRoot() bool { return os.Geteuid() == 0 }

// fileID is the storage identity of a backing stat.
func fileID(st *unix.Stat_t) provider.FileID { return version.FileIDOf(st) }

// lock takes the provider's per-target mutation locks of ts for the span of
// a check-then-change sequence (see local.FS.Lock). A wait that an
// interrupt of the caller cuts short (patiently) is EINTR, as for any
// interrupted blocking call.
func (m *mountState) lock(ctx context.Context, ts ...provider.Target) (func(), syscall.Errno) {
	keys := make([]provider.Key, len(ts))
	for i, t := range ts {
		keys[i] = t.Key
	}
	var unlock func()
	err := patiently(ctx, func(ctx context.Context) error {
		var err error
		unlock, err = m.cfg.Local.Lock(ctx, keys...)
		return err
	})
	if err != nil {
		return nil, syscall.EINTR
	}
	return unlock, 0
}
