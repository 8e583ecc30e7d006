package fuse

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider/local"
	"github.com/dshmount/dshmount/internal/watcher"
)

// watchedOn is a Config.Watched that always reports a running watcher.
func watchedOn() bool { return true }

// openFds counts this process's open descriptors.
func openFds(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

// cachedPaths lists the cached directories.
func (c *dirFds) cachedPaths() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for p := range c.byPath {
		out = append(out, p)
	}
	return out
}

// requireExact checks every cached descriptor against its path resolved
// from the root now: the same directory, and its parent's entry cached.
func requireExact(t *testing.T, c *dirFds) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, e := range c.byPath {
		require.Equal(t, p, e.path)
		require.False(t, e.dead, "%s", p)
		held, err := fstat(e.fd)
		require.NoError(t, err, "%s", p)
		var now unix.Stat_t
		require.NoError(t, unix.Fstatat(c.root, p, &now, unix.AT_SYMLINK_NOFOLLOW), "%s is cached but gone", p)
		require.Equal(t, now.Ino, held.st.Ino, "the descriptor cached for %s is another directory's", p)
		if i := strings.LastIndexByte(p, '/'); i >= 0 {
			require.Same(t, c.byPath[p[:i]], e.parent, "%s: its parent is cached", p)
		} else {
			require.Nil(t, e.parent)
		}
	}
}

func newTestDirFds(t *testing.T, max int) (*dirFds, string) {
	t.Helper()
	root := t.TempDir()
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	c := newDirFds(fd, max, watchedOn)
	t.Cleanup(func() {
		c.close()
		_ = unix.Close(fd)
	})
	return c, root
}

func TestDirFds_ADirectoryIsDroppedWithEverythingBelowIt(t *testing.T) {
	c, root := newTestDirFds(t, 100)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "a/b/c"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "a/x"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "a/file"), nil, 0o644))

	fd, ref, err := c.get("a/b/c")
	require.NoError(t, err)
	require.NotNil(t, ref, "cached")
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(fd, &st))
	ref.release()
	_, ref, err = c.get("a/x")
	require.NoError(t, err)
	ref.release()
	assert.ElementsMatch(t, []string{"a", "a/b", "a/b/c", "a/x"}, c.cachedPaths(), "ancestors are cached with their descendants")
	requireExact(t, c)

	c.forget("a/file")
	assert.Len(t, c.cachedPaths(), 4, "a file's path drops nothing")
	c.forget("a/b")
	assert.ElementsMatch(t, []string{"a", "a/x"}, c.cachedPaths())
	c.forget("a")
	assert.Empty(t, c.cachedPaths())

	_, _, err = c.get("a/missing")
	assert.ErrorIs(t, err, unix.ENOENT)
}

func TestDirFds_ADescriptorInUseOutlivesItsDrop(t *testing.T) {
	c, root := newTestDirFds(t, 100)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "a/b"), 0o755))
	fd, ref, err := c.get("a/b")
	require.NoError(t, err)
	c.forget("a")
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(fd, &st), "still open while the request holds it")
	ref.release()
	assert.ErrorIs(t, unix.Fstat(fd, &st), unix.EBADF, "closed at release")
}

// A directory opened by a miss and renamed (and dropped) before the miss
// caches it is used once and not cached under its old name.
func TestDirFds_AnOpenThatRacedADropIsNotCached(t *testing.T) {
	c, root := newTestDirFds(t, 100)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "a/s"), 0o755))
	c.opened = func() {
		c.opened = nil
		require.NoError(t, os.Rename(filepath.Join(root, "a"), filepath.Join(root, "b")))
		c.forget("a") // as the mount's rename does
	}
	fd, ref, err := c.get("a/s")
	require.NoError(t, err)
	assert.Nil(t, ref, "used once")
	require.NoError(t, unix.Close(fd))
	assert.Empty(t, c.cachedPaths())
	requireExact(t, c)
}

func TestDirFds_SymbolicLinksOnTheWayAreRefused(t *testing.T) {
	c, root := newTestDirFds(t, 100)
	outside := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(root, "a"), 0o755))
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "a/link")))
	_, _, err := c.get("a/link")
	assert.ErrorIs(t, err, unix.EACCES)
	_, _, err = c.get("a/link/below")
	assert.ErrorIs(t, err, unix.EACCES)
	assert.Empty(t, c.cachedPaths(), "a failed walk caches nothing")
}

