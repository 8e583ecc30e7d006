// Package procbind maps processes to policy sessions: a session binds a
// process (dshmount exec binds the command it starts), and that process and
// every descendant then act for the session on the mount.
//
// A pid alone is not an identity: pids are recycled. A binding therefore
// records the process's start time (field 22 of /proc/PID/stat), and a
// process whose pid matches a binding but whose start time does not is a
// different process. SessionOf walks the parent chain through /proc, so a
// grandchild started by a shell inside the bound command is found too, and
// a FUSE caller reported as a thread id is mapped to its process first.
//
// It owns no policy and must not know about FUSE or sockets; it only answers
// "which session does this pid act for".
package procbind

import (
	"fmt"
	"sync"

	"github.com/dshmount/dshmount/policy"
)

// Defaults of a Registry.
const (
	defaultCacheSize = 4096 // cached (pid, start time) answers
	defaultMaxDepth  = 512  // parent links followed before giving up
)

// sessionLookup tells whether a session is still open; *policy.Store
// implements it.
type sessionLookup interface {
	Session(id policy.SessionID) (policy.Session, bool)
}

// binding is one bound process.
type binding struct {
	session policy.SessionID
	start   uint64
}

// cacheKey identifies one process incarnation.
type cacheKey struct {
	pid   int
	start uint64
}

// answer is a cached SessionOf result.
type answer struct {
	session policy.SessionID
	ok      bool
}

// Registry maps pids to sessions. It is safe for concurrent use.
type Registry struct {
	sessions sessionLookup // nil: sessions are not checked
	proc     procReader
	maxDepth int

	mu    sync.Mutex
	epoch uint64              // advanced by every Bind; invalidates the cache
	bound map[int]binding     // by process id (thread group id)
	cache map[cacheKey]answer // bounded, FIFO eviction through order
	order []cacheKey
	next  int // next slot of order to evict
}

// New returns an empty registry whose sessions are checked against store
// (nil: any session id is accepted, for tests and tools).
func New(store *policy.Store) *Registry {
	var sl sessionLookup
	if store != nil {
		sl = store
	}
	return newRegistry(sl, procFS{root: "/proc"}, defaultCacheSize)
}

// newRegistry builds a registry on an explicit session lookup and proc
// reader.
func newRegistry(sessions sessionLookup, proc procReader, cacheSize int) *Registry {
	if cacheSize < 1 {
		cacheSize = 1
	}
	return &Registry{
		sessions: sessions,
		proc:     proc,
		maxDepth: defaultMaxDepth,
		bound:    make(map[int]binding),
		cache:    make(map[cacheKey]answer, cacheSize),
		order:    make([]cacheKey, 0, cacheSize),
	}
}

// Bind makes pid and its descendants act for session. A thread id binds its
// whole process. It fails when the process does not exist or the session is
// unknown (wrapping policy.ErrUnknownSession).
func (r *Registry) Bind(session policy.SessionID, pid int) error {
	if session == "" {
		return fmt.Errorf("bind pid %d: empty session id; open a session first", pid)
	}
	if r.sessions != nil {
		if _, ok := r.sessions.Session(session); !ok {
			return fmt.Errorf("bind pid %d to session %q: %w", pid, session, policy.ErrUnknownSession)
		}
	}
	pid, info, err := r.process(pid)
	if err != nil {
		return fmt.Errorf("bind pid %d to session %q: %w", pid, session, err)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked()
	r.bound[pid] = binding{session: session, start: info.Start}
	r.epoch++
	clear(r.cache)
	r.order = r.order[:0]
	r.next = 0
	return nil
}

// SessionOf returns the session pid acts for: the session bound to the
// nearest ancestor (or pid itself) whose start time still matches its
// binding, when that session is still open.
func (r *Registry) SessionOf(pid int) (policy.SessionID, bool) {
	r.mu.Lock()
	none := len(r.bound) == 0
	r.mu.Unlock()
	if none {
		return "", false // the common case of a mount nobody bound: no /proc reads
	}
	pid, info, err := r.process(pid)
	if err != nil {
		return "", false
	}
	key := cacheKey{pid: pid, start: info.Start}

	r.mu.Lock()
	cached, hit := r.cache[key]
	epoch := r.epoch
	var bound map[int]binding
	if !hit {
		bound = make(map[int]binding, len(r.bound))
		for p, b := range r.bound {
			bound[p] = b
		}
	}
	r.mu.Unlock()

	if !hit {
		cached = r.walk(pid, info, bound)
		r.mu.Lock()
		if r.epoch == epoch {
			r.storeLocked(key, cached)
		}
		r.mu.Unlock()
	}
	if !cached.ok {
		return "", false
	}
	if r.sessions != nil {
		if _, open := r.sessions.Session(cached.session); !open {
			return "", false
		}
	}
	return cached.session, true
}

// process maps a task id to its process (thread group) and reads it.
func (r *Registry) process(pid int) (int, procInfo, error) {
	info, err := r.proc.Info(pid)
	if err != nil {
		return pid, procInfo{}, err
	}
	if info.TGID > 0 && info.TGID != pid {
		pid = info.TGID
		if info, err = r.proc.Info(pid); err != nil {
			return pid, procInfo{}, err
		}
	}
	return pid, info, nil
}

// walk follows the parent chain from pid until a live binding is found.
func (r *Registry) walk(pid int, info procInfo, bound map[int]binding) answer {
	if len(bound) == 0 {
		return answer{}
	}
	for depth := 0; depth < r.maxDepth; depth++ {
		if b, ok := bound[pid]; ok && b.start == info.Start {
			return answer{session: b.session, ok: true}
		}
		if info.PPID <= 0 || info.PPID == pid {
			return answer{}
		}
		pid = info.PPID
		var err error
		if info, err = r.proc.Info(pid); err != nil {
			return answer{}
		}
	}
	return answer{}
}

// storeLocked caches an answer, evicting the oldest when full.
func (r *Registry) storeLocked(key cacheKey, a answer) {
	if _, ok := r.cache[key]; ok {
		r.cache[key] = a
		return
	}
	if len(r.order) < cap(r.order) {
		r.order = append(r.order, key)
	} else {
		delete(r.cache, r.order[r.next])
		r.order[r.next] = key
		r.next = (r.next + 1) % len(r.order)
	}
	r.cache[key] = a
}

// pruneLocked drops bindings of processes that exited (or whose pid now
// belongs to another process), so the table stays small.
func (r *Registry) pruneLocked() {
	for pid, b := range r.bound {
		info, err := r.proc.Info(pid)
		if err != nil || info.Start != b.start {
			delete(r.bound, pid)
		}
	}
}

// Bindings returns the number of live bindings (for status output).
func (r *Registry) Bindings() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked()
	return len(r.bound)
}
