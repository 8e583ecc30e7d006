package local

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWatchTree_AFlushOnPathEndsTheWindowAtOnce(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, ".git/HEAD", "ref")
	l := startTree(t, fs, TreeWatchOptions{
		Window:  time.Hour, // only FlushOn can deliver within the test's bound
		FlushOn: func(rel string) bool { return strings.HasPrefix(rel, ".git/cookie-") },
	})
	put(t, root, "before.txt", "changed before the cookie")
	put(t, root, ".git/cookie-1", "")
	l.until(t, "created before.txt", "created .git/cookie-1")
}

func TestTreeWatch_AnEndedWindowStillReadsWhatWasQueuedBeforeIt(t *testing.T) {
	// A read whose deadline has already passed returns at once, without
	// looking at the kernel's queue. The watcher must not take that moment
	// for one when the queue was empty: events queued before it would be
	// delivered with a later Since than their changes, and the daemon's own
	// changes would count as someone else's.
	fs, root := newTestFS(t, Options{})
	w, err := fs.newTreeWatcher(TreeWatchOptions{Window: time.Millisecond, MaxPending: 100}, func([]TreeEvent, error) {})
	require.NoError(t, err)
	defer w.f.Close() // never started: nothing to wait for
	buf := make([]byte, treeReadBuf)

	w.touch("pending.txt", false)
	w.first = time.Now().Add(-time.Hour) // the window ended long ago
	put(t, root, "queued.txt", "written while the window was open")
	queued := time.Now()

	n, err := w.read(buf)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.Positive(t, n, "the events queued before the read were read")
	assert.True(t, w.drained.After(queued), "drained %v, queued %v", w.drained, queued)
	w.parse(buf[:n])
	assert.Contains(t, w.marks, "queued.txt")

	// Nothing queued: the ended window reads nothing and the queue is drained as of the read.
	before := time.Now()
	n, err = w.read(buf)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	assert.Zero(t, n)
	assert.False(t, w.drained.Before(before))
}
