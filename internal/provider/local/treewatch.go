package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/provider"
)

// TreeKind says what happened to a path under a watched tree.
type TreeKind string

// Tree event kinds.
const (
	TreeCreated  TreeKind = "created"  // the path appeared
	TreeModified TreeKind = "modified" // its bytes changed (or another file replaced it)
	TreeAttrib   TreeKind = "attrib"   // mode, owner or times changed, not the bytes
	TreeDeleted  TreeKind = "deleted"  // the path went away
	TreeRenamed  TreeKind = "renamed"  // the path was renamed to To
	// TreeOverflow says events were lost (the kernel queue overflowed or
	// more than MaxPending paths were pending); the events after it in the
	// same batch are what a rescan of the whole tree found changed.
	TreeOverflow TreeKind = "overflow"
)

// TreeEvent is one change under a watched tree. Changes to one path within
// the coalescing window are one event.
type TreeEvent struct {
	Kind TreeKind
	Path string // workspace-relative, slash-separated ("" for TreeOverflow)
	To   string // destination of TreeRenamed
	Dir  bool   // the path is (or was) a directory
	// Stat is the path's (To's for a rename) state after the change; nil
	// for TreeDeleted and TreeOverflow.
	Stat *TreeStat
	// Since is a time before every kernel event behind this change: the
	// watcher had read the kernel's queue empty then and had delivered
	// everything it read before it. A change that some process completed
	// (its descriptor closed, its rename returned) before Since was
	// delivered in an earlier batch. Zero: no such time yet.
	Since time.Time
}

// TreeStat is the part of a stat a tree watcher keeps per path.
type TreeStat struct {
	Dev, Ino     uint64
	Mode         uint32 // type and permission bits
	UID, GID     uint32
	Size         int64
	Mtime, Ctime int64 // nanoseconds since the epoch
}

// isDir reports whether s is a directory.
func (s TreeStat) isDir() bool { return s.Mode&unix.S_IFMT == unix.S_IFDIR }

// treeStatOf keeps the fields of st a tree watcher compares.
func treeStatOf(st *unix.Stat_t) TreeStat {
	return TreeStat{
		Dev: st.Dev, Ino: st.Ino, Mode: st.Mode, UID: st.Uid, GID: st.Gid, Size: st.Size,
		Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(),
	}
}

// TreeWatchOptions configure WatchTree; the zero value is usable.
type TreeWatchOptions struct {
	// Window is how long changes are collected (and coalesced per path)
	// before they are delivered. Zero: DefaultTreeWindow.
	Window time.Duration
	// MaxPending bounds the paths collected in one window; beyond it the
	// watcher reports TreeOverflow and rescans. Zero: DefaultTreeMaxPending.
	MaxPending int
	// FlushOn, when set, names paths whose change ends the window at once
	// (a client's sync cookie: it waits for the watcher to report it).
	FlushOn func(rel string) bool
}

// Defaults of TreeWatchOptions.
const (
	DefaultTreeWindow     = 20 * time.Millisecond
	DefaultTreeMaxPending = 65536
)

// userWatchesSysctl is the kernel's per-user inotify watch limit.
const userWatchesSysctl = "/proc/sys/fs/inotify/max_user_watches"

// treeEvents are the inotify events a tree watcher asks for on every
// directory.
const treeEvents = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_DELETE_SELF | unix.IN_ONLYDIR

// WatchTree watches every directory of the workspace (adding watches for
// directories that appear) and calls deliver with the changes of each
// coalescing window, in the order they were first seen. A lost kernel
// event queue (IN_Q_OVERFLOW) or a window with more than MaxPending paths is
// reported as TreeOverflow and recovered by rescanning the tree against what
// the watcher last knew. deliver(nil, err) reports a failure after which
// the watcher stops. deliver runs on the watcher's goroutine and must not
// call Close.
//
// When the kernel's per-user watch limit (fs.inotify.max_user_watches) is
// too low for the tree, a root daemon raises it; otherwise WatchTree fails
// with the sysctl line that fixes it.
func (fs *FS) WatchTree(ctx context.Context, opts TreeWatchOptions, deliver func([]TreeEvent, error)) (io.Closer, error) {
	const op = "watch tree"
	if err := checkCtx(ctx, op, "."); err != nil {
		return nil, err
	}
	if opts.Window <= 0 {
		opts.Window = DefaultTreeWindow
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = DefaultTreeMaxPending
	}
	w, err := fs.newTreeWatcher(opts, deliver)
	if err != nil {
		return nil, err
	}
	go w.run()
	return w, nil
}

