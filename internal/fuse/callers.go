package fuse

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/policy/procbind"
)

// callerTTL bounds how long the answer for one calling thread is reused.
// Finding a caller's session costs several /proc reads (the thread, its
// process, its cgroup, its ancestors, their start times); a program doing
// thousands of file operations a second asks the same question each time.
// A cached answer is used only for the same thread incarnation: a pidfd of
// the thread opened before the answer still answers (one syscall), or else
// its start time is read again (one read of /proc/TID/stat) and must match, because a
// tid is recycled as soon as the kernel has gone through pid_max (32768 on
// many machines: a fork loop gets there in seconds), and a bound process
// given the tid of a thread answered "unbound" a moment ago would
// otherwise write unguarded. Every Bind clears the cache (ForgetCallers),
// so a process bound a moment ago is never answered from an older
// "unbound".
const callerTTL = time.Second

// callerCacheMax bounds the cache; past it the cache starts over.
const callerCacheMax = 8192

// callerPidfdsMax bounds the pidfds the cache holds (descriptors the
// socket's bounds count on); answers beyond it are checked by start time.
const callerPidfdsMax = 128

// callerInfo is the cached identity of one calling thread.
type callerInfo struct {
	pid     int32  // thread group id (the process)
	start   uint64 // the thread's start time: which incarnation of the tid
	session policy.SessionID
	bound   bool
	strict  bool // the binding is strict (StrictBindings)
	until   time.Time
	// pidfd, when hasPidfd, refers to this very incarnation of the thread
	// (pidfd_open PIDFD_THREAD): while it answers, the tid has not been
	// recycled, so the cached answer is checked with one syscall instead
	// of a read of /proc/TID/stat. Owned by the cache.
	pidfd    int
	hasPidfd bool
}

// alive reports whether the thread incarnation ci.pidfd refers to still
// exists (EPERM: it exists, the daemon may not signal it).
func (ci callerInfo) alive() bool {
	err := unix.PidfdSendSignal(ci.pidfd, 0, nil, 0)
	return err == nil || err == unix.EPERM
}

// callerCache maps FUSE caller thread ids to their process and session.
type callerCache struct {
	mu     sync.Mutex
	epoch  uint64
	m      map[uint32]callerInfo
	pidfds int // entries holding a pidfd
}

// live returns the cached answer for tid when its pidfd shows the same
// thread incarnation is still running. The check runs under the lock, so
// no other goroutine closes the descriptor meanwhile.
func (c *callerCache) live(tid uint32, now time.Time) (callerInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ci, ok := c.m[tid]
	if !ok || !ci.hasPidfd || !now.Before(ci.until) || !ci.alive() {
		return callerInfo{}, false
	}
	ci.hasPidfd = false // the copy returned does not own the descriptor
	return ci, true
}

// get returns the cached answer for the thread tid that started at start,
// and the epoch to store a new one.
func (c *callerCache) get(tid uint32, start uint64, now time.Time) (callerInfo, bool, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ci, ok := c.m[tid]
	if ok && ci.start == start && now.Before(ci.until) {
		return ci, true, c.epoch
	}
	return callerInfo{}, false, c.epoch
}

// put stores an answer computed during epoch, unless a Bind came since. It
// takes ownership of ci's pidfd (closed if the answer is not kept, or when
// the budget of pidfds is spent).
func (c *callerCache) put(tid uint32, ci callerInfo, epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch != c.epoch {
		ci.closePidfd()
		return
	}
	if c.m == nil || len(c.m) >= callerCacheMax {
		c.dropLocked()
		c.m = make(map[uint32]callerInfo)
	}
	if old, ok := c.m[tid]; ok && old.hasPidfd {
		old.closePidfd()
		c.pidfds--
	}
	if ci.hasPidfd {
		if c.pidfds >= callerPidfdsMax {
			ci.closePidfd()
			ci.hasPidfd = false
		} else {
			c.pidfds++
		}
	}
	c.m[tid] = ci
}

// forget drops every answer.
func (c *callerCache) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	c.dropLocked()
}

// dropLocked empties the cache, closing its pidfds; c.mu is held.
func (c *callerCache) dropLocked() {
	for _, ci := range c.m {
		ci.closePidfd()
	}
	c.m = nil
	c.pidfds = 0
}

// closePidfd closes ci's pidfd, if it has one.
func (ci *callerInfo) closePidfd() {
	if ci.hasPidfd {
		_ = unix.Close(ci.pidfd)
		ci.hasPidfd = false
	}
}

// caller resolves a FUSE caller thread id to its process id and session.
//
// A thread seen before is answered from the cache while a pidfd opened
// before its answer was computed shows the same incarnation still running
// (one syscall); otherwise its start time is read and compared (see
// callerTTL).
func (m *mountState) caller(tid uint32) callerInfo {
	now := time.Now()
	if ci, ok := m.callers.live(tid, now); ok {
		return ci
	}
	// Opened before the answer is computed: if it still answers after,
	// the thread it refers to lived throughout, so the answer is its own.
	pidfd, perr := unix.PidfdOpen(int(tid), unix.PIDFD_THREAD)
	start, err := procbind.TaskStart(int(tid))
	if err != nil {
		start = 0 // no such thread (any more): never cached, see below
	}
	ci, ok, epoch := m.callers.get(tid, start, now)
	if ok && start != 0 {
		if perr == nil {
			_ = unix.Close(pidfd)
		}
		return ci
	}
	ci = callerInfo{pid: processOf(int32(tid)), start: start, until: now.Add(callerTTL)}
	if tid != 0 && m.cfg.Bindings != nil {
		if sb, ok := m.cfg.Bindings.(StrictBindings); ok {
			ci.session, ci.strict, ci.bound = sb.Binding(int(tid))
		} else {
			ci.session, ci.bound = m.cfg.Bindings.SessionOf(int(tid))
		}
	}
	if perr == nil {
		ci.pidfd, ci.hasPidfd = pidfd, true
		if !ci.alive() {
			ci.closePidfd() // it ended meanwhile: nothing to vouch for
		}
	}
	if start != 0 {
		m.callers.put(tid, ci, epoch)
	} else {
		ci.closePidfd()
	}
	cached := ci
	cached.hasPidfd = false // the caller's copy does not own the descriptor
	return cached
}

// ForgetCallers drops the cached caller identities. serve calls it after
// every session.bind, so a freshly bound process acts for its session at
// once.
func (mt *Server) ForgetCallers() { mt.state.callers.forget() }

// processOf maps the thread id FUSE reports to the id of its process (the
// thread group), so the audit log names the program, not one of its
// threads. It returns tid itself when /proc does not say.
func processOf(tid int32) int32 {
	if tid <= 0 {
		return tid
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(tid)) + "/status")
	if err != nil {
		return tid
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			if pid, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && pid > 0 {
				return int32(pid)
			}
			break
		}
	}
	return tid
}
