package local

import (
	"strings"
	"testing"
	"time"
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
