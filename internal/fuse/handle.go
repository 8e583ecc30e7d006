package fuse

import (
	"context"
	"io"
	"os"
	"path"
	"sync"
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

// handle is one open regular file: the backing descriptor (through go-fuse's
// LoopbackFile) plus what the mutation record needs.
//
// A handle opened for writing records its changes when it is flushed,
// fsynced or released, never per write: with passthrough the kernel writes
// the backing file itself and the daemon never sees a WRITE. A change is
// detected by the dirty flag (set by Write, Allocate, CopyFileRange) or by
// the backing stat differing from the last recorded one; at release, a
// passthrough handle opened for writing that never recorded anything records
// once anyway, because a same-size rewrite within one timestamp tick leaves
// the stat unchanged and a missed change would let a stale agent token pass.
type handle struct {
	file     *os.File
	lf       *fs.LoopbackFile
	node     *node
	rel      string       // path at open, for a file unlinked meanwhile
	actor    policy.Actor // the opener: recorded as the writer
	writable bool
	unhold   func()                  // ends the engine's hold on the path (writable handles)
	pt       bool                    // passthrough was offered for this handle
	follow   bool                    // read-only on a file whose changes go elsewhere (backend.inPlace): reads follow its copy-up
	up       atomic.Pointer[os.File] // the copy, once followed
	direct   bool                    // opened FOPEN_DIRECT_IO (a bound writer's, see ioModes)

	dirty atomic.Bool

	mu       sync.Mutex // guards the fields below
	last     unix.Stat_t
	lastVer  provider.Version
	recorded bool
}

// ptHandle is a handle that offers its descriptor to the kernel for
// passthrough. The two types exist because go-fuse decides by the presence
// of the PassthroughFd method.
type ptHandle struct{ *handle }

var _ fs.FilePassthroughFder = ptHandle{}

// PassthroughFd implements fs.FilePassthroughFder.
func (p ptHandle) PassthroughFd() (int, bool) { return p.lf.PassthroughFd() }

// handleOf is implemented by both handle kinds.
type handleOf interface{ h() *handle }

func (h *handle) h() *handle { return h }

// asHandle returns the *handle behind a go-fuse FileHandle, or nil.
func asHandle(f fs.FileHandle) *handle {
	if x, ok := f.(handleOf); ok {
		return x.h()
	}
	return nil
}

// fd is the backing descriptor.
func (h *handle) fd() int { return int(h.file.Fd()) }

// wrap returns the FileHandle go-fuse gets for h.
func (m *mountState) wrap(h *handle) fs.FileHandle {
	if h.pt {
		return ptHandle{h}
	}
	return h
}

// openBacking opens rel below the backing root without following any
// symbolic link (the backend's open).
func (m *mountState) openBacking(rel string, flags int, mode uint32) (*os.File, error) {
	fd, err := m.be.open(rel, flags, mode)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// newHandle builds the handle of a just-opened file, its I/O mode chosen
// by the node's ioModes. Release must uncount it.
func (n *node) newHandle(f *os.File, rel string, a policy.Actor, writable bool, st *unix.Stat_t) (*handle, syscall.Errno) {
	inPlace := n.m.be.inPlace(rel)
	pt, direct, ok := n.io.choose(n.m.cfg.Passthrough && inPlace, a.Session != "", writable, n.m.releases)
	if !ok {
		_ = f.Close()
		return nil, n.m.refusePassthrough(a, n.m.target(rel))
	}
	h := &handle{
		file: f, lf: fs.NewLoopbackFileFromOS(f), node: n, rel: rel, actor: a,
		writable: writable, pt: pt, direct: direct, last: *st, follow: !inPlace && !writable,
	}
	if writable {
		// Its writes are recorded at flush; the backing-tree watcher must
		// not report them as external meanwhile.
		h.unhold = n.m.cfg.Engine.HoldOwn(n.m.target(rel))
	}
	return h, 0
}

// Open implements fs.NodeOpener: the read / write decision point. A bound
// caller opening for writing needs a fresh observation (guardChange); a
// bound caller opening for reading records one at the version it opened.
//
// I/O mode (ioModes): a bound writer's handle is direct I/O unless a
// person holds the file open with passthrough, so its every write reaches
// the daemon and is guarded (guardHandle); a shared mmap of it reaches the
// daemon at writeback (FUSE_DIRECT_IO_ALLOW_MMAP).
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	m := n.m
	rel := n.rel()
	writing := isWrite(flags)
	switch m.access(rel) {
	case viewrules.Hidden:
		return nil, 0, syscall.ENOENT
	case viewrules.ReadOnly:
		if writing {
			return nil, 0, syscall.EROFS
		}
	}
	if errno := m.awaitCommit(ctx, rel); errno != 0 {
		return nil, 0, errno
	}
	a := m.actor(ctx)
	t := m.target(rel)
	flags &^= syscall.O_APPEND | gofuse.FMODE_EXEC | syscall.O_CREAT | syscall.O_EXCL
	var before backingStat
	var beforeVer provider.Version
	if writing {
		unlock, errno := m.lock(ctx, t)
		if errno != 0 {
			return nil, 0, errno
		}
		defer unlock()
		var err error
		if before, err = n.lstat(); err != nil {
			return nil, 0, errnoOf(err)
		}
		if errno := m.guardChange(a, "open", n, t, &before.st, func() (provider.Version, error) {
			v, err := m.versionOfRel(rel, &before.st)
			beforeVer = v
			return v, err
		}); errno != 0 {
			return nil, 0, errno
		}
		if n.io.busyFor(a) {
			return nil, 0, m.refusePassthrough(a, t)
		}
		defer m.cfg.Engine.Changing(t)()
	}
	f, err := m.openBacking(rel, int(flags), 0)
	if err != nil {
		return nil, 0, errnoOf(n.staleIfGone(err))
	}
	bs, err := fstat(int(f.Fd()))
	if err == nil {
		err = n.current(&bs)
	}
	if err != nil {
		_ = f.Close()
		return nil, 0, errnoOf(err)
	}
	if !writing {
		if a.Session != "" {
			ver, err := m.cachedVersionOfFd(int(f.Fd()), &bs.st)
			if err != nil {
				_ = f.Close()
				return nil, 0, errnoOf(err)
			}
			m.observe(a, t, policy.Present(ver))
		}
		h, errno := n.newHandle(f, rel, a, false, &bs.st)
		if errno != 0 {
			return nil, 0, errno
		}
		return m.wrap(h), 0, 0
	}
	// The record of the handle starts from the file as it was before the
	// open, so a truncating open counts as a change.
	h, errno := n.newHandle(f, rel, a, true, &before.st)
	if errno != 0 {
		return nil, 0, errno
	}
	h.lastVer = beforeVer
	n.own.note(a.Session, &bs.st)
	return m.wrap(h), h.openFlags(), 0
}

// recordWrites records the changes made through a writable handle since its
// last record. final is set at release.
func (m *mountState) recordWrites(ctx context.Context, h *handle, final bool) {
	if h == nil || !h.writable {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	bs, err := fstat(h.fd())
	if err != nil {
		m.log.Warn("stat written file", "path", h.rel, "err", err)
		return
	}
	// Without passthrough every write arrives here as a WRITE request and
	// sets dirty; a stat difference alone is then someone else's change
	// (out of band) and must not be credited to this handle's writer. With
	// passthrough the kernel writes the backing file directly, so the stat
	// is the only evidence.
	//
	// The ctime is left out of the comparison: link, unlink, rename and
	// chmod move it and are recorded by their own operations.
	dirty := h.dirty.Swap(false)
	changed := dirty || (h.pt && !sameData(&bs.st, &h.last)) || (final && h.pt && !h.recorded)
	if !changed {
		return
	}
	actor := h.actor
	if actor.Session != "" && !h.credits(&bs.st) {
		// Someone else changed the file after the session's last own
		// change: audited, but the session is not credited with bytes it
		// did not write (its observation stays, and is stale).
		actor.Session = ""
	}
	if final && h.recorded && !dirty {
		// RELEASE arrives after close() has returned and after the flush
		// that already recorded this handle's writes, so a stat change
		// seen only now may be someone else's (out of band): audited, not
		// credited.
		actor.Session = ""
	}
	rel := h.path(&bs.st)
	after := m.recordVersion(actor, m.target(rel), h.fd())
	if actor.Session != "" && after != "" {
		// The version belongs to the stat when the file did not move
		// while it was hashed.
		if as, err := fstat(h.fd()); err == nil && version.StatKeyOf(&as.st) == version.StatKeyOf(&bs.st) {
			h.node.own.recorded(actor.Session, &bs.st, after)
		}
	}
	m.record(ctx, actor, policy.OpWrite, m.target(rel), h.lastVer, after, nil)
	m.be.changed(rel)
	h.last, h.lastVer, h.recorded = bs.st, after, true
}

// openFlags are the FOPEN flags the kernel gets for h.
func (h *handle) openFlags() uint32 {
	if h.direct {
		return gofuse.FOPEN_DIRECT_IO
	}
	return 0
}

// credits reports whether the bound session of h may be credited with the
// file's bytes (stat st) at a record: a direct-I/O handle's writes were
// each seen, so the file must be as the session's last own change left
// it; a passthrough handle's writes were not, so the name must still hold
// its file (anything else written meanwhile cannot be told apart: the
// documented limit of a bound writer sharing a file with a person's
// passthrough open).
func (h *handle) credits(st *unix.Stat_t) bool {
	if !h.pt {
		return h.node.own.ownedBy(h.actor.Session, st)
	}
	return h.holdsName(st)
}

// holdsName reports whether the handle's name still holds its file (st).
func (h *handle) holdsName(st *unix.Stat_t) bool {
	cur, err := h.node.m.be.stat(h.node.rel())
	return err == nil && fileID(&cur.st) == fileID(st)
}

// noteSetattr tells a writable handle that a setattr through it was recorded
// at version v (empty: not computed), so its next record starts from there.
func (h *handle) noteSetattr(st *unix.Stat_t, v provider.Version) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.last, h.lastVer, h.recorded = *st, v, true
}

// Read implements fs.NodeReader.
func (n *node) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (gofuse.ReadResult, syscall.Errno) {
	h := asHandle(f)
	if h == nil {
		return nil, syscall.EBADF
	}
	if up := h.followed(); up != nil {
		nr, err := up.ReadAt(dest, off)
		if err != nil && err != io.EOF {
			return nil, errnoOf(err)
		}
		return gofuse.ReadResultData(dest[:nr]), 0
	}
	return h.lf.Read(ctx, dest, off)
}

// followed is the file a following handle reads now: the copy its file
// got since the open (opened once), or nil while there is none.
func (h *handle) followed() *os.File {
	if !h.follow {
		return nil
	}
	if up := h.up.Load(); up != nil {
		return up
	}
	m := h.node.m
	if !h.node.linked() || !m.be.copiedUp(h.node.StableAttr()) {
		return nil
	}
	f, err := m.openBacking(h.node.rel(), syscall.O_RDONLY, 0)
	if err != nil {
		m.log.Warn("open the copy of a file read before its copy-up", "path", h.node.rel(), "err", err)
		return nil
	}
	if !h.up.CompareAndSwap(nil, f) {
		_ = f.Close()
	}
	return h.up.Load()
}

// readFd is the descriptor whose file a handle's reads and stats show.
func (h *handle) readFd() int {
	if up := h.followed(); up != nil {
		return int(up.Fd())
	}
	return h.fd()
}

// Write implements fs.NodeWriter (only without passthrough).
func (n *node) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	h := asHandle(f)
	if h == nil {
		return 0, syscall.EBADF
	}
	unlock, errno := n.m.guardHandle(ctx, h, "write")
	if errno != 0 {
		return 0, errno
	}
	defer unlock()
	w, errno := h.lf.Write(ctx, data, off)
	if w > 0 {
		h.dirty.Store(true)
		h.killPrivs(ctx)
		h.noteOwn()
	}
	return w, errno
}

