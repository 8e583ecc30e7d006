package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// treeLog collects a tree watcher's events for a test.
type treeLog struct {
	ch chan []TreeEvent
}

// startTree starts a tree watcher over fs with opts.
func startTree(t *testing.T, fs *FS, opts TreeWatchOptions) *treeLog {
	t.Helper()
	l := &treeLog{ch: make(chan []TreeEvent, 1024)}
	w, err := fs.WatchTree(context.Background(), opts, func(evs []TreeEvent, err error) {
		if err != nil {
			evs = []TreeEvent{{Kind: "error: " + TreeKind(err.Error())}}
		}
		l.ch <- evs
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, w.Close()) })
	return l
}

// until collects events until want (in "KIND PATH[ -> TO]" form) have all
// been seen, and returns everything collected. The bound only keeps a
// broken watcher from hanging the test.
func (l *treeLog) until(t *testing.T, want ...string) []string {
	t.Helper()
	var got []string
	deadline := time.After(10 * time.Second)
	for !containsAll(got, want) {
		select {
		case evs := <-l.ch:
			for _, ev := range evs {
				got = append(got, render(ev))
			}
		case <-deadline:
			t.Fatalf("events %q not all seen; got %q", want, got)
		}
	}
	return got
}

// render is the compact form of one event.
func render(ev TreeEvent) string {
	s := string(ev.Kind) + " " + ev.Path
	if ev.To != "" {
		s += " -> " + ev.To
	}
	return strings.TrimSpace(s)
}

func containsAll(got, want []string) bool {
	for _, w := range want {
		found := false
		for _, g := range got {
			if g == w {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// count is how often s occurs in got.
func count(got []string, s string) int {
	n := 0
	for _, g := range got {
		if g == s {
			n++
		}
	}
	return n
}

func TestWatchTree_KindsNameTheFileItself(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "a/b/old.txt", "x")
	put(t, root, "a/b/mode.txt", "x")
	put(t, root, "a/gone.txt", "x")
	l := startTree(t, fs, TreeWatchOptions{})

	put(t, root, "a/b/new.txt", "new")
	l.until(t, "created a/b/new.txt")
	require.NoError(t, os.WriteFile(filepath.Join(root, "a/b/old.txt"), []byte("changed"), 0o644))
	l.until(t, "modified a/b/old.txt")
	require.NoError(t, os.Chmod(filepath.Join(root, "a/b/mode.txt"), 0o755))
	got := l.until(t, "attrib a/b/mode.txt")
	assert.NotContains(t, got, "modified a/b/mode.txt", "a chmod changes no bytes")
	require.NoError(t, os.Remove(filepath.Join(root, "a/gone.txt")))
	l.until(t, "deleted a/gone.txt")
	require.NoError(t, os.Rename(filepath.Join(root, "a/b/old.txt"), filepath.Join(root, "a/moved.txt")))
	got = l.until(t, "renamed a/b/old.txt -> a/moved.txt")
	assert.NotContains(t, got, "deleted a/b/old.txt")
	assert.NotContains(t, got, "created a/moved.txt")
}

func TestWatchTree_NewDirectoriesAreWatched(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	l := startTree(t, fs, TreeWatchOptions{})
	// Files written right after mkdir may precede the new watch: the
	// watcher's scan of the new directory finds them.
	put(t, root, "n1/n2/n3/f.txt", "a")
	l.until(t, "created n1", "created n1/n2", "created n1/n2/n3", "created n1/n2/n3/f.txt")
	require.NoError(t, os.WriteFile(filepath.Join(root, "n1/n2/n3/f.txt"), []byte("bb"), 0o644))
	l.until(t, "modified n1/n2/n3/f.txt")
}

func TestWatchTree_RenamedDirectoryKeepsReportingUnderItsNewName(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "d/sub/f.txt", "a")
	l := startTree(t, fs, TreeWatchOptions{})
	require.NoError(t, os.Rename(filepath.Join(root, "d"), filepath.Join(root, "e")))
	l.until(t, "renamed d -> e")
	require.NoError(t, os.WriteFile(filepath.Join(root, "e/sub/f.txt"), []byte("bb"), 0o644))
	got := l.until(t, "modified e/sub/f.txt")
	assert.NotContains(t, got, "modified d/sub/f.txt")
}

func TestWatchTree_DirectoryMovedOutIsDeletedAndForgotten(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "d/f.txt", "a")
	l := startTree(t, fs, TreeWatchOptions{})
	outside := filepath.Join(filepath.Dir(root), "outside")
	require.NoError(t, os.Rename(filepath.Join(root, "d"), outside))
	l.until(t, "deleted d", "deleted d/f.txt")
	// A change in the directory that left is not the workspace's; the
	// marker file afterwards proves the watcher read past it.
	require.NoError(t, os.WriteFile(filepath.Join(outside, "f.txt"), []byte("bb"), 0o644))
	put(t, root, "marker", "m")
	got := l.until(t, "created marker")
	assert.NotContains(t, got, "modified d/f.txt")
	assert.NotContains(t, got, "created d/f.txt")
}

func TestWatchTree_AtomicSaveIsOneModification(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "f.txt", "a")
	// A wide window: the temp file's creation and rename fall in one.
	l := startTree(t, fs, TreeWatchOptions{Window: 300 * time.Millisecond})
	put(t, root, ".f.txt.tmp", "new")
	require.NoError(t, os.Rename(filepath.Join(root, ".f.txt.tmp"), filepath.Join(root, "f.txt")))
	put(t, root, "marker", "m")
	got := l.until(t, "modified f.txt", "created marker")
	for _, g := range got {
		assert.NotContains(t, g, ".f.txt.tmp", "the temp file came and went within the window")
	}
}

