package fuse

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dshmount/dshmount/policy"
	"github.com/dshmount/dshmount/policy/procbind"
)

// callerTTL bounds how long the answer for one calling thread is reused.
// Finding a caller's session costs several /proc reads (the thread, its
// process, its cgroup, its ancestors, their start times); a program doing
// thousands of file operations a second asks the same question each time.
// A cached answer is used only for the same thread incarnation: its start
// time is read again (one read of /proc/TID/stat) and must match, because a
// tid is recycled as soon as the kernel has gone through pid_max (32768 on
// many machines: a fork loop gets there in seconds), and a bound process
// given the tid of a thread answered "unbound" a moment ago would
// otherwise write unguarded. Every Bind clears the cache (ForgetCallers),
// so a process bound a moment ago is never answered from an older
// "unbound".
const callerTTL = time.Second

// callerCacheMax bounds the cache; past it the cache starts over.
const callerCacheMax = 8192

// callerInfo is the cached identity of one calling thread.
type callerInfo struct {
	pid     int32  // thread group id (the process)
	start   uint64 // the thread's start time: which incarnation of the tid
	session policy.SessionID
	bound   bool
	until   time.Time
}

// callerCache maps FUSE caller thread ids to their process and session.
type callerCache struct {
	mu    sync.Mutex
	epoch uint64
	m     map[uint32]callerInfo
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

// put stores an answer computed during epoch, unless a Bind came since.
func (c *callerCache) put(tid uint32, ci callerInfo, epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch != c.epoch {
		return
	}
	if c.m == nil || len(c.m) >= callerCacheMax {
		c.m = make(map[uint32]callerInfo)
	}
	c.m[tid] = ci
}

// forget drops every answer.
func (c *callerCache) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	c.m = nil
}

// caller resolves a FUSE caller thread id to its process id and session.
func (m *mountState) caller(tid uint32) callerInfo {
	now := time.Now()
	start, err := procbind.TaskStart(int(tid))
	if err != nil {
		start = 0 // no such thread (any more): never cached, see below
	}
	ci, ok, epoch := m.callers.get(tid, start, now)
	if ok && start != 0 {
		return ci
	}
	ci = callerInfo{pid: processOf(int32(tid)), start: start, until: now.Add(callerTTL)}
	if tid != 0 && m.cfg.Bindings != nil {
		ci.session, ci.bound = m.cfg.Bindings.SessionOf(int(tid))
	}
	if start != 0 {
		m.callers.put(tid, ci, epoch)
	}
	return ci
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
