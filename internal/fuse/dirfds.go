package fuse

import (
	"path"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Directory descriptors. Without a cache every backing operation resolves
// its directory from the root with openat2 (a path walk and a descriptor
// per request). dirFds keeps O_PATH descriptors of backing directories,
// keyed by their mount-relative path, so an operation below a known
// directory costs one *at call on a held descriptor.
//
// Keyed by path, not by node: every backing call is addressed by path
// (openRel, entryAt, statRel), invalidation events (the mount's own renames,
// socket and out-of-band changes) name paths, and a path key drops exactly
// what a rename or delete of a directory makes wrong: the directory and
// everything below it.
//
// The no-escape guarantee. A held descriptor follows its directory: moved
// out of the workspace out of band, it points outside. Each descriptor is
// opened like before (openat2 below its parent's descriptor, no symbolic
// links, one name at a time, the chain starting at the root), and dropped
// with everything below it when the directory is renamed or removed through
// the mount (rename.go, namespace.go), through the socket, or out of band
// as reported by the backing-tree watcher (invalidate.go); a watcher that
// lost events (overflow) or stopped drops the whole cache. So the cache is
// only used while the tree is watched (Config.Watched): without a watcher
// nothing would report a move, and every operation resolves from the root.
// What remains is the watcher's own delay: between an out-of-band move and
// its report (one coalescing window), an operation under the old path may
// still reach the moved directory, as one already under way reached it
// without the cache.
//
// Invariant: a cached directory's parent is cached too (or is the root), so
// a path that is not cached has no cached descendants and dropping a
// subtree walks only cached entries. Using an entry touches its ancestors
// in the LRU order, so the least recently used entry is a leaf. Beyond the
// cap the least recently used entries are closed (an entry in use by a
// request is closed when the request releases it).

// DefaultDirFDs is the default cap on cached directory descriptors.
const DefaultDirFDs = 4096

// dirFds is the cache; nil or disabled means every lookup opens from the
// root.
type dirFds struct {
	root    int         // the mount's root descriptor (not owned)
	max     int         // cap on cached entries
	watched func() bool // the tree is watched; false: the cache is bypassed and emptied

	mu     sync.Mutex
	byPath map[string]*dirFd
	lru    dirFd  // sentinel: lru.next is the most recently used
	gen    uint64 // bumped by every drop: an open that raced one is not cached
	closed bool
	n      atomic.Int64 // len(byPath), read without the lock

	opened func() // tests: runs between a miss's opens and their caching
}

// dirFd is one cached directory descriptor.
type dirFd struct {
	c      *dirFds
	path   string
	fd     int
	refs   int  // requests using fd
	dead   bool // out of the cache; closed once refs is 0
	parent *dirFd
	kids   map[*dirFd]struct{}

	prev, next *dirFd
}

// newDirFds makes a cache of at most max descriptors below root; it is
// used only while watched reports true.
func newDirFds(root, max int, watched func() bool) *dirFds {
	c := &dirFds{root: root, max: max, watched: watched, byPath: make(map[string]*dirFd)}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	return c
}

// on reports whether the cache may be used; when it may not, it empties it
// (the watcher stopped: nothing reports moves any more).
func (c *dirFds) on() bool {
	if c == nil || c.max <= 0 {
		return false
	}
	if c.watched != nil && c.watched() {
		return true
	}
	if c.n.Load() > 0 {
		c.mu.Lock()
		c.dropAllLocked()
		c.mu.Unlock()
	}
	return false
}

// get returns a descriptor of the directory dir (mount-relative, not the
// root) and the entry to release, or a descriptor the caller owns when ref
// is nil.
func (c *dirFds) get(dir string) (fd int, ref *dirFd, err error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return -1, nil, unix.EBADF
	}
	if e, ok := c.byPath[dir]; ok {
		e.refs++
		c.touchLocked(e)
		c.mu.Unlock()
		return e.fd, e, nil
	}
	// The nearest cached ancestor, and the names below it.
	anc, base := (*dirFd)(nil), dir
	for {
		i := strings.LastIndexByte(base, '/')
		if i < 0 {
			base = ""
			break
		}
		base = base[:i]
		if e, ok := c.byPath[base]; ok {
			anc = e
			break
		}
	}
	from := c.root
	if anc != nil {
		anc.refs++
		from = anc.fd
	}
	gen := c.gen
	c.mu.Unlock()

	rest := dir
	if anc != nil {
		rest = dir[len(base)+1:]
	}
	names := strings.Split(rest, "/")
	fds := make([]int, 0, len(names))
	cur := from
	for _, name := range names {
		nfd, oerr := openat2(cur, name, unix.O_PATH|unix.O_DIRECTORY, 0)
		if oerr != nil {
			err = oerr
			break
		}
		fds = append(fds, nfd)
		cur = nfd
	}

	if c.opened != nil {
		c.opened()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if anc != nil {
		c.releaseLocked(anc)
	}
	if err != nil {
		closeAll(fds)
		return -1, nil, err
	}
	if c.closed || gen != c.gen || (anc != nil && anc.dead) {
		// A drop ran meanwhile: what was opened may be what it dropped.
		// Used once, not cached.
		closeAll(fds[:len(fds)-1])
		return fds[len(fds)-1], nil, nil
	}
	parent, p := anc, base
	for _, nfd := range fds {
		p = joinRel(p, names[0])
		names = names[1:]
		if e, ok := c.byPath[p]; ok {
			// Another request cached it meanwhile (same generation: the
			// same directory).
			_ = unix.Close(nfd)
			parent = e
			continue
		}
		e := &dirFd{c: c, path: p, fd: nfd, parent: parent}
		if parent != nil {
			if parent.kids == nil {
				parent.kids = make(map[*dirFd]struct{})
			}
			parent.kids[e] = struct{}{}
		}
		c.byPath[p] = e
		c.n.Add(1)
		c.pushFrontLocked(e)
		parent = e
	}
	parent.refs++
	c.touchLocked(parent)
	c.evictLocked()
	return parent.fd, parent, nil
}

// closeAll closes fds.
func closeAll(fds []int) {
	for _, fd := range fds {
		_ = unix.Close(fd)
	}
}

// release ends a request's use of e.
func (e *dirFd) release() {
	e.c.mu.Lock()
	e.c.releaseLocked(e)
	e.c.mu.Unlock()
}

func (c *dirFds) releaseLocked(e *dirFd) {
	e.refs--
	if e.refs == 0 && e.dead {
		_ = unix.Close(e.fd)
		e.fd = -1
	}
}

// touchLocked makes e and its ancestors the most recently used, ancestors
// first, so an ancestor is never less recent than its descendants.
func (c *dirFds) touchLocked(e *dirFd) {
	for ; e != nil; e = e.parent {
		c.unlinkLocked(e)
		c.pushFrontLocked(e)
	}
}

func (c *dirFds) pushFrontLocked(e *dirFd) {
	e.prev, e.next = &c.lru, c.lru.next
	c.lru.next.prev = e
	c.lru.next = e
}

func (c *dirFds) unlinkLocked(e *dirFd) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

// evictLocked closes the least recently used entries beyond the cap.
func (c *dirFds) evictLocked() {
	for len(c.byPath) > c.max && c.lru.prev != &c.lru {
		c.dropLocked(c.lru.prev)
	}
}

// dropLocked takes e and everything below it out of the cache.
func (c *dirFds) dropLocked(e *dirFd) {
	for k := range e.kids {
		c.dropLocked(k)
	}
	e.kids = nil
	if e.parent != nil {
		delete(e.parent.kids, e)
	}
	delete(c.byPath, e.path)
	c.n.Add(-1)
	c.unlinkLocked(e)
	e.dead = true
	if e.refs == 0 {
		_ = unix.Close(e.fd)
		e.fd = -1
	}
}

func (c *dirFds) dropAllLocked() {
	c.gen++
	for _, e := range c.byPath {
		if e.parent == nil {
			c.dropLocked(e)
		}
	}
}

// forget drops the directory rel and everything below it (it was renamed,
// removed or replaced); a file's path drops nothing. "" or "." drops all.
func (c *dirFds) forget(rel string) {
	if c == nil {
		return
	}
	rel = strings.Trim(path.Clean("/"+rel), "/")
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if rel == "" {
		c.dropAllLocked()
		return
	}
	if e, ok := c.byPath[rel]; ok {
		c.dropLocked(e)
	}
}

// forgetAll drops every cached descriptor.
func (c *dirFds) forgetAll() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.dropAllLocked()
	c.mu.Unlock()
}

// close drops everything and refuses further use (the mount is released).
func (c *dirFds) close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.closed = true
	c.dropAllLocked()
	c.mu.Unlock()
}

// size is the number of cached descriptors.
func (c *dirFds) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byPath)
}

// ForgetDirs drops every cached directory descriptor. The workspace watcher
// calls it when it lost events (an overflow): a directory moved meanwhile
// may be in no event, and a descriptor of it would follow it.
func (mt *Server) ForgetDirs() {
	mt.state.dirs.forgetAll()
}