// newTreeWatcher watches and records the whole tree; run starts reading.
func (fs *FS) newTreeWatcher(opts TreeWatchOptions, deliver func([]TreeEvent, error)) (*treeWatcher, error) {
	ifd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, ioFailure("watch tree", ".", pathErr("inotify_init1", ".", err))
	}
	w := &treeWatcher{
		fs: fs, ifd: ifd, opts: opts, deliver: deliver, watches: newTreeWatches(),
		marks: map[string]*treeMark{}, moves: map[uint32]treeMove{}, done: make(chan struct{}),
		sysctl: userWatchesSysctl, root: os.Geteuid() == 0 && !fs.hooks.treeNotRoot,
	}
	if fs.hooks.treeSysctl != "" {
		w.sysctl = fs.hooks.treeSysctl
	}
	known := map[string]TreeStat{}
	if _, err := w.scan(".", known, nil); err != nil {
		unix.Close(ifd)
		return nil, err
	}
	w.snap = newTreeSnap(known)
	w.f = os.NewFile(uintptr(ifd), "inotify")
	return w, nil
}

// treeWatcher is one running WatchTree.
type treeWatcher struct {
	fs      *FS
	ifd     int
	f       *os.File
	opts    TreeWatchOptions
	deliver func([]TreeEvent, error)
	sysctl  string // the max_user_watches file
	root    bool   // may raise the watch limit

	watches *treeWatches // the watch table
	snap    *treeSnap    // what the watcher last knew, per path

	// The current window.
	items    []treeItem           // first-seen order
	marks    map[string]*treeMark // pending paths
	moves    map[uint32]treeMove  // IN_MOVED_FROM waiting for its IN_MOVED_TO
	first    time.Time            // when the window opened
	overflow bool                 // events were lost in this window
	urgent   bool                 // a FlushOn path is pending

	drained time.Time // start of the latest read that emptied the kernel queue
	since   time.Time // drained as of the last delivery: Since of the next batch

	done chan struct{}
	once sync.Once
}

// treeItem is a pending path, or a rename pair when from is set.
type treeItem struct {
	path, from string
}

// treeMark is what was seen of one pending path.
type treeMark struct {
	modified bool // IN_MODIFY: bytes written
}

// treeMove is a pending IN_MOVED_FROM.
type treeMove struct {
	path string
	dir  bool
}

// Close stops the watcher and waits for its goroutine.
func (w *treeWatcher) Close() error {
	var err error
	w.once.Do(func() {
		err = w.f.Close()
		<-w.done
	})
	return err
}

