package procbind

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy"
)

// fakeProc is a mutable process table.
type fakeProc struct {
	mu    sync.Mutex
	procs map[int]procInfo
	reads int
}

func (f *fakeProc) Info(pid int) (procInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	p, ok := f.procs[pid]
	if !ok {
		return procInfo{}, fmt.Errorf("pid %d: %w", pid, errNoProcess)
	}
	if p.TGID == 0 {
		p.TGID = pid
	}
	return p, nil
}

func (f *fakeProc) set(pid, ppid int, start uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.procs[pid] = procInfo{PPID: ppid, Start: start}
}

func (f *fakeProc) remove(pid int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.procs, pid)
}

// fakeSessions accepts the listed sessions.
type fakeSessions map[policy.SessionID]bool

func (s fakeSessions) Session(id policy.SessionID) (policy.Session, bool) {
	if s[id] {
		return policy.Session{ID: id}, true
	}
	return policy.Session{}, false
}

func newFakeTree() *fakeProc {
	f := &fakeProc{procs: map[int]procInfo{}}
	f.set(1, 0, 1)
	f.set(100, 1, 1000) // bound command
	f.set(101, 100, 1001)
	f.set(102, 101, 1002) // grandchild
	f.set(200, 1, 2000)   // unrelated
	return f
}

func TestSessionOf_DescendantsActForBoundProcess(t *testing.T) {
	proc := newFakeTree()
	r := newRegistry(fakeSessions{"s1": true}, proc, 16)
	require.NoError(t, r.Bind("s1", 100))

	for _, pid := range []int{100, 101, 102} {
		s, ok := r.SessionOf(pid)
		assert.True(t, ok, "pid %d", pid)
		assert.Equal(t, policy.SessionID("s1"), s, "pid %d", pid)
	}
	for _, pid := range []int{1, 200, 999} {
		_, ok := r.SessionOf(pid)
		assert.False(t, ok, "pid %d", pid)
	}
}

func TestSessionOf_ReusedPidDoesNotCount(t *testing.T) {
	proc := newFakeTree()
	r := newRegistry(nil, proc, 16)
	require.NoError(t, r.Bind("s1", 100))
	s, ok := r.SessionOf(101)
	require.True(t, ok)
	require.Equal(t, policy.SessionID("s1"), s)

	// The bound process exits and its pid is recycled by an unrelated
	// process, which starts a child of its own.
	proc.remove(100)
	proc.remove(101)
	proc.remove(102)
	proc.set(100, 1, 5000)
	proc.set(300, 100, 5001)

	_, ok = r.SessionOf(100)
	assert.False(t, ok, "a new process with the bound pid is not bound")
	_, ok = r.SessionOf(300)
	assert.False(t, ok, "its children are not bound either")
}

func TestSessionOf_ReusedPidOfAChildDoesNotInheritCachedAnswer(t *testing.T) {
	proc := newFakeTree()
	r := newRegistry(nil, proc, 16)
	require.NoError(t, r.Bind("s1", 100))
	_, ok := r.SessionOf(102)
	require.True(t, ok)

	// 102 exits and an unrelated process gets pid 102.
	proc.set(102, 200, 7000)
	_, ok = r.SessionOf(102)
	assert.False(t, ok, "the cached answer belongs to the old incarnation")
}

func TestSessionOf_NearestBindingWins(t *testing.T) {
	proc := newFakeTree()
	r := newRegistry(nil, proc, 16)
	require.NoError(t, r.Bind("outer", 100))
	s, _ := r.SessionOf(102)
	require.Equal(t, policy.SessionID("outer"), s)

	require.NoError(t, r.Bind("inner", 101))
	s, ok := r.SessionOf(102)
	assert.True(t, ok)
	assert.Equal(t, policy.SessionID("inner"), s, "a later Bind must not be hidden by the cache")
	s, _ = r.SessionOf(100)
	assert.Equal(t, policy.SessionID("outer"), s)
}

func TestSessionOf_ThreadMapsToItsProcess(t *testing.T) {
	proc := newFakeTree()
	// Thread 150 of process 100: its stat has the process's parent.
	proc.mu.Lock()
	proc.procs[150] = procInfo{PPID: 1, TGID: 100, Start: 1500}
	proc.mu.Unlock()
	r := newRegistry(nil, proc, 16)
	require.NoError(t, r.Bind("s1", 100))
	s, ok := r.SessionOf(150)
	assert.True(t, ok)
	assert.Equal(t, policy.SessionID("s1"), s)
}

// TestSessionOf_BindingOutlivesItsSession pins that closing a session does
// not unbind its processes: they keep acting for the closed session, which
// the guard refuses, instead of becoming unbound (unguarded).
func TestSessionOf_BindingOutlivesItsSession(t *testing.T) {
	proc := newFakeTree()
	sessions := fakeSessions{"s1": true}
	r := newRegistry(sessions, proc, 16)
	require.NoError(t, r.Bind("s1", 100))
	_, ok := r.SessionOf(101)
	require.True(t, ok)
	delete(sessions, "s1")
	s, ok := r.SessionOf(101)
	assert.True(t, ok, "a closed session's process is still bound")
	assert.Equal(t, policy.SessionID("s1"), s)
	assert.Equal(t, 1, r.Bindings(), "the binding lives while its process does")
}

