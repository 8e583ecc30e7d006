package fuse

import (
	"context"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

// notifyWait bounds how long a socket mutation waits for the kernel to drop
// its caches. The wait makes "edit over the socket, then cat on the mount"
// show the new bytes; the bound keeps a kernel that holds a directory lock
// (while a FUSE request in that directory waits on something the socket
// request holds) from stalling the socket forever.
const notifyWait = 2 * time.Second

// invalidator drops the kernel's cached data, attributes and names for files
// the control socket changed. Notifications are sent from its own goroutine,
// never from a FUSE handler (which would deadlock on the kernel's inode
// locks).
type invalidator struct {
	m    *mountState
	root *fs.Inode
	jobs chan invalJob
	stop chan struct{}
	wg   sync.WaitGroup
}

// invalJob is one event to apply; done is closed when it was. With
// dataOnly, only the pages and attributes of ev.Target are dropped.
type invalJob struct {
	ev       policy.Event
	dataOnly bool
	done     chan struct{}
}

// newInvalidator starts the notification goroutine.
func newInvalidator(m *mountState, root *fs.Inode) *invalidator {
	iv := &invalidator{m: m, root: root, jobs: make(chan invalJob, 256), stop: make(chan struct{})}
	iv.wg.Add(1)
	go iv.run()
	return iv
}

// close stops the goroutine; pending jobs are dropped.
func (iv *invalidator) close() {
	close(iv.stop)
	iv.wg.Wait()
}

// observe is the policy.Observer: socket mutations are invalidated, mount
// mutations need nothing (the kernel saw them happen; the mount drops its
// own directory descriptors as it renames and removes). Cached directory
// descriptors at and below the changed paths are dropped at once, before
// the kernel's caches.
func (iv *invalidator) observe(_ context.Context, ev policy.Event) error {
	if ev.Actor.Channel == policy.ChannelMount || iv.m.closed.Load() {
		return nil
	}
	iv.m.dirs.forget(ev.Target.DisplayPath)
	if ev.To != nil {
		iv.m.dirs.forget(ev.To.DisplayPath)
	}
	j := invalJob{ev: ev, done: make(chan struct{})}
	timer := time.NewTimer(notifyWait)
	defer timer.Stop()
	select {
	case iv.jobs <- j:
	case <-iv.stop:
		return nil
	case <-timer.C:
		iv.m.log.Warn("kernel cache invalidation queue is full; the mount may show old data for up to the attribute timeout",
			"path", ev.Target.DisplayPath)
		return nil
	}
	select {
	case <-j.done:
	case <-iv.stop:
	case <-timer.C:
		iv.m.log.Warn("kernel cache invalidation is slow; continuing without waiting", "path", ev.Target.DisplayPath)
	}
	return nil
}

// run applies jobs until close.
func (iv *invalidator) run() {
	defer iv.wg.Done()
	for {
		select {
		case <-iv.stop:
			return
		case j := <-iv.jobs:
			if j.dataOnly {
				iv.dropData(j.ev.Target.DisplayPath)
			} else {
				iv.apply(j.ev)
			}
			close(j.done)
		}
	}
}

// apply invalidates what ev changed. Agent mutations publish atomically (a
// new inode replaces the old under the name), so besides the old inode's
// data and attributes the directory entry must go, or the kernel keeps
// resolving the name to the old inode until the entry timeout.
func (iv *invalidator) apply(ev policy.Event) {
	removed := ev.Op == policy.OpDelete || ev.Op == policy.OpUnlink
	iv.forget(ev.Target.DisplayPath, removed)
	if ev.To != nil {
		iv.forget(ev.To.DisplayPath, false)
	}
}

// forget drops the kernel's view of one workspace-relative path.
func (iv *invalidator) forget(rel string, removed bool) {
	rel = strings.Trim(path.Clean("/"+rel), "/")
	if rel == "" {
		return
	}
	parent := iv.lookup(path.Dir(rel))
	if parent == nil {
		// A directory on the way is unknown to the kernel, but the kernel
		// may cache its absence (a negative entry) and its parent's
		// listing: a publish that made the directories drops both.
		if anc, missing := iv.deepest(path.Dir(rel)); anc != nil {
			if errno := anc.NotifyContent(0, 0); errno != 0 {
				iv.m.log.Debug("notify directory content", "path", rel, "errno", errno)
			}
			if errno := anc.NotifyEntry(missing); errno != 0 {
				iv.m.log.Debug("notify entry", "path", rel, "errno", errno)
			}
		}
		return
	}
	name := path.Base(rel)
	// The directory's cached listing (readdir) names the entry too.
	if errno := parent.NotifyContent(0, 0); errno != 0 {
		iv.m.log.Debug("notify directory content", "path", rel, "errno", errno)
	}
	child := parent.GetChild(name)
	if child != nil {
		if errno := child.NotifyContent(0, 0); errno != 0 {
			iv.m.log.Debug("notify content", "path", rel, "errno", errno)
		}
	}
	var errno syscall.Errno
	switch {
	case removed && child != nil:
		errno = parent.NotifyDelete(name, child)
	case child != nil && iv.sameFile(rel, child):
		// The kernel's entry resolves to the file the name holds (a
		// change in place, or the watcher's late news of an entry the
		// kernel has looked up since): dropping it would unhash the
		// dentry a process may be sitting in (its getcwd then fails).
	default:
		errno = parent.NotifyEntry(name)
	}
	if errno != 0 {
		iv.m.log.Debug("notify entry", "path", rel, "errno", errno)
	}
}

// sameFile reports whether the name rel holds the very file the kernel
// knows as child (same kind, inode number and birth time).
func (iv *invalidator) sameFile(rel string, child *fs.Inode) bool {
	bs, err := iv.m.be.stat(rel)
	if err != nil {
		return false
	}
	return iv.m.stableAttr(&bs) == child.StableAttr()
}

// writeBack is the policy.Preparer: before a socket mutation's guard hashes
// t, the kernel's dirty pages of t (mmap stores through the mount, which
// reach the daemon only at writeback) are written back by invalidating the
// inode's pages. It runs on the socket's goroutine, never a FUSE handler.
func (iv *invalidator) writeBack(_ context.Context, t provider.Target) {
	if iv.m.closed.Load() {
		return
	}
	rel := strings.Trim(path.Clean("/"+t.DisplayPath), "/")
	if rel == "" {
		return
	}
	parent := iv.lookup(path.Dir(rel))
	if parent == nil {
		return
	}
	child := parent.GetChild(path.Base(rel))
	if child == nil || child.Mode()&syscall.S_IFMT != syscall.S_IFREG {
		return
	}
	if errno := child.NotifyContent(0, 0); errno != 0 {
		iv.m.log.Debug("write back pages", "path", rel, "errno", errno)
	}
}

// lookup finds the known inode of a directory path ("." is the root), or
// nil when go-fuse has no node for it.
func (iv *invalidator) lookup(dir string) *fs.Inode {
	cur := iv.root
	if dir == "." || dir == "" {
		return cur
	}
	for seg := range strings.SplitSeq(dir, "/") {
		cur = cur.GetChild(seg)
		if cur == nil {
			return nil
		}
	}
	return cur
}

// deepest finds the deepest directory of dir that go-fuse knows and the
// name below it that it does not; nil when dir is fully known.
func (iv *invalidator) deepest(dir string) (*fs.Inode, string) {
	cur := iv.root
	if dir == "." || dir == "" {
		return nil, ""
	}
	for seg := range strings.SplitSeq(dir, "/") {
		next := cur.GetChild(seg)
		if next == nil {
			return cur, seg
		}
		cur = next
	}
	return nil, ""
}

// dropData drops the kernel's pages and attributes of the file at rel, if
// the kernel knows it.
func (iv *invalidator) dropData(rel string) {
	rel = strings.Trim(path.Clean("/"+rel), "/")
	if rel == "" {
		return
	}
	parent := iv.lookup(path.Dir(rel))
	if parent == nil {
		return
	}
	if child := parent.GetChild(path.Base(rel)); child != nil {
		if errno := child.NotifyContent(0, 0); errno != 0 {
			iv.m.log.Debug("notify content", "path", rel, "errno", errno)
		}
	}
}

// DropData drops the kernel's cached pages and attributes of the
// workspace path rel, without waiting. The workspace watcher calls it for a
// change it saw to a file the mount holds open for writing: that change is
// counted as the mount's own (recorded when the file is flushed), but its
// bytes may be someone else's, which the kernel has not seen.
func (mt *Server) DropData(rel string) {
	mt.state.xattrs.bump()
	iv := mt.inval
	if iv == nil || mt.state.closed.Load() {
		return
	}
	j := invalJob{ev: policy.Event{Target: provider.Target{DisplayPath: rel}}, dataOnly: true, done: make(chan struct{})}
	select {
	case iv.jobs <- j:
	case <-iv.stop:
	}
}