// Writev implements fs.NodeWritever.
func (n *node) Writev(ctx context.Context, f fs.FileHandle, data [][]byte, off int64) (uint32, syscall.Errno) {
	h := asHandle(f)
	if h == nil {
		return 0, syscall.EBADF
	}
	unlock, errno := n.m.guardHandle(ctx, h, "write")
	if errno != 0 {
		return 0, errno
	}
	defer unlock()
	w, errno := h.lf.Writev(ctx, data, off)
	if w > 0 {
		h.dirty.Store(true)
		h.killPrivs(ctx)
		h.noteOwn()
	}
	return w, errno
}

// Flush implements fs.NodeFlusher: close(2) of a descriptor records the
// changes made through it.
func (n *node) Flush(ctx context.Context, f fs.FileHandle) syscall.Errno {
	h := asHandle(f)
	if h == nil {
		return 0
	}
	errno := h.lf.Flush(ctx)
	n.m.recordWrites(ctx, h, false)
	if errno == 0 && h.writable && h.pt && h.actor.Session != "" {
		// A bound passthrough writer's bytes went to a file that is no
		// longer under its name (an agent's publish replaced it): they
		// reach nobody, so close(2) reports it.
		if bs, err := fstat(h.fd()); err == nil && !h.holdsName(&bs.st) {
			return syscall.ESTALE
		}
	}
	return errno
}