func TestBind_Refusals(t *testing.T) {
	proc := newFakeTree()
	r := newRegistry(fakeSessions{"s1": true}, proc, 16)
	err := r.Bind("nope", 100)
	require.Error(t, err)
	assert.ErrorIs(t, err, policy.ErrUnknownSession)
	err = r.Bind("s1", 4242)
	require.Error(t, err)
	assert.ErrorIs(t, err, errNoProcess)
	require.Error(t, r.Bind("", 100))
	assert.ErrorIs(t, r.Bind("s1", 1), errUnbindable, "init is never bound")
	r.self = 200
	assert.ErrorIs(t, r.Bind("s1", 200), errUnbindable, "nor is the daemon")
	assert.Zero(t, r.Bindings())
}

func TestBind_PrunesExitedProcesses(t *testing.T) {
	proc := newFakeTree()
	r := newRegistry(nil, proc, 16)
	require.NoError(t, r.Bind("a", 100))
	require.NoError(t, r.Bind("b", 200))
	assert.Equal(t, 2, r.Bindings())
	proc.remove(100)
	assert.Equal(t, 1, r.Bindings())
}

func TestSessionOf_CacheIsBoundedAndAvoidsWalks(t *testing.T) {
	proc := newFakeTree()
	for i := 0; i < 50; i++ {
		proc.set(1000+i, 102, uint64(9000+i))
	}
	r := newRegistry(nil, proc, 8)
	require.NoError(t, r.Bind("s1", 100))
	for i := 0; i < 50; i++ {
		s, ok := r.SessionOf(1000 + i)
		require.True(t, ok)
		require.Equal(t, policy.SessionID("s1"), s)
	}
	r.mu.Lock()
	assert.LessOrEqual(t, len(r.cache), 8)
	r.mu.Unlock()

	proc.mu.Lock()
	proc.reads = 0
	proc.mu.Unlock()
	_, ok := r.SessionOf(1049)
	require.True(t, ok)
	proc.mu.Lock()
	reads := proc.reads
	proc.mu.Unlock()
	assert.Equal(t, 1, reads, "a cached answer costs one /proc read (to check the start time)")
}

func TestSessionOf_ConcurrentCallersAndBinds(t *testing.T) {
	proc := newFakeTree()
	r := newRegistry(nil, proc, 4)
	require.NoError(t, r.Bind("s1", 100))
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				if g == 0 && i%50 == 0 {
					assert.NoError(t, r.Bind("s1", 100))
				}
				s, ok := r.SessionOf(102)
				assert.True(t, ok)
				assert.Equal(t, policy.SessionID("s1"), s)
				_, ok = r.SessionOf(200)
				assert.False(t, ok)
			}
		}(g)
	}
	wg.Wait()
}

func TestProcFS_RealChildAndGrandchild(t *testing.T) {
	r, err := New(nil, Options{NoCgroups: true})
	require.NoError(t, err)

	child := exec.Command("sh", "-c", "sleep 30 & echo $!; wait")
	out, err := child.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	t.Cleanup(func() {
		_ = child.Process.Kill()
		_ = child.Wait()
	})
	buf := make([]byte, 32)
	n, err := out.Read(buf)
	require.NoError(t, err)
	grandchild, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	require.NoError(t, err)
	t.Cleanup(func() {
		if p, err := os.FindProcess(grandchild); err == nil {
			_ = p.Kill()
		}
	})

	other := exec.Command("sleep", "30")
	require.NoError(t, other.Start())
	t.Cleanup(func() {
		_ = other.Process.Kill()
		_ = other.Wait()
	})

	_, ok := r.SessionOf(grandchild)
	require.False(t, ok, "nothing is bound yet")

	require.NoError(t, r.Bind("agent", child.Process.Pid))
	for _, pid := range []int{child.Process.Pid, grandchild} {
		s, ok := r.SessionOf(pid)
		assert.True(t, ok, "pid %d", pid)
		assert.Equal(t, policy.SessionID("agent"), s)
	}
	_, ok = r.SessionOf(other.Process.Pid)
	assert.False(t, ok, "a sibling process is not bound")
	_, ok = r.SessionOf(os.Getpid())
	assert.False(t, ok, "the parent of a bound process is not bound")

	// Once the bound process has exited and been reaped, its binding is
	// gone: a new process cannot inherit it even if it gets the same pid.
	require.NoError(t, child.Process.Kill())
	_ = child.Wait()
	require.Eventually(t, func() bool { return r.Bindings() == 0 }, 5*time.Second, 10*time.Millisecond)
}

func TestProcFS_ThreadOfThisProcess(t *testing.T) {
	info, err := procFS{root: "/proc"}.Info(os.Getpid())
	require.NoError(t, err)
	assert.Equal(t, os.Getppid(), info.PPID)
	assert.Equal(t, os.Getpid(), info.TGID)
	assert.NotZero(t, info.Start)

	// Every thread of this process maps to it.
	entries, err := os.ReadDir("/proc/self/task")
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		require.NoError(t, err)
		ti, err := procFS{root: "/proc"}.Info(tid)
		if err != nil {
			continue // the thread exited meanwhile
		}
		assert.Equal(t, os.Getpid(), ti.TGID)
	}
}

func TestParseStat_CommandWithParenthesesAndSpaces(t *testing.T) {
	line := "4242 (my (weird) cmd) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100\n"
	info, err := parseStat([]byte(line))
	require.NoError(t, err)
	assert.Equal(t, 17, info.PPID)
	assert.Equal(t, uint64(987654), info.Start)

	_, err = parseStat([]byte("4242 (x) S 1 2"))
	require.Error(t, err)
	_, err = parseStat([]byte("garbage"))
	require.Error(t, err)
}