// The cap holds for 20,000 directories looked up through the mount: the
// process's descriptors grow by at most the cap.
func TestMount_DirectoryDescriptorsStayUnderTheirCap(t *testing.T) {
	const dirs, capFds = 20000, 300
	e := newEnv(t, envOptions{watched: watchedOn, dirFDs: capFds})
	for i := range dirs {
		d := e.b(fmt.Sprintf("d%03d/e%03d", i/100, i%100))
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	before := openFds(t)
	for i := range dirs {
		_, err := os.Lstat(e.m(fmt.Sprintf("d%03d/e%03d/missing", i/100, i%100)))
		require.ErrorIs(t, err, os.ErrNotExist)
	}
	after := openFds(t)
	assert.Equal(t, capFds, e.srv.state.dirs.size())
	assert.LessOrEqual(t, after-before, capFds, "descriptors opened: %d", after-before)
	requireExact(t, e.srv.state.dirs)
}

// moveOut moves the backing directory rel out of the workspace (out of
// band) and returns its new path.
func moveOut(t *testing.T, e *env, rel string) string {
	t.Helper()
	outside := filepath.Join(filepath.Dir(e.src), "outside")
	require.NoError(t, os.MkdirAll(outside, 0o755))
	to := filepath.Join(outside, filepath.Base(rel))
	require.NoError(t, os.Rename(e.b(rel), to))
	return to
}

// requireNotReached checks that the backing operations under the old path
// of a directory moved to outside reach nothing there: a stat, a create
// and an unlink, through the daemon's path-addressed calls and through a
// descriptor of the directory held on the mount.
func requireNotReached(t *testing.T, e *env, rel, outside string, held int) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "g"), nil, 0o644))
	m := e.srv.state
	_, err := m.statRel(rel + "/g")
	assert.Error(t, err, "stat under the old path")
	fd, err := m.openRel(rel+"/new", unix.O_CREAT|unix.O_WRONLY, 0o644)
	if err == nil {
		_ = unix.Close(fd)
	}
	assert.Error(t, err, "create under the old path")
	if en, err := m.entryAt(rel + "/g"); err == nil {
		assert.Error(t, unix.Unlinkat(en.dir, en.name, 0), "unlink under the old path")
		en.close()
	}
	if held >= 0 {
		var st unix.Stat_t
		assert.Error(t, unix.Fstatat(held, "g", &st, unix.AT_SYMLINK_NOFOLLOW), "stat through the mount")
		nfd, err := unix.Openat(held, "new2", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err == nil {
			_ = unix.Close(nfd)
		}
		assert.Error(t, err, "create through the mount")
		assert.Error(t, unix.Unlinkat(held, "g", 0), "unlink through the mount")
	}
	assert.NoFileExists(t, filepath.Join(outside, "new"))
	assert.NoFileExists(t, filepath.Join(outside, "new2"))
	assert.FileExists(t, filepath.Join(outside, "g"))
}

// holdDir opens the mount's directory rel (its node stays known to the
// kernel) after caching its descriptor.
func holdDir(t *testing.T, e *env, rel string) int {
	t.Helper()
	e.put(rel+"/f", "x")
	_, err := os.Stat(e.m(rel + "/f"))
	require.NoError(t, err)
	require.Contains(t, e.srv.state.dirs.cachedPaths(), rel)
	fd, err := unix.Open(e.m(rel), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = unix.Close(fd) })
	return fd
}

func TestMount_ADirectoryMovedOutIsNotFollowedOnceReported(t *testing.T) {
	e := newEnv(t, envOptions{watched: watchedOn})
	held := holdDir(t, e, "dir")
	outside := moveOut(t, e, "dir")
	recorded, err := e.engine.RecordExternal(context.Background(), policy.ExternalChange{
		Op: policy.OpDelete, Target: e.lfs.TargetForRel("dir"), Dir: true,
	})
	require.NoError(t, err)
	require.True(t, recorded)
	assert.NotContains(t, e.srv.state.dirs.cachedPaths(), "dir")
	requireNotReached(t, e, "dir", outside, held)
}

