package procbind

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy"
)

// fakeCgroups is a cgroup hierarchy in memory: each pid's cgroup and the
// cgroups that exist.
type fakeCgroups struct {
	mu       sync.Mutex
	of       map[int]string
	exists   map[string]bool
	enterErr error
	removed  []string
}

func newFakeCgroups() *fakeCgroups {
	return &fakeCgroups{of: map[int]string{}, exists: map[string]bool{"/": true}}
}

func (c *fakeCgroups) Of(pid int) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cg, ok := c.of[pid]
	if !ok {
		return "", fmt.Errorf("pid %d: %w", pid, errNoProcess)
	}
	return cg, nil
}

func (c *fakeCgroups) Enter(pid int, name string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.enterErr != nil {
		return "", c.enterErr
	}
	cg := path.Join("/", cgroupDirName, name)
	c.exists[cg] = true
	c.of[pid] = cg
	return cg, nil
}

func (c *fakeCgroups) Populated(cg string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.of {
		if p == cg || strings.HasPrefix(p, cg+"/") {
			return true, nil
		}
	}
	return false, nil
}

func (c *fakeCgroups) Remove(cg string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.exists, cg)
	c.removed = append(c.removed, cg)
	return nil
}

// put places pid in cgroup cg (a fork inherits its parent's cgroup).
func (c *fakeCgroups) put(pid int, cg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.of[pid] = cg
}

func (c *fakeCgroups) drop(pid int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.of, pid)
}

// fakeStore keeps bindings in memory, as the policy store would on disk.
type fakeStore struct {
	mu   sync.Mutex
	recs map[policy.BindingRecord]bool
	err  error
}

func newFakeStore() *fakeStore { return &fakeStore{recs: map[policy.BindingRecord]bool{}} }

func (s *fakeStore) PutBinding(rec policy.BindingRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.recs[rec] = true
	return nil
}

func (s *fakeStore) DeleteBinding(rec policy.BindingRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.recs, rec)
	return nil
}

func (s *fakeStore) Bindings() ([]policy.BindingRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []policy.BindingRecord
	for rec := range s.recs {
		out = append(out, rec)
	}
	return out, nil
}

func (s *fakeStore) snapshot() map[policy.BindingRecord]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[policy.BindingRecord]bool{}
	for rec := range s.recs {
		out[rec] = true
	}
	return out
}

// cgroupRegistry is a registry over the fake process table, fake cgroups
// and a fake store.
func cgroupRegistry(t *testing.T, proc *fakeProc, cg *fakeCgroups, store *fakeStore) *Registry {
	t.Helper()
	r := newRegistry(fakeSessions{"s1": true, "s2": true}, proc, 16)
	r.cgroups, r.enter, r.store = cg, true, store
	require.NoError(t, r.load())
	r.Sweep()
	return r
}

// treeInCgroups is newFakeTree with every process in the root cgroup.
func treeInCgroups() (*fakeProc, *fakeCgroups) {
	proc, cg := newFakeTree(), newFakeCgroups()
	for _, pid := range []int{1, 100, 101, 102, 200} {
		cg.put(pid, "/user")
	}
	return proc, cg
}

// TestSessionOf_OrphanInBindingCgroupStaysBound pins the case the parent
// chain cannot see: a process whose bound ancestors exited is reparented to
// init, yet it is still in the binding cgroup, so it still acts for the
// session; the same for one that called setsid (its cgroup does not change).
func TestSessionOf_OrphanInBindingCgroupStaysBound(t *testing.T) {
	proc, cg := treeInCgroups()
	r := cgroupRegistry(t, proc, cg, newFakeStore())
	require.NoError(t, r.Bind("s1", 100))
	bound, err := cg.Of(100)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(bound, "/dshmount/s1-"), "the bound process was moved to %s", bound)

	// 100 forks 103 (born in its cgroup), which double-forks 104; then 100
	// and 103 exit and 104 is reparented to init.
	proc.set(103, 100, 1003)
	cg.put(103, bound)
	proc.set(104, 103, 1004)
	cg.put(104, bound)
	proc.remove(100)
	proc.remove(103)
	cg.drop(100)
	cg.drop(103)
	proc.set(104, 1, 1004)

	s, ok := r.SessionOf(104)
	assert.True(t, ok, "the orphan is still bound")
	assert.Equal(t, policy.SessionID("s1"), s)
	_, ok = r.SessionOf(200)
	assert.False(t, ok, "a process outside the cgroup is not bound")
	assert.Equal(t, 1, r.Bindings(), "the cgroup binding lives while a member does")

	// Without the cgroup the orphan would have lost the binding: the parent
	// chain alone does not find it.
	chainOnly := newRegistry(nil, proc, 16)
	chainOnly.bound[100] = binding{session: "s1", start: 1000}
	_, ok = chainOnly.SessionOf(104)
	assert.False(t, ok, "the parent chain of an orphan does not lead to the bound process")
}