// addWatch watches the directory rel. A full watch table is raised once as
// root, else reported with the fix.
func (w *treeWatcher) addWatch(rel string) error {
	dfd, err := w.fs.fence.Open(rel, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	proc := "/proc/self/fd/" + strconv.Itoa(dfd)
	add := func() (int, error) {
		if w.fs.hooks.treeAddWatch != nil {
			if err := w.fs.hooks.treeAddWatch(rel); err != nil {
				return -1, err
			}
		}
		return retryEINTR(func() (int, error) { return unix.InotifyAddWatch(w.ifd, proc, treeEvents) })
	}
	wd, err := add()
	if errors.Is(err, unix.ENOSPC) {
		if rerr := w.raiseLimit(); rerr != nil {
			return rerr
		}
		wd, err = add()
	}
	if err != nil {
		return pathErr("inotify_add_watch", rel, err)
	}
	w.watches.set(rel, wd)
	return nil
}

// raiseLimit doubles fs.inotify.max_user_watches as root; otherwise, or when
// that fails, it returns the error that names the fix.
func (w *treeWatcher) raiseLimit() error {
	data, err := os.ReadFile(w.sysctl)
	cur, perr := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || perr != nil {
		return fmt.Errorf("inotify watch limit reached and %s is unreadable: %w", w.sysctl, errors.Join(err, perr))
	}
	want := max(cur*2, 8192)
	fix := fmt.Sprintf("sysctl -w fs.inotify.max_user_watches=%d", want)
	if !w.root {
		return fmt.Errorf("inotify watch limit reached (fs.inotify.max_user_watches=%d, %d directories watched); as root run: %s", cur, len(w.watches.dirs), fix)
	}
	if err := os.WriteFile(w.sysctl, []byte(strconv.Itoa(want)+"\n"), 0o644); err != nil {
		return fmt.Errorf("inotify watch limit reached (fs.inotify.max_user_watches=%d) and raising it failed (%w); run: %s", cur, err, fix)
	}
	return nil
}

// scan records rel's subtree in into (rel itself is not recorded), adding a
// watch on every directory before listing it so nothing created meanwhile
// is missed. Each recorded path is passed to found when it is set. A
// directory that vanishes during the scan is skipped.
func (w *treeWatcher) scan(rel string, into map[string]TreeStat, found func(string)) (int, error) {
	if err := w.addWatch(rel); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return 0, nil
		}
		return 0, ioFailure("watch tree", rel, err)
	}
	fd, err := w.fs.fence.Open(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return 0, nil
		}
		return 0, ioFailure("watch tree", rel, err)
	}
	dir := os.NewFile(uintptr(fd), rel)
	names, err := dir.Readdirnames(-1)
	if err != nil {
		dir.Close()
		return 0, ioFailure("watch tree", rel, err)
	}
	n := 0
	var subdirs []string
	for _, name := range names {
		var st unix.Stat_t
		if err := retryEINTR0(func() error { return unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) }); err != nil {
			continue // gone meanwhile; its event follows
		}
		child := joinRel(rel, name)
		ts := treeStatOf(&st)
		into[child] = ts
		n++
		if found != nil {
			found(child)
		}
		if ts.isDir() {
			subdirs = append(subdirs, child)
		}
	}
	dir.Close()
	for _, sub := range subdirs {
		m, err := w.scan(sub, into, found)
		if err != nil {
			return n, err
		}
		n += m
	}
	return n, nil
}

// joinRel joins a workspace-relative directory and a name.
func joinRel(dir, name string) string {
	if dir == "." || dir == "" {
		return name
	}
	return dir + "/" + name
}

// under reports whether p is below the directory dir.
func under(p, dir string) bool {
	return len(p) > len(dir) && p[len(dir)] == '/' && strings.HasPrefix(p, dir)
}

// run reads events until Close, flushing each window when it ends.
func (w *treeWatcher) run() {
	defer close(w.done)
	buf := make([]byte, treeReadBuf)
	for {
		n, err := w.read(buf)
		ended := errors.Is(err, os.ErrDeadlineExceeded)
		switch {
		case ended:
		case errors.Is(err, os.ErrClosed):
			return
		case err != nil:
			w.deliver(nil, ioFailure("watch tree", ".", err))
			return
		}
		if gone := w.parse(buf[:n]); gone {
			w.flush()
			w.deliver(nil, provider.NewError(provider.CodeNotFound, "watch tree", ".", nil,
				"the workspace directory was removed or moved"))
			return
		}
		if ended || w.pending() && (w.urgent || time.Since(w.first) >= w.opts.Window) {
			w.flush()
		}
	}
}

// maxTreeEvent is the largest inotify event: its header and a name of
// NAME_MAX bytes with its NUL.
const maxTreeEvent = unix.SizeofInotifyEvent + unix.NAME_MAX + 1

// treeReadBuf is the size of the watcher's read buffer: 256 of the largest
// events.
const treeReadBuf = 256 * maxTreeEvent