// Fsync implements fs.NodeFsyncer.
func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	h := asHandle(f)
	if h == nil {
		if d, ok := f.(*dirHandle); ok {
			errno := d.Fsyncdir(ctx, flags)
			n.m.persistRecords("fsyncdir", n) // a durable rename or create
			return errno
		}
		return 0
	}
	errno := h.lf.Fsync(ctx, flags)
	n.m.recordWrites(ctx, h, false)
	n.m.persistRecords("fsync", n)
	return errno
}

// Release implements fs.NodeReleaser: the last record of a handle, then the
// backing descriptor is closed.
func (n *node) Release(ctx context.Context, f fs.FileHandle) syscall.Errno {
	h := asHandle(f)
	if h == nil {
		if r, ok := f.(fs.FileReleaser); ok {
			return r.Release(ctx)
		}
		return 0
	}
	n.m.recordWrites(ctx, h, true)
	if h.writable && path.Base(h.rel) == ".git" {
		if bs, err := fstat(h.fd()); err == nil {
			n.m.learnGitDir(h.rel, &bs.st)
		}
	}
	h.node.io.release(h.pt, n.m.releases)
	if up := h.up.Load(); up != nil {
		_ = up.Close()
	}
	errno := h.lf.Release(ctx)
	if h.unhold != nil {
		// After the close: its IN_CLOSE_WRITE is the mount's own too.
		h.unhold()
	}
	return errno
}