// TestSessionOf_PidReuseDoesNotInheritACgroupBinding pins that a pid once
// used by a bound process, now used by an unrelated process (in its own
// cgroup), is not bound.
func TestSessionOf_PidReuseDoesNotInheritACgroupBinding(t *testing.T) {
	proc, cg := treeInCgroups()
	r := cgroupRegistry(t, proc, cg, newFakeStore())
	require.NoError(t, r.Bind("s1", 101))
	_, ok := r.SessionOf(102)
	require.True(t, ok)

	// 102 exits; pid 102 is reused by a child of the unrelated 200.
	proc.set(102, 200, 7000)
	cg.put(102, "/user")
	_, ok = r.SessionOf(102)
	assert.False(t, ok, "the new process with the old pid is not bound")
}

// TestSessionOf_NearestCgroupWins pins nested execs: a process bound inside
// an already bound tree moves to a cgroup of the inner session, with the
// processes it starts; the rest of the tree stays with the outer one. A
// cgroup below a binding cgroup (made by a root process inside it) still
// counts as the binding's.
func TestSessionOf_NearestCgroupWins(t *testing.T) {
	proc, cg := treeInCgroups()
	r := cgroupRegistry(t, proc, cg, newFakeStore())
	require.NoError(t, r.Bind("s1", 100))
	outer, _ := cg.Of(100)
	cg.put(101, outer)
	cg.put(102, outer)
	require.NoError(t, r.Bind("s2", 101))
	inner, _ := cg.Of(101)
	require.True(t, strings.HasPrefix(inner, "/dshmount/s2-"), "inner cgroup %s", inner)
	cg.put(102, inner)
	proc.set(103, 100, 1003)
	cg.put(103, outer+"/sub/deeper")

	for pid, want := range map[int]policy.SessionID{100: "s1", 101: "s2", 102: "s2", 103: "s1"} {
		s, ok := r.SessionOf(pid)
		assert.True(t, ok, "pid %d", pid)
		assert.Equal(t, want, s, "pid %d", pid)
	}
}

// TestBind_FallsBackToTheParentChainWhenNoCgroupCanBeMade pins that a
// failure to create the cgroup still binds (by the parent chain).
func TestBind_FallsBackToTheParentChainWhenNoCgroupCanBeMade(t *testing.T) {
	proc, cg := treeInCgroups()
	cg.enterErr = syscall.EACCES
	store := newFakeStore()
	r := cgroupRegistry(t, proc, cg, store)
	require.NoError(t, r.Bind("s1", 100))
	s, ok := r.SessionOf(102)
	assert.True(t, ok)
	assert.Equal(t, policy.SessionID("s1"), s)
	assert.Equal(t, map[policy.BindingRecord]bool{{Session: "s1", PID: 100, Start: 1000}: true}, store.snapshot())
}

// TestBind_PersistsAndANewRegistryRestoresIt pins the daemon restart: the
// bindings are in the store when Bind returns, and a registry loaded from
// that store maps the same processes (an orphan in the cgroup, a child by
// the parent chain) to the session without any new Bind.
func TestBind_PersistsAndANewRegistryRestoresIt(t *testing.T) {
	proc, cg := treeInCgroups()
	store := newFakeStore()
	r := cgroupRegistry(t, proc, cg, store)
	require.NoError(t, r.Bind("s1", 100))
	bound, _ := cg.Of(100)
	assert.Equal(t, map[policy.BindingRecord]bool{
		{Session: "s1", PID: 100, Start: 1000}: true,
		{Session: "s1", Cgroup: bound}:         true,
	}, store.snapshot(), "both bindings are persisted")

	proc.set(105, 1, 1005) // an orphan forked from 100 before the restart
	cg.put(105, bound)

	restarted := cgroupRegistry(t, proc, cg, store)
	for _, pid := range []int{100, 101, 102, 105} {
		s, ok := restarted.SessionOf(pid)
		assert.True(t, ok, "pid %d after a restart", pid)
		assert.Equal(t, policy.SessionID("s1"), s, "pid %d", pid)
	}
	_, ok := restarted.SessionOf(200)
	assert.False(t, ok)
}