// read reads the next events into buf, waiting at most until the window
// ends, and records in drained when the kernel's queue was last seen empty.
// It returns os.ErrDeadlineExceeded, after a last look at the queue, when
// the window ended: n may then be above zero.
func (w *treeWatcher) read(buf []byte) (n int, err error) {
	if w.pending() {
		_ = w.f.SetReadDeadline(w.first.Add(w.opts.Window))
	} else {
		_ = w.f.SetReadDeadline(time.Time{})
	}
	start := time.Now()
	n, err = w.f.Read(buf)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// A read whose deadline passed before it began returns without
		// looking at the queue: look now, without waiting, so that events
		// queued before start are never taken for ones that came after.
		start = time.Now()
		n, err = w.readNow(buf)
		if err == nil {
			err = os.ErrDeadlineExceeded
		}
	}
	if (err == nil || errors.Is(err, os.ErrDeadlineExceeded)) && len(buf)-n >= maxTreeEvent {
		// The kernel returns every queued event that fits: the queue was
		// empty when this read began, or held only what it returned.
		w.drained = start
	}
	return n, err
}

// readNow reads what is queued without waiting: 0 and no error when nothing is.
func (w *treeWatcher) readNow(buf []byte) (int, error) {
	if err := w.f.SetReadDeadline(time.Time{}); err != nil {
		return 0, err
	}
	rc, err := w.f.SyscallConn()
	if err != nil {
		return 0, err
	}
	n, rerr := 0, error(nil)
	if err := rc.Read(func(fd uintptr) bool {
		n, rerr = unix.Read(int(fd), buf)
		return true // never wait
	}); err != nil {
		return 0, err
	}
	if errors.Is(rerr, unix.EAGAIN) {
		return 0, nil
	}
	if rerr != nil {
		return 0, os.NewSyscallError("read", rerr)
	}
	return n, nil
}

// pending reports whether the window holds anything.
func (w *treeWatcher) pending() bool {
	return len(w.items) > 0 || len(w.moves) > 0 || w.overflow
}

// touch marks p pending.
func (w *treeWatcher) touch(p string, modified bool) {
	if !w.pending() {
		w.first = time.Now()
	}
	m, ok := w.marks[p]
	if !ok {
		if len(w.marks) >= w.opts.MaxPending {
			w.lose()
			return
		}
		m = &treeMark{}
		w.marks[p] = m
		w.items = append(w.items, treeItem{path: p})
	}
	m.modified = m.modified || modified
	if w.opts.FlushOn != nil && w.opts.FlushOn(p) {
		w.urgent = true
	}
}

// lose drops the window: the flush rescans instead.
func (w *treeWatcher) lose() {
	if !w.pending() {
		w.first = time.Now()
	}
	w.overflow = true
	w.items = nil
	clear(w.marks)
	clear(w.moves)
}

// parse applies a buffer of inotify events to the window; gone reports that
// the root's watch ended.
func (w *treeWatcher) parse(buf []byte) (gone bool) {
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		raw := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
		name := string(raw[:bytesIndexNUL(raw)])
		off += unix.SizeofInotifyEvent + int(ev.Len)
		if w.apply(int(ev.Wd), ev.Mask, ev.Cookie, name) {
			gone = true
		}
	}
	return gone
}

// apply handles one event; it reports true when the root's watch ended.
func (w *treeWatcher) apply(wd int, mask, cookie uint32, name string) bool {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		w.lose()
		return false
	}
	if mask&unix.IN_IGNORED != 0 {
		dir, ok := w.watches.ignored(wd)
		return ok && dir == "."
	}
	dir, ok := w.watches.wds[wd]
	if !ok || name == "" || w.overflow {
		return false // self events: the parent's watch reports the entry
	}
	p := joinRel(dir, name)
	isDir := mask&unix.IN_ISDIR != 0
	switch {
	case mask&unix.IN_MOVED_FROM != 0:
		if !w.pending() {
			w.first = time.Now()
		}
		if len(w.moves)+len(w.items) >= w.opts.MaxPending {
			w.lose()
			return false
		}
		w.moves[cookie] = treeMove{path: p, dir: isDir}
	case mask&unix.IN_MOVED_TO != 0:
		from, paired := w.moves[cookie]
		if !paired {
			w.touch(p, false)
			if isDir {
				w.adopt(p)
			}
			return false
		}
		delete(w.moves, cookie)
		if from.dir {
			w.watches.move(from.path, p)
		}
		w.items = append(w.items, treeItem{from: from.path, path: p})
	case mask&unix.IN_CREATE != 0:
		w.touch(p, false)
		if isDir {
			w.adopt(p)
		}
	default: // IN_DELETE, IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE
		w.touch(p, mask&unix.IN_MODIFY != 0)
	}
	return false
}

