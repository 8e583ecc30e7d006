package fuse

import (
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/policy"
)

// countingBindings answers one session for every pid and counts the
// questions.
type countingBindings struct {
	mu    sync.Mutex
	asked int
}

func (b *countingBindings) SessionOf(int) (policy.SessionID, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asked++
	return "s1", true
}

func (b *countingBindings) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.asked
}

// TestCaller_ReusedTidIsNotAnsweredFromTheCache pins that a cached answer
// belongs to one incarnation of a thread id: when the tid now names a
// thread that started at another time (the kernel recycled it), the
// bindings are asked again instead of answering from the older thread's
// entry (a bound process given the tid of an unbound one would otherwise
// write unguarded).
func TestCaller_ReusedTidIsNotAnsweredFromTheCache(t *testing.T) {
	b := &countingBindings{}
	m := &mountState{cfg: Config{Bindings: b}}
	tid := uint32(os.Getpid())

	ci := m.caller(tid)
	require.True(t, ci.bound)
	require.Equal(t, 1, b.count())
	m.caller(tid)
	assert.Equal(t, 1, b.count(), "the same thread is answered from the cache")

	// Make the cached entry an older incarnation of the tid, answered
	// "unbound".
	m.callers.mu.Lock()
	old := m.callers.m[tid]
	old.start--
	old.bound, old.session = false, ""
	old.closePidfd()
	old.pidfd, old.hasPidfd = deadPidfd(t), true // the older incarnation ended
	m.callers.m[tid] = old
	m.callers.mu.Unlock()

	ci = m.caller(tid)
	assert.Equal(t, 2, b.count(), "a recycled tid is looked up again")
	assert.True(t, ci.bound, "the new thread's own binding counts, not the old thread's answer")
}

// BenchmarkCaller_CachedAnswer is the cost of identifying a caller seen
// before (one pidfd_send_signal to check the incarnation; a read of
// /proc/TID/stat beyond the pidfd budget).
func BenchmarkCaller_CachedAnswer(b *testing.B) {
	m := &mountState{cfg: Config{Bindings: &countingBindings{}}}
	tid := uint32(os.Getpid())
	m.caller(tid)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.caller(tid)
	}
}

// BenchmarkMount_OpenClose opens and closes a small file through the mount:
// every open identifies its caller.
func BenchmarkMount_OpenClose(b *testing.B) {
	e := newEnv(b, envOptions{passthrough: true})
	e.put("small.txt", "x\n")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f, err := os.Open(e.m("small.txt"))
		if err != nil {
			b.Fatal(err)
		}
		_ = f.Close()
	}
}

// deadPidfd is a pidfd of a process that has exited and been reaped.
func deadPidfd(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "10")
	require.NoError(t, cmd.Start())
	fd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	require.NoError(t, err)
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	return fd
}

func TestCaller_ALiveThreadIsAnsweredThroughItsPidfd(t *testing.T) {
	b := &countingBindings{}
	m := &mountState{cfg: Config{Bindings: b}}
	t.Cleanup(m.callers.forget)
	tid := uint32(unix.Gettid())
	m.caller(tid)
	ci, ok := m.callers.live(tid, time.Now())
	require.True(t, ok, "the running thread's pidfd vouches for the cached answer")
	assert.True(t, ci.bound)
	assert.False(t, ci.hasPidfd, "the copy handed out does not own the descriptor")
	m.caller(tid)
	assert.Equal(t, 1, b.count())
}

func TestCaller_PidfdsAreBoundedAndClosed(t *testing.T) {
	var c callerCache
	for i := range callerPidfdsMax + 10 {
		fd, err := unix.PidfdOpen(os.Getpid(), 0)
		require.NoError(t, err)
		c.put(uint32(1_000_000+i), callerInfo{start: 1, until: time.Now().Add(time.Hour), pidfd: fd, hasPidfd: true}, 0)
	}
	c.mu.Lock()
	held := 0
	for _, ci := range c.m {
		if ci.hasPidfd {
			held++
		}
	}
	assert.Equal(t, callerPidfdsMax, c.pidfds)
	c.mu.Unlock()
	assert.Equal(t, callerPidfdsMax, held, "answers beyond the budget keep no descriptor")
	c.forget()
	assert.Zero(t, c.pidfds, "forget closes every pidfd")
}