func TestMount_ADirectoryReplacedByALinkIsNotFollowedOnceReported(t *testing.T) {
	e := newEnv(t, envOptions{watched: watchedOn})
	holdDir(t, e, "dir")
	outside := moveOut(t, e, "dir")
	require.NoError(t, os.Symlink(outside, e.b("dir")))
	_, err := e.engine.RecordExternal(context.Background(), policy.ExternalChange{
		Op: policy.OpCreate, Target: e.lfs.TargetForRel("dir"),
	})
	require.NoError(t, err)
	requireNotReached(t, e, "dir", outside, -1)
	_, err = e.srv.state.statRel("dir/g")
	assert.ErrorIs(t, err, unix.EACCES, "the link is refused")
}

// With the real watcher: once it reported the move, nothing reaches the
// moved directory.
func TestMount_TheWatcherReportsADirectoryMovedOut(t *testing.T) {
	e := newEnv(t, envOptions{watched: watchedOn})
	held := holdDir(t, e, "dir")
	seen := make(chan struct{})
	var once sync.Once
	w, err := e.lfs.WatchTree(context.Background(), local.TreeWatchOptions{}, func(evs []local.TreeEvent, err error) {
		for _, ev := range evs {
			if ev.Kind == local.TreeOverflow {
				e.srv.ForgetDirs()
				continue
			}
			c := policy.ExternalChange{Op: watcher.Operation(ev.Kind), Target: e.lfs.TargetForRel(ev.Path), Dir: ev.Dir, Since: ev.Since}
			if ev.Kind == local.TreeRenamed {
				to := e.lfs.TargetForRel(ev.To)
				c.To = &to
			}
			_, rerr := e.engine.RecordExternal(context.Background(), c)
			assert.NoError(t, rerr)
			if ev.Path == "dir" {
				once.Do(func() { close(seen) })
			}
		}
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close() })
	outside := moveOut(t, e, "dir")
	select {
	case <-seen:
	case <-time.After(30 * time.Second):
		t.Fatal("the watcher never reported the move")
	}
	requireNotReached(t, e, "dir", outside, held)
}