// Allocate implements fs.NodeAllocater (fallocate(2)).
func (n *node) Allocate(ctx context.Context, f fs.FileHandle, off uint64, size uint64, mode uint32) syscall.Errno {
	h := asHandle(f)
	if h == nil {
		return syscall.EBADF
	}
	unlock, errno := n.m.guardHandle(ctx, h, "fallocate")
	if errno != 0 {
		return errno
	}
	defer unlock()
	errno = h.lf.Allocate(ctx, off, size, mode)
	if errno == 0 {
		h.dirty.Store(true)
		h.killPrivs(ctx)
		h.noteOwn()
	}
	return errno
}

// Lseek implements fs.NodeLseeker (SEEK_DATA / SEEK_HOLE).
func (n *node) Lseek(ctx context.Context, f fs.FileHandle, off uint64, whence uint32) (uint64, syscall.Errno) {
	h := asHandle(f)
	if h == nil {
		return 0, syscall.EBADF
	}
	return h.lf.Lseek(ctx, off, whence)
}

// CopyFileRange implements fs.NodeCopyFileRanger: the copy happens between
// the backing files, in the kernel.
func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode,
	fhOut fs.FileHandle, offOut uint64, length uint64, flags uint64) (uint32, syscall.Errno) {
	in, dst := asHandle(fhIn), asHandle(fhOut)
	if in == nil || dst == nil {
		return 0, syscall.EBADF
	}
	unlock, errno := n.m.guardHandle(ctx, dst, "copy_file_range")
	if errno != 0 {
		return 0, errno
	}
	defer unlock()
	oi, oo := int64(offIn), int64(offOut)
	c, err := unix.CopyFileRange(in.readFd(), &oi, dst.fd(), &oo, int(length), int(flags))
	if c > 0 {
		dst.dirty.Store(true)
		dst.killPrivs(ctx)
		dst.noteOwn()
	}
	if err != nil {
		return uint32(max(c, 0)), errnoOf(err)
	}
	return uint32(c), 0
}

// path is the workspace-relative path to record a change of the handle's
// file under: the name it was opened by while that name still holds the
// file (a file with several names is recorded under the one its writer
// used), else the node's current name (renamed since), else the name at
// open (unlinked since).
func (h *handle) path(st *unix.Stat_t) string {
	if cur, err := h.node.m.be.stat(h.rel); err == nil && fileID(&cur.st) == fileID(st) {
		return h.rel
	}
	if h.node.linked() {
		return h.node.rel()
	}
	return h.rel
}