// adopt watches a directory that appeared and marks what it already holds
// (entries created before its watch existed are otherwise never reported).
func (w *treeWatcher) adopt(p string) {
	found := map[string]TreeStat{}
	if _, err := w.scan(p, found, func(c string) { w.touch(c, false) }); err != nil {
		w.fs.hooks.logf("watch tree: %v", err)
		w.lose()
	}
}

// unwatch removes the watches at and below dir (it left the tree).
func (w *treeWatcher) unwatch(dir string) {
	w.watches.remove(dir, func(wd int) { _, _ = unix.InotifyRmWatch(w.ifd, uint32(wd)) })
}

// flush classifies the window against the snapshot and delivers it.
func (w *treeWatcher) flush() {
	var out []TreeEvent
	// An IN_MOVED_FROM without its IN_MOVED_TO left the tree.
	for _, mv := range w.moves {
		if mv.dir {
			w.unwatch(mv.path)
		}
		if _, ok := w.marks[mv.path]; !ok {
			w.marks[mv.path] = &treeMark{}
			w.items = append(w.items, treeItem{path: mv.path})
		}
	}
	clear(w.moves)
	if w.overflow {
		out = append(out, TreeEvent{Kind: TreeOverflow})
		out = append(out, w.rescan()...)
	} else {
		for _, it := range w.items {
			if it.from != "" {
				out = w.renamed(out, it.from, it.path)
				continue
			}
			if m, ok := w.marks[it.path]; ok {
				out = w.classify(out, it.path, m.modified)
			}
		}
	}
	w.items = nil
	clear(w.marks)
	w.overflow, w.urgent = false, false
	for i := range out {
		out[i].Since = w.since
	}
	// Everything read before drained is in out or was delivered earlier.
	w.since = w.drained
	if len(out) > 0 {
		w.deliver(out, nil)
	}
}

// renamed reports a rename within the tree and moves the snapshot along.
func (w *treeWatcher) renamed(out []TreeEvent, from, to string) []TreeEvent {
	old, had := w.snap.del(from)
	if !had {
		// from appeared in this window (a temp file renamed into place):
		// to was created or replaced.
		delete(w.marks, from)
		delete(w.marks, to)
		out = w.classify(out, to, true)
		if st, ok := w.snap.get(to); ok && st.isDir() {
			out = w.createdBelow(out, to)
		}
		return out
	}
	if old.isDir() {
		w.snap.move(from, to)
	}
	delete(w.marks, from)
	delete(w.marks, to)
	ev := TreeEvent{Kind: TreeRenamed, Path: from, To: to, Dir: old.isDir()}
	if st, ok, err := w.fs.fence.StatEntry(to); err == nil && ok {
		ts := treeStatOf(&st)
		w.snap.put(to, ts)
		ev.Stat = &ts
	}
	return append(out, ev)
}