func TestWatchTree_CoalescesOnePathWithinTheWindow(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "f.txt", "a")
	l := startTree(t, fs, TreeWatchOptions{Window: 300 * time.Millisecond})
	for i := range 20 {
		require.NoError(t, os.WriteFile(filepath.Join(root, "f.txt"), fmt.Appendf(nil, "v%d", i), 0o644))
	}
	put(t, root, "marker", "m")
	got := l.until(t, "modified f.txt", "created marker")
	assert.Equal(t, 1, count(got, "modified f.txt"), "%q", got)
}

func TestWatchTree_TooManyPendingPathsIsAnOverflowRecoveredByRescan(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "keep.txt", "k")
	put(t, root, "drop.txt", "d")
	l := startTree(t, fs, TreeWatchOptions{MaxPending: 4, Window: 200 * time.Millisecond})
	var want []string
	for i := range 50 {
		name := fmt.Sprintf("dir%d/f%02d.txt", i%3, i)
		put(t, root, name, "x")
		want = append(want, "created "+name)
	}
	require.NoError(t, os.Remove(filepath.Join(root, "drop.txt")))
	want = append(want, "overflow", "deleted drop.txt", "created dir0", "created dir1", "created dir2")
	got := l.until(t, want...)
	assert.NotContains(t, got, "deleted keep.txt")
	// The rescan watched the new directories.
	require.NoError(t, os.WriteFile(filepath.Join(root, "dir1/f01.txt"), []byte("yy"), 0o644))
	l.until(t, "modified dir1/f01.txt")
}

// overflowEvent is the bytes of one IN_Q_OVERFLOW event.
func overflowEvent() []byte {
	buf := make([]byte, unix.SizeofInotifyEvent)
	ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[0]))
	ev.Wd = -1
	ev.Mask = unix.IN_Q_OVERFLOW
	return buf
}

func TestWatchTree_KernelQueueOverflowRescansWhatItLost(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "same.txt", "s")
	put(t, root, "edit.txt", "e")
	put(t, root, "gone.txt", "g")
	var delivered [][]TreeEvent
	w, err := fs.newTreeWatcher(TreeWatchOptions{Window: time.Hour, MaxPending: 100}, func(evs []TreeEvent, err error) {
		require.NoError(t, err)
		delivered = append(delivered, evs)
	})
	require.NoError(t, err)
	defer w.f.Close() // never started: nothing to wait for
	// Changes whose events the kernel dropped.
	put(t, root, "sub/new.txt", "n")
	require.NoError(t, os.WriteFile(filepath.Join(root, "edit.txt"), []byte("longer"), 0o644))
	require.NoError(t, os.Remove(filepath.Join(root, "gone.txt")))

	w.parse(overflowEvent())
	w.flush()
	require.Len(t, delivered, 1)
	var got []string
	for _, ev := range delivered[0] {
		got = append(got, render(ev))
	}
	assert.Equal(t, []string{"overflow", "deleted gone.txt", "modified edit.txt", "created sub", "created sub/new.txt"}, got)
	_, watched := w.watches.dirs["sub"]
	assert.True(t, watched, "the rescan watches the directory it found")
}

