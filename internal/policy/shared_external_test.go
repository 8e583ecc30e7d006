package policy

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// auditPaths lists the paths of the changes in s's audit log, oldest first.
func auditPaths(t *testing.T, s *Store) []string {
	t.Helper()
	entries, err := s.Audit(AuditQuery{Kind: AuditChanges})
	require.NoError(t, err)
	var out []string
	for i := len(entries) - 1; i >= 0; i-- {
		out = append(out, entries[i].Path+" "+string(entries[i].Actor.Channel))
	}
	return out
}

// A change made through daemon A's mount is also seen by daemon B's
// watcher of the shared workspace: B records nothing of it, whether A's
// record reaches B before or after B's watcher, while a change made in the
// workspace directory itself is still recorded (once).
func TestShared_AnotherDaemonsChangeSeenByTheWatcherIsOneEntry(t *testing.T) {
	srv := startEtcd(t)
	root := t.TempDir()
	a, b := newDaemon(t, srv, root, quietOptions()), newDaemon(t, srv, root, quietOptions())
	ctx := context.Background()
	mount := Actor{Channel: ChannelMount, PID: 4242}

	// A's record first, then B's watcher.
	require.NoError(t, os.WriteFile(filepath.Join(root, "first.txt"), []byte("1\n"), 0o644))
	since := time.Now()
	tg := a.fs.TargetForRel("first.txt")
	require.NoError(t, a.e.RecordMount(ctx, mount, OpWrite, tg, "", "c1-first", nil))
	recorded, err := b.e.RecordExternal(ctx, ExternalChange{Op: OpWrite, Target: b.fs.TargetForRel("first.txt"), Since: since})
	require.NoError(t, err)
	assert.False(t, recorded, "A recorded it: B's watcher adds nothing")

	// B's watcher first, then A's record (a flush a moment later).
	require.NoError(t, os.WriteFile(filepath.Join(root, "second.txt"), []byte("2\n"), 0o644))
	since = time.Now()
	done := make(chan bool, 1)
	go func() {
		r, err := b.e.RecordExternal(ctx, ExternalChange{Op: OpCreate, Target: b.fs.TargetForRel("second.txt"), Since: since})
		assert.NoError(t, err)
		done <- r
	}()
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, a.e.RecordMount(ctx, mount, OpCreate, a.fs.TargetForRel("second.txt"), "", "c1-second", nil))
	select {
	case r := <-done:
		assert.False(t, r, "A's record arrived while B waited for it")
	case <-time.After(10 * time.Second):
		t.Fatal("B's watcher did not finish")
	}

	// A change in the workspace directory itself: nobody records it but
	// B's watcher, after its wait.
	require.NoError(t, os.WriteFile(filepath.Join(root, "third.txt"), []byte("3\n"), 0o644))
	start := time.Now()
	recorded, err = b.e.RecordExternal(ctx, ExternalChange{Op: OpCreate, Target: b.fs.TargetForRel("third.txt"), Since: time.Now()})
	require.NoError(t, err)
	assert.True(t, recorded, "an outside change is recorded")
	assert.Less(t, time.Since(start), 3*remoteRecordWait, "after one bounded wait")

	want := []string{"first.txt mount", "second.txt mount", "third.txt external"}
	require.Eventually(t, func() bool { return len(auditPaths(t, a.store)) >= len(want) }, 10*time.Second, 20*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, want, auditPaths(t, a.store), "one change, one entry")
}