// createdBelow reports, as created, what a directory that appeared within
// the window holds that the snapshot does not know (its entries' own
// events named the directory's earlier name), and watches it.
func (w *treeWatcher) createdBelow(out []TreeEvent, dir string) []TreeEvent {
	found := map[string]TreeStat{}
	if _, err := w.scan(dir, found, nil); err != nil {
		w.fs.hooks.logf("watch tree: %v", err)
	}
	paths := make([]string, 0, len(found))
	for p := range found {
		if _, known := w.snap.get(p); !known {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	for _, p := range paths {
		st := found[p]
		w.snap.put(p, st)
		out = append(out, TreeEvent{Kind: TreeCreated, Path: p, Dir: st.isDir(), Stat: &st})
	}
	return out
}

// classify compares one pending path with the snapshot.
func (w *treeWatcher) classify(out []TreeEvent, p string, modified bool) []TreeEvent {
	old, had := w.snap.get(p)
	st, ok, err := w.fs.fence.StatEntry(p)
	if err != nil {
		ok = false
	}
	switch {
	case !had && !ok:
		return out
	case had && !ok:
		w.snap.del(p)
		out = append(out, TreeEvent{Kind: TreeDeleted, Path: p, Dir: old.isDir()})
		if old.isDir() {
			for _, c := range w.snap.below(p) {
				cst, _ := w.snap.del(c)
				out = append(out, TreeEvent{Kind: TreeDeleted, Path: c, Dir: cst.isDir()})
			}
			w.unwatch(p)
		}
		return out
	}
	cur := treeStatOf(&st)
	w.snap.put(p, cur)
	ev := TreeEvent{Path: p, Dir: cur.isDir(), Stat: &cur}
	switch {
	case !had:
		ev.Kind = TreeCreated
	case old.Ino != cur.Ino || old.Mode&unix.S_IFMT != cur.Mode&unix.S_IFMT:
		ev.Kind = TreeModified
	case cur.isDir():
		if old.Mode == cur.Mode && old.UID == cur.UID && old.GID == cur.GID {
			return out
		}
		ev.Kind = TreeAttrib
	case modified || old.Size != cur.Size || old.Mtime != cur.Mtime:
		ev.Kind = TreeModified
	case old != cur:
		ev.Kind = TreeAttrib
	default:
		return out
	}
	return append(out, ev)
}

// rescan rebuilds the snapshot and watch table from the tree and reports
// what differs from what the watcher knew.
func (w *treeWatcher) rescan() []TreeEvent {
	cur := map[string]TreeStat{}
	before := make(map[string]int, len(w.watches.dirs))
	for rel, wd := range w.watches.dirs {
		before[rel] = wd
	}
	if _, err := w.scan(".", cur, nil); err != nil {
		w.fs.hooks.logf("watch tree rescan: %v", err)
	}
	// Watches of directories that are gone end by themselves (IN_IGNORED);
	// drop names whose directory is no longer where the table says.
	for rel := range before {
		if st, ok := cur[rel]; rel != "." && (!ok || !st.isDir()) {
			w.watches.unname(rel)
		}
	}
	var out []TreeEvent
	for p, old := range w.snap.all() {
		if _, ok := cur[p]; !ok {
			out = append(out, TreeEvent{Kind: TreeDeleted, Path: p, Dir: old.isDir()})
		}
	}
	for p, st := range cur {
		old, had := w.snap.get(p)
		ts := st
		ev := TreeEvent{Path: p, Dir: st.isDir(), Stat: &ts}
		switch {
		case !had:
			ev.Kind = TreeCreated
		case old.Ino != st.Ino || old.Mode&unix.S_IFMT != st.Mode&unix.S_IFMT:
			ev.Kind = TreeModified
		case st.isDir():
			if old.Mode == st.Mode && old.UID == st.UID && old.GID == st.GID {
				continue
			}
			ev.Kind = TreeAttrib
		case old.Size != st.Size || old.Mtime != st.Mtime:
			ev.Kind = TreeModified
		case old != st:
			ev.Kind = TreeAttrib
		default:
			continue
		}
		out = append(out, ev)
	}
	w.snap.reset(cur)
	slices.SortFunc(out, func(a, b TreeEvent) int {
		if a.Kind != b.Kind && (a.Kind == TreeDeleted || b.Kind == TreeDeleted) {
			if a.Kind == TreeDeleted {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Path, b.Path)
	})
	return out
}

// CachedVersion is the version of the workspace path rel when it costs no
// read: the trusted cached digest of a regular file, the metadata version
// of anything else. ok is false when rel is missing or its digest is not
// cached. A tree watcher's consumer uses it so that watching never hashes
// files (nor fills the digest cache) behind the guards' backs.
func (fs *FS) CachedVersion(rel string) (provider.Version, bool) {
	st, ok, err := fs.fence.StatEntry(rel)
	if err != nil || !ok {
		return "", false
	}
	return fs.vers.Cached(&st)
}
