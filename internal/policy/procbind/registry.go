// Package procbind maps processes to policy sessions: a session binds a
// process (dshmount exec binds the command it starts), and that process and
// every descendant then act for the session on the mount.
//
// Two mechanisms name "the process and every descendant":
//
//   - A binding cgroup (cgroup.go), where cgroup v2 is mounted and writable:
//     Bind moves the process into a cgroup of its own, every process forked
//     from it is born there, and membership does not change when a parent
//     exits, a process is reparented or calls setsid. This is what makes a
//     binding impossible to shed.
//   - The parent chain: a binding records the process's start time (field 22
//     of /proc/PID/stat), and SessionOf walks the parent chain through /proc
//     to a bound ancestor whose start time still matches, so a pid reused by
//     another process inherits nothing. It covers processes already forked
//     when the bind happened, and everything where cgroups are unavailable
//     (there, dshmount exec stays alive as the child subreaper of its tree so
//     an orphan is reparented to a bound process, not to init).
//
// Bindings are persisted in the policy store (policy.BindingRecord), so a
// restarted daemon maps the same processes to the same sessions, and they
// outlive their session: a process whose session was closed still acts for
// it, and the guard refuses it (policy.CheckMount answers FS_NOT_OBSERVED
// for a closed session), instead of letting it write unguarded. A binding
// goes when its root process has exited and its cgroup is empty (Sweep).
//
// It owns no policy and must not know about FUSE or sockets; it only answers
// "which session does this pid act for".
package procbind

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"sync"

	"github.com/dshmount/dshmount/internal/policy"
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

// bindingStore persists bindings; *policy.Store implements it.
type bindingStore interface {
	PutBinding(rec policy.BindingRecord) error
	DeleteBinding(rec policy.BindingRecord) error
	Bindings() ([]policy.BindingRecord, error)
}

// binding is one bound root process.
type binding struct {
	session policy.SessionID
	start   uint64
	strict  bool // the bound processes read before every write (exec --strict)
}

// cacheKey identifies one process incarnation.
type cacheKey struct {
	pid   int
	start uint64
}

// answer is a cached SessionOf result.
type answer struct {
	session policy.SessionID
	strict  bool
	ok      bool
}

// errUnbindable refuses to bind init (every process descends from it) or
// the daemon itself.
var errUnbindable = errors.New("init and the daemon itself cannot be bound; bind the process that runs the agent (dshmount exec)")

// Options configure New. The zero value is the default: binding cgroups
// where cgroup v2 is writable, logs to slog.Default().
type Options struct {
	// NoCgroups binds by the parent chain only, even where cgroup v2 is
	// writable (cgroup bindings persisted by an earlier run are still
	// honoured while their processes live).
	NoCgroups bool
	// Logger receives warnings (a cgroup that cannot be created or
	// removed); nil: slog.Default().
	Logger *slog.Logger
}

// Registry maps pids to sessions. It is safe for concurrent use.
type Registry struct {
	sessions sessionLookup // nil: sessions are not checked at Bind
	store    bindingStore  // nil: bindings are not persisted
	proc     procReader
	cgroups  cgroupManager // nil: no cgroup v2 to read
	enter    bool          // Bind creates binding cgroups
	log      *slog.Logger
	maxDepth int
	self     int // the daemon's pid: never bound

	bindMu sync.Mutex // serialises Bind and Sweep (store and cgroup changes)

	mu     sync.Mutex
	epoch  uint64                      // advanced by every Bind; invalidates the cache
	bound  map[int]binding             // by root process id (thread group id)
	groups map[string]policy.SessionID // by binding cgroup path
	strict map[string]bool             // binding cgroups of strict bindings
	cache  map[cacheKey]answer         // bounded, FIFO eviction through order
	order  []cacheKey
	next   int // next slot of order to evict
}

// New returns a registry whose sessions are checked against store and whose
// bindings are persisted in it; the bindings an earlier daemon stored there
// are loaded (those whose processes are all gone are dropped). With a nil
// store any session id is accepted and nothing is persisted (tests, tools).
func New(store *policy.Store, opts Options) (*Registry, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	var (
		sl sessionLookup
		bs bindingStore
		cm cgroupManager
	)
	if store != nil {
		sl, bs = store, store
	}
	cg, werr := detectCgroups("/proc")
	if cg != nil {
		cm = cg
	}
	enter := werr == nil && !opts.NoCgroups
	if werr != nil && !opts.NoCgroups {
		log.Info("processes are bound by their parent chain only; dshmount exec stays alive as the subreaper of its tree",
			"reason", werr)
	}
	r := newRegistry(sl, procFS{root: "/proc"}, defaultCacheSize)
	r.store, r.cgroups, r.enter, r.log, r.self = bs, cm, enter, log, os.Getpid()
	if err := r.load(); err != nil {
		return nil, err
	}
	r.Sweep()
	return r, nil
}

