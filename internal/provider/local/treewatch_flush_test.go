package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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

// TestWatchTree_ABurstOfEventsIsReadInBatches pins the read pause: while a
// window is open the watcher reads the kernel's queue at most once per
// treeReadPause (plus the read that opens the window and the one that
// ends it), however many events a writer makes meanwhile.
func TestWatchTree_ABurstOfEventsIsReadInBatches(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	// The window stays open for the whole burst: nothing is delivered.
	c, err := fs.WatchTree(context.Background(), TreeWatchOptions{Window: time.Hour}, func([]TreeEvent, error) {})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	w := c.(*treeWatcher)
	before := w.reads.Load()
	const files = 300
	start := time.Now()
	for i := range files {
		// Four events each: create, modify, attrib, close-write.
		p := filepath.Join(root, fmt.Sprintf("f%d", i))
		require.NoError(t, os.WriteFile(p, []byte("x"), 0o644))
		require.NoError(t, os.Chmod(p, 0o600))
	}
	took := time.Since(start)
	reads := w.reads.Load() - before
	limit := int64(took/treeReadPause) + 2
	assert.LessOrEqual(t, reads, limit, "%d reads for %d files written in %v", reads, files, took)
	assert.Less(t, reads, int64(files), "one read per file or more: no batching")
}