// TestBind_StoreFailureIsAnError pins that a binding that could not be
// persisted is reported: exec then does not run its command.
func TestBind_StoreFailureIsAnError(t *testing.T) {
	proc, cg := treeInCgroups()
	store := newFakeStore()
	store.err = errors.New("disk full")
	r := cgroupRegistry(t, proc, cg, store)
	require.ErrorContains(t, r.Bind("s1", 100), "disk full")
}

// TestSweep_DropsDeadBindingsAndRemovesEmptyCgroups pins the cleanup: a
// binding goes (from memory and from the store, its cgroup removed) only
// when no process is left in it; a restored binding of a reused pid goes
// at load.
func TestSweep_DropsDeadBindingsAndRemovesEmptyCgroups(t *testing.T) {
	proc, cg := treeInCgroups()
	store := newFakeStore()
	// Left by an earlier daemon: pid 200 bound at another start time (the
	// pid was reused since).
	require.NoError(t, store.PutBinding(policy.BindingRecord{Session: "s2", PID: 200, Start: 1}))
	r := cgroupRegistry(t, proc, cg, store)
	assert.Empty(t, store.snapshot(), "a binding of a reused pid is dropped at load")

	require.NoError(t, r.Bind("s1", 100))
	bound, _ := cg.Of(100)
	proc.set(103, 1, 1003) // orphan in the cgroup
	cg.put(103, bound)
	proc.remove(100)
	cg.drop(100)
	r.Sweep()
	assert.Equal(t, map[policy.BindingRecord]bool{{Session: "s1", Cgroup: bound}: true}, store.snapshot(),
		"the root process is gone, the cgroup still has a member")
	s, ok := r.SessionOf(103)
	assert.True(t, ok)
	assert.Equal(t, policy.SessionID("s1"), s)

	proc.remove(103)
	cg.drop(103)
	r.Sweep()
	assert.Empty(t, store.snapshot())
	assert.Equal(t, 0, r.Bindings())
	assert.Equal(t, []string{bound}, cg.removed, "the empty cgroup is removed")
}

func TestCgroupLine(t *testing.T) {
	cg, ok := cgroupLine([]byte("12:memory:/x\n0::/user.slice/a b\n"))
	assert.True(t, ok)
	assert.Equal(t, "/user.slice/a b", cg)
	_, ok = cgroupLine([]byte("4:memory:/x\n"))
	assert.False(t, ok, "cgroup v1 only")
}

func TestFindCgroup2(t *testing.T) {
	info := "24 1 0:21 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro\n" +
		"35 24 0:30 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n" +
		"40 24 0:35 /ns /sys/fs/cgroup/uni\\040fied rw shared:9 - cgroup2 cgroup2 rw\n"
	mount, root, ok := findCgroup2([]byte(info))
	require.True(t, ok)
	assert.Equal(t, "/sys/fs/cgroup/uni fied", mount)
	assert.Equal(t, "/ns", root)
	_, _, ok = findCgroup2([]byte("35 24 0:30 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"))
	assert.False(t, ok)

	c := &cgroupFS{mount: "/m", root: "/ns"}
	dir, err := c.dir("/ns/a/b")
	require.NoError(t, err)
	assert.Equal(t, "/m/a/b", dir)
	_, err = c.dir("/other")
	assert.Error(t, err)
	_, err = c.dir("/nsx")
	assert.Error(t, err)
}