// newRegistry builds a registry on an explicit session lookup and proc
// reader, without cgroups or persistence.
func newRegistry(sessions sessionLookup, proc procReader, cacheSize int) *Registry {
	if cacheSize < 1 {
		cacheSize = 1
	}
	return &Registry{
		sessions: sessions,
		proc:     proc,
		log:      slog.Default(),
		maxDepth: defaultMaxDepth,
		bound:    make(map[int]binding),
		groups:   make(map[string]policy.SessionID),
		strict:   make(map[string]bool),
		cache:    make(map[cacheKey]answer, cacheSize),
		order:    make([]cacheKey, 0, cacheSize),
	}
}

// load reads the persisted bindings, then sweeps the dead ones.
func (r *Registry) load() error {
	if r.store == nil {
		return nil
	}
	recs, err := r.store.Bindings()
	if err != nil {
		return fmt.Errorf("load process bindings: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range recs {
		switch {
		case rec.Cgroup != "":
			r.groups[rec.Cgroup] = rec.Session // Sweep removes it once empty
			if rec.Strict {
				r.strict[rec.Cgroup] = true
			}
		case r.alive(rec):
			r.bound[rec.PID] = binding{session: rec.Session, start: rec.Start, strict: rec.Strict}
		default: // the process exited, or its pid was reused since
			if err := r.store.DeleteBinding(rec); err != nil {
				r.log.Warn("forget a dead process binding", "session", rec.Session, "err", err)
			}
		}
	}
	return nil
}

// Bind makes pid and its descendants act for session. A thread id binds its
// whole process. Where binding cgroups are available the process is moved
// into a new cgroup first, so that every process it starts from now on stays
// bound whatever happens to its parents; the binding is persisted before
// Bind returns. It fails when the process does not exist or the session is
// unknown (wrapping policy.ErrUnknownSession).
func (r *Registry) Bind(session policy.SessionID, pid int) error {
	return r.BindWith(session, pid, false)
}

// BindWith is Bind; with strict, the bound processes read before every
// write through the mount even when their session is not strict (dshmount
// exec --strict): Binding reports it.
func (r *Registry) BindWith(session policy.SessionID, pid int, strict bool) error {
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
	if pid == 1 || pid == r.self {
		return fmt.Errorf("bind pid %d to session %q: %w", pid, session, errUnbindable)
	}

	r.bindMu.Lock()
	defer r.bindMu.Unlock()
	recs := []policy.BindingRecord{{Session: session, PID: pid, Start: info.Start, Strict: strict}}
	if r.enter && r.cgroups != nil {
		cg, err := r.enterCgroup(session, pid)
		if err != nil {
			r.log.Warn("binding by the parent chain only: the process cannot be moved into a binding cgroup",
				"session", session, "pid", pid, "err", err)
		} else {
			recs = append(recs, policy.BindingRecord{Session: session, Cgroup: cg, Strict: strict})
		}
	}
	if r.store != nil {
		for _, rec := range recs {
			if err := r.store.PutBinding(rec); err != nil {
				return fmt.Errorf("bind pid %d to session %q: %w", pid, session, err)
			}
		}
	}

	r.mu.Lock()
	for _, rec := range recs {
		if rec.Cgroup != "" {
			r.groups[rec.Cgroup] = session
			if strict {
				r.strict[rec.Cgroup] = true
			}
		} else {
			r.bound[pid] = binding{session: session, start: info.Start, strict: strict}
		}
	}
	r.epoch++
	clear(r.cache)
	r.order = r.order[:0]
	r.next = 0
	r.mu.Unlock()
	r.sweepLocked()
	return nil
}

// enterCgroup moves pid into a new binding cgroup of session.
func (r *Registry) enterCgroup(session policy.SessionID, pid int) (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("name a cgroup: %w", err)
	}
	name := cgroupName(session) + "-" + hex.EncodeToString(b[:])
	return r.cgroups.Enter(pid, name)
}

// cgroupName keeps the characters of a session id that are safe in a
// directory name.
func cgroupName(session policy.SessionID) string {
	out := make([]byte, 0, len(session))
	for i := 0; i < len(session) && len(out) < 64; i++ {
		c := session[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' {
			out = append(out, c)
		}
	}
	if len(out) == 0 || out[0] == '.' {
		out = append([]byte("s"), out...)
	}
	return string(out)
}

// SessionOf returns the session pid acts for: the session of the nearest
// binding cgroup that holds it, else the session bound to the nearest
// ancestor (or pid itself) whose start time still matches its binding. The
// session may be closed: a binding outlives its session, and the guard
// refuses a closed session.
func (r *Registry) SessionOf(pid int) (policy.SessionID, bool) {
	session, _, ok := r.Binding(pid)
	return session, ok
}