// Without a watcher nothing is cached: a move out of band that nobody
// reports is never followed, and a watcher that stops empties the cache.
func TestMount_WithoutAWatcherNothingIsFollowed(t *testing.T) {
	t.Run("never watched", func(t *testing.T) {
		e := newEnv(t, envOptions{})
		e.put("dir/f", "x")
		_, err := os.Stat(e.m("dir/f"))
		require.NoError(t, err)
		held, err := unix.Open(e.m("dir"), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		require.NoError(t, err)
		defer unix.Close(held)
		outside := moveOut(t, e, "dir")
		requireNotReached(t, e, "dir", outside, held)
	})
	t.Run("the watcher stopped", func(t *testing.T) {
		var watching atomic.Bool
		watching.Store(true)
		e := newEnv(t, envOptions{watched: watching.Load})
		held := holdDir(t, e, "dir")
		watching.Store(false)
		outside := moveOut(t, e, "dir")
		requireNotReached(t, e, "dir", outside, held)
		assert.Zero(t, e.srv.state.dirs.size())
	})
	t.Run("the watcher lost events", func(t *testing.T) {
		e := newEnv(t, envOptions{watched: watchedOn})
		held := holdDir(t, e, "dir")
		outside := moveOut(t, e, "dir")
		e.srv.ForgetDirs()
		requireNotReached(t, e, "dir", outside, held)
	})
}

// The mount's own renames and removals drop what they moved: a directory
// made out of band under the old name is the one used.
func TestMount_OwnRenameAndRmdirDropTheirDescriptors(t *testing.T) {
	e := newEnv(t, envOptions{watched: watchedOn})
	e.put("a/f", "x")
	_, err := os.Stat(e.m("a/f"))
	require.NoError(t, err)
	require.NoError(t, os.Rename(e.m("a"), e.m("b")))
	require.NoError(t, os.Mkdir(e.b("a"), 0o755)) // out of band, not reported
	require.NoError(t, os.WriteFile(e.m("a/x"), []byte("new"), 0o644))
	assert.FileExists(t, e.b("a/x"))
	assert.NoFileExists(t, e.b("b/x"))

	require.NoError(t, os.Mkdir(e.m("c"), 0o755))
	_, err = os.Stat(e.m("c/missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
	require.Contains(t, e.srv.state.dirs.cachedPaths(), "c")
	require.NoError(t, os.Remove(e.m("c")))
	require.NoError(t, os.Mkdir(e.b("c"), 0o755)) // out of band, not reported
	require.NoError(t, os.WriteFile(e.m("c/x"), []byte("new"), 0o644))
	assert.FileExists(t, e.b("c/x"))
	requireExact(t, e.srv.state.dirs)
}

// Renames through the mount race lookups below the renamed directories;
// afterwards every cached descriptor is its path's directory.
func TestMount_ConcurrentRenamesAndLookupsKeepTheCacheExact(t *testing.T) {
	e := newEnv(t, envOptions{watched: watchedOn, dirFDs: 16})
	const n = 4
	for i := range n {
		e.put(fmt.Sprintf("d%d/s/f", i), fmt.Sprint(i))
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				d := fmt.Sprintf("d%d", (j+w)%n)
				_, _ = os.Lstat(e.m(d + "/s/f"))
				_, _ = os.ReadFile(e.m(d + "/s/f"))
				_, _ = os.Lstat(e.m(d + "/s/missing"))
			}
		}()
	}
	for j := range 300 {
		a, b := fmt.Sprintf("d%d", j%n), fmt.Sprintf("d%d", (j+1)%n)
		require.NoError(t, os.Rename(e.m(a), e.m("tmp")))
		require.NoError(t, os.Rename(e.m(b), e.m(a)))
		require.NoError(t, os.Rename(e.m("tmp"), e.m(b)))
	}
	close(stop)
	wg.Wait()
	requireExact(t, e.srv.state.dirs)
	for i := range n {
		rel := fmt.Sprintf("d%d/s/f", i)
		want, err := os.ReadFile(e.b(rel))
		require.NoError(t, err)
		bs, err := e.srv.state.statRel(rel)
		require.NoError(t, err)
		var st unix.Stat_t
		require.NoError(t, unix.Lstat(e.b(rel), &st))
		assert.Equal(t, st.Ino, bs.st.Ino, "%s through the cache is the backing file (%q)", rel, want)
	}
}

// Socket changes reach the invalidator as feed events: a move drops the
// cached descriptors at and below both of its paths; the mount's own
// events drop nothing there (the mount drops as it renames).
func TestMount_SocketEventsDropDescriptorsBelowTheirPaths(t *testing.T) {
	e := newEnv(t, envOptions{watched: watchedOn})
	for _, rel := range []string{"a/s/f", "b/s/f", "c/s/f"} {
		e.put(rel, "x")
		_, err := os.Stat(e.m(rel))
		require.NoError(t, err)
	}
	dirs := e.srv.state.dirs
	require.Subset(t, dirs.cachedPaths(), []string{"a", "a/s", "b", "b/s", "c", "c/s"})
	to := e.lfs.TargetForRel("b")
	require.NoError(t, e.srv.inval.observe(context.Background(), policy.Event{
		Actor: policy.Actor{Channel: policy.ChannelMount}, Op: policy.OpRename, Target: e.lfs.TargetForRel("c"),
	}))
	assert.Contains(t, dirs.cachedPaths(), "c/s", "the mount's own event")
	require.NoError(t, e.srv.inval.observe(context.Background(), policy.Event{
		Actor: policy.Actor{Channel: policy.ChannelSocket}, Op: policy.OpMove, Target: e.lfs.TargetForRel("a"), To: &to,
	}))
	assert.ElementsMatch(t, []string{"c", "c/s"}, dirs.cachedPaths())
}

// A branch mount configured like the workspace's (serve copies its Config)
// keeps no directory descriptors: its invalidations follow the branch, not
// the workspace's own renames.
func TestMount_ABranchMountKeepsNoDirectoryDescriptors(t *testing.T) {
	be := newBranchEnv(t, envOptions{watched: watchedOn})
	assert.NotNil(t, be.srv.state.dirs, "the workspace mount keeps them")
	assert.Nil(t, be.bsrv.state.dirs)
}