// TestCgroupFS_RealOrphanStaysBound runs the real thing where cgroup v2 is
// writable: a shell bound by the registry starts a double-forked, setsid
// grandchild and exits; the grandchild, reparented away from the bound
// tree, is still bound; once it exits the binding and its cgroup go.
func TestCgroupFS_RealOrphanStaysBound(t *testing.T) {
	cgs, err := detectCgroups("/proc")
	if err != nil {
		t.Skipf("binding cgroups unavailable here: %v", err)
	}
	r, err := New(nil, Options{})
	require.NoError(t, err)
	require.True(t, r.enter)

	// The shell waits on stdin so it can be bound before it forks.
	sh := exec.Command("sh", "-c", `read -r _; setsid sh -c 'sleep 30 & echo $!' ; exit 0`)
	stdin, err := sh.StdinPipe()
	require.NoError(t, err)
	stdout, err := sh.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, sh.Start())
	require.NoError(t, r.Bind("agent", sh.Process.Pid))
	cg, err := cgs.Of(sh.Process.Pid)
	require.NoError(t, err)
	assert.Contains(t, cg, "/dshmount/agent-")

	_, err = stdin.Write([]byte("go\n"))
	require.NoError(t, err)
	buf := make([]byte, 32)
	n, err := stdout.Read(buf)
	require.NoError(t, err)
	orphan, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Kill(orphan, syscall.SIGKILL) })
	require.NoError(t, sh.Wait())

	info, err := procFS{root: "/proc"}.Info(orphan)
	require.NoError(t, err)
	assert.NotEqual(t, sh.Process.Pid, info.PPID, "the orphan was reparented")
	s, ok := r.SessionOf(orphan)
	assert.True(t, ok, "the reparented, setsid orphan is still bound")
	assert.Equal(t, policy.SessionID("agent"), s)
	_, ok = r.SessionOf(os.Getpid())
	assert.False(t, ok, "the test itself is not bound")

	dir, err := cgs.dir(cg)
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(orphan, syscall.SIGKILL))
	require.Eventually(t, func() bool { return r.Bindings() == 0 }, 10*time.Second, 20*time.Millisecond)
	_, err = os.Stat(dir)
	assert.True(t, os.IsNotExist(err), "the empty binding cgroup is removed: %v", err)
}

// TestList_ShowsABindingWhoseProcessTreeIsGone is item 9 of issue 28: once
// the bound exec process is gone, the cgroup binding that still holds a
// member is listed with TreeGone (its members are bound only while they
// stay in it), as is the process binding until a sweep drops it.
func TestList_ShowsABindingWhoseProcessTreeIsGone(t *testing.T) {
	proc, cg := treeInCgroups()
	r := cgroupRegistry(t, proc, cg, newFakeStore())
	require.NoError(t, r.Bind("s1", 100))
	bound, err := cg.Of(100)
	require.NoError(t, err)
	proc.set(104, 100, 1004)
	cg.put(104, bound)
	assert.Equal(t, []State{{Session: "s1", PID: 100}, {Session: "s1", Cgroup: bound}}, r.List())

	proc.remove(100) // the exec parent is killed; 104 stays in the cgroup
	cg.drop(100)
	proc.set(104, 1, 1004)
	assert.Equal(t, []State{{Session: "s1", PID: 100, TreeGone: true}, {Session: "s1", Cgroup: bound, TreeGone: true}}, r.List())
	r.Sweep()
	assert.Equal(t, []State{{Session: "s1", Cgroup: bound, TreeGone: true}}, r.List(), "the cgroup binding stays, marked")
}

// TestBinding_StrictIsAPropertyOfTheBinding pins exec --strict: a strict
// binding answers strict for the bound process, its descendants and an
// orphan left in its cgroup, also after a restart; a nearer binding that
// is not strict answers not strict, and so does a plain Bind.
func TestBinding_StrictIsAPropertyOfTheBinding(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cgroups bool
	}{{"parent chain", false}, {"binding cgroup", true}} {
		t.Run(tc.name, func(t *testing.T) {
			proc, cg := treeInCgroups()
			store := newFakeStore()
			var r *Registry
			if tc.cgroups {
				r = cgroupRegistry(t, proc, cg, store)
			} else {
				r = newRegistry(nil, proc, 16)
				r.store = store
			}
			require.NoError(t, r.BindWith("s1", 100, true))
			require.NoError(t, r.Bind("s2", 200))
			for _, pid := range []int{100, 101, 102} {
				s, strict, ok := r.Binding(pid)
				require.True(t, ok, "pid %d", pid)
				assert.Equal(t, policy.SessionID("s1"), s, "pid %d", pid)
				assert.True(t, strict, "pid %d descends from a strict binding", pid)
			}
			_, strict, ok := r.Binding(200)
			assert.True(t, ok)
			assert.False(t, strict, "a plain Bind is not strict")

			require.NoError(t, r.Bind("s1", 101)) // a nearer binding, not strict
			_, strict, _ = r.Binding(102)
			assert.False(t, strict, "the nearest binding decides")

			restarted := newRegistry(nil, proc, 16)
			if tc.cgroups {
				restarted = cgroupRegistry(t, proc, cg, store)
			} else {
				restarted.store = store
				require.NoError(t, restarted.load())
			}
			_, strict, ok = restarted.Binding(100)
			assert.True(t, ok && strict, "a strict binding stays strict after a restart")
		})
	}
}