// Binding is SessionOf, and whether the binding that answers is strict
// (BindWith).
func (r *Registry) Binding(pid int) (session policy.SessionID, strict, ok bool) {
	r.mu.Lock()
	none := len(r.bound) == 0 && len(r.groups) == 0
	r.mu.Unlock()
	if none {
		return "", false, false // the common case of a mount nobody bound: no /proc reads
	}
	pid, info, err := r.process(pid)
	if err != nil {
		return "", false, false
	}
	key := cacheKey{pid: pid, start: info.Start}

	r.mu.Lock()
	cached, hit := r.cache[key]
	epoch := r.epoch
	var (
		bound        map[int]binding
		groups       map[string]policy.SessionID
		strictGroups map[string]bool
	)
	if !hit {
		bound = make(map[int]binding, len(r.bound))
		for p, b := range r.bound {
			bound[p] = b
		}
		groups = make(map[string]policy.SessionID, len(r.groups))
		for g, s := range r.groups {
			groups[g] = s
		}
		strictGroups = make(map[string]bool, len(r.strict))
		for g := range r.strict {
			strictGroups[g] = true
		}
	}
	r.mu.Unlock()

	if !hit {
		cached = r.inCgroup(pid, groups, strictGroups)
		if !cached.ok {
			cached = r.walk(pid, info, bound)
		}
		r.mu.Lock()
		if r.epoch == epoch {
			r.storeLocked(key, cached)
		}
		r.mu.Unlock()
	}
	if !cached.ok {
		return "", false, false
	}
	return cached.session, cached.strict, true
}

// inCgroup finds the binding cgroup nearest to pid's cgroup: the cgroup
// itself or the closest ancestor that is bound.
func (r *Registry) inCgroup(pid int, groups map[string]policy.SessionID, strict map[string]bool) answer {
	if len(groups) == 0 || r.cgroups == nil {
		return answer{}
	}
	cg, err := r.cgroups.Of(pid)
	if err != nil {
		return answer{}
	}
	for cg = path.Clean(cg); ; cg = path.Dir(cg) {
		if s, ok := groups[cg]; ok {
			return answer{session: s, strict: strict[cg], ok: true}
		}
		if cg == "/" || cg == "." {
			return answer{}
		}
	}
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
			return answer{session: b.session, strict: b.strict, ok: true}
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

// Sweep drops the bindings whose processes are all gone: a root process
// that exited (or whose pid now belongs to another process), a binding
// cgroup with no process left (the cgroup is removed). The daemon calls it
// now and then; Bind calls it too.
func (r *Registry) Sweep() {
	r.bindMu.Lock()
	defer r.bindMu.Unlock()
	r.sweepLocked()
}

// sweepLocked is Sweep with bindMu held.
func (r *Registry) sweepLocked() {
	r.mu.Lock()
	var recs []policy.BindingRecord
	for pid, b := range r.bound {
		recs = append(recs, policy.BindingRecord{Session: b.session, PID: pid, Start: b.start, Strict: b.strict})
	}
	for cg, s := range r.groups {
		recs = append(recs, policy.BindingRecord{Session: s, Cgroup: cg, Strict: r.strict[cg]})
	}
	r.mu.Unlock()

	var dead []policy.BindingRecord
	for _, rec := range recs {
		if r.alive(rec) {
			continue
		}
		if rec.Cgroup != "" && r.cgroups != nil {
			if err := r.cgroups.Remove(rec.Cgroup); err != nil {
				r.log.Warn("remove an empty binding cgroup", "cgroup", rec.Cgroup, "err", err)
				continue // kept bound: only root could move a process into it
			}
		}
		dead = append(dead, rec)
	}
	if len(dead) == 0 {
		return
	}
	r.mu.Lock()
	for _, rec := range dead {
		if rec.Cgroup != "" {
			delete(r.groups, rec.Cgroup)
			delete(r.strict, rec.Cgroup)
		} else if b, ok := r.bound[rec.PID]; ok && b.start == rec.Start {
			delete(r.bound, rec.PID)
		}
	}
	r.mu.Unlock()
	if r.store == nil {
		return
	}
	for _, rec := range dead {
		if err := r.store.DeleteBinding(rec); err != nil && !errors.Is(err, policy.ErrClosed) {
			r.log.Warn("forget a dead process binding", "session", rec.Session, "err", err)
		}
	}
}

// alive reports whether a binding may still have a process: its root
// process runs, or its cgroup is populated. When it cannot tell, it says
// alive (a binding kept too long costs nothing; one dropped too early lets
// a process write unguarded).
func (r *Registry) alive(rec policy.BindingRecord) bool {
	if rec.Cgroup != "" {
		if r.cgroups == nil {
			return true
		}
		populated, err := r.cgroups.Populated(rec.Cgroup)
		return err != nil || populated
	}
	info, err := r.proc.Info(rec.PID)
	if errors.Is(err, errNoProcess) {
		return false
	}
	return err != nil || info.Start == rec.Start
}

// Bindings sweeps, then returns the number of live bindings (a bound root
// process and a binding cgroup count one each).
func (r *Registry) Bindings() int {
	r.Sweep()
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.bound) + len(r.groups)
}