func TestWatchTree_WatchLimitIsRaisedAsRoot(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "d/f", "x")
	sysctl := filepath.Join(t.TempDir(), "max_user_watches")
	require.NoError(t, os.WriteFile(sysctl, []byte("100\n"), 0o644))
	full := true
	fs.hooks.treeSysctl = sysctl
	fs.hooks.treeAddWatch = func(string) error {
		if full {
			full = false
			return unix.ENOSPC
		}
		return nil
	}
	if os.Geteuid() != 0 {
		t.Skip("raising the limit needs root")
	}
	w, err := fs.newTreeWatcher(TreeWatchOptions{}, func([]TreeEvent, error) {})
	require.NoError(t, err)
	defer w.f.Close() // never started: nothing to wait for
	data, err := os.ReadFile(sysctl)
	require.NoError(t, err)
	assert.Equal(t, "8192\n", string(data))
	assert.Contains(t, w.watches.dirs, "d")
}

func TestWatchTree_WatchLimitFailsLoudlyWithTheFixWhenNotRoot(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "d/f", "x")
	sysctl := filepath.Join(t.TempDir(), "max_user_watches")
	require.NoError(t, os.WriteFile(sysctl, []byte("5000\n"), 0o644))
	fs.hooks.treeSysctl = sysctl
	fs.hooks.treeNotRoot = true
	fs.hooks.treeAddWatch = func(rel string) error {
		if rel == "d" {
			return unix.ENOSPC
		}
		return nil
	}
	_, err := fs.WatchTree(context.Background(), TreeWatchOptions{}, func([]TreeEvent, error) {})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sysctl -w fs.inotify.max_user_watches=10000")
	data, rerr := os.ReadFile(sysctl)
	require.NoError(t, rerr)
	assert.Equal(t, "5000\n", string(data), "a non-root daemon does not touch the limit")
}

func TestWatchTree_ADirectoryMadeAndRenamedWithinTheWindowReportsItsContents(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	l := startTree(t, fs, TreeWatchOptions{Window: 300 * time.Millisecond})
	put(t, root, "tmpdir/f.txt", "a")
	require.NoError(t, os.Rename(filepath.Join(root, "tmpdir"), filepath.Join(root, "final")))
	got := l.until(t, "created final", "created final/f.txt")
	for _, g := range got {
		assert.NotContains(t, g, "tmpdir")
	}
	// The directory is watched under its final name.
	require.NoError(t, os.WriteFile(filepath.Join(root, "final/f.txt"), []byte("bb"), 0o644))
	l.until(t, "modified final/f.txt")
}

func TestCachedVersion_NeverHashes(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "f.txt", "a")
	_, ok := fs.CachedVersion("f.txt")
	assert.False(t, ok, "not hashed yet: unknown")
	_, ok = fs.CachedVersion("f.txt")
	assert.False(t, ok, "asking did not hash it")
	require.NoError(t, os.Mkdir(filepath.Join(root, "d"), 0o755))
	v, ok := fs.CachedVersion("d")
	assert.True(t, ok)
	assert.NotEmpty(t, v, "a directory has its metadata version")
	_, ok = fs.CachedVersion("missing")
	assert.False(t, ok)
}

func TestWatchTree_SinceIsBeforeTheChangeAndAdvances(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	l := startTree(t, fs, TreeWatchOptions{})
	put(t, root, "one.txt", "1")
	var first TreeEvent
	for first.Path != "one.txt" {
		for _, ev := range <-l.ch {
			if ev.Path == "one.txt" {
				first = ev
			}
		}
	}
	mark := time.Now()
	put(t, root, "two.txt", "2")
	var second TreeEvent
	for second.Path != "two.txt" {
		for _, ev := range <-l.ch {
			if ev.Path == "two.txt" {
				second = ev
			}
		}
	}
	assert.False(t, second.Since.IsZero(), "the watcher had read its queue empty before the second change")
	assert.False(t, second.Since.After(mark), "every event behind the change came after Since")
	assert.False(t, second.Since.Before(first.Since), "Since never goes back")
}
