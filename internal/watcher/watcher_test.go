package watcher

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/policy/localstore"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/local"
)

// A watcher that fails for good must not leave the feed vouching for
// changes it can no longer see: fs.changes (git fsmonitor) stops vouching,
// live subscribers are told they lost changes, and a since from before the
// failure is FS_CHANGES_LOST.
func TestRecorder_AFailedWatcherEndsTheFeedsVouching(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := localstore.Open(t.TempDir(), policy.DefaultOptions().WithLogger(quiet))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	lfs, err := local.New(t.TempDir(), local.Options{Digests: store})
	require.NoError(t, err)
	engine := policy.NewEngine(store, lfs)

	before := store.LastSeq()
	sub, err := store.Subscribe(before, 0)
	require.NoError(t, err)
	defer sub.Close()

	stops := 0
	r := &Recorder{FS: lfs, Engine: engine, Stopped: func() { stops++ }, Log: quiet}
	r.Deliver(context.Background(), nil, errors.New("inotify read: input/output error"))

	assert.Equal(t, 1, stops, "the daemon must learn that the watcher stopped")
	select {
	case item, ok := <-sub.C:
		require.True(t, ok)
		assert.True(t, item.Lost, "a live subscriber is told it lost changes")
	case <-time.After(time.Minute):
		t.Fatal("the live subscriber was never told it lost changes")
	}
	_, err = store.Subscribe(before, 0)
	var perr *provider.Error
	require.ErrorAs(t, err, &perr)
	assert.Equal(t, provider.CodeChangesLost, perr.Code)
}

// TestRecorder_RecordsWhatIsNotIgnored delivers a window with a change
// in the workspace, one in an ignored path and an overflow: the first is
// on the feed as an external change, the ignored one is not, and the
// overflow drops the mounts' directory descriptors.
func TestRecorder_RecordsWhatIsNotIgnored(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := localstore.Open(t.TempDir(), policy.DefaultOptions().WithLogger(quiet))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	root := t.TempDir()
	lfs, err := local.New(root, local.Options{Digests: store})
	require.NoError(t, err)
	engine := policy.NewEngine(store, lfs)
	sub, err := store.Subscribe(store.LastSeq(), 0)
	require.NoError(t, err)
	defer sub.Close()

	forgot := 0
	r := &Recorder{FS: lfs, Engine: engine, Ignored: Ignore(root, filepath.Join(root, ".state"), nil),
		Forget: func() { forgot++ }, Log: quiet}
	r.Deliver(context.Background(), []local.TreeEvent{
		{Kind: local.TreeDeleted, Path: ".state/db"},
		{Kind: local.TreeDeleted, Path: "gone.txt"},
		{Kind: local.TreeOverflow},
	}, nil)
	assert.Equal(t, 1, forgot, "an overflow drops the cached directory descriptors")
	var paths []string
	for len(paths) < 1 {
		select {
		case item := <-sub.C:
			if !item.Lost {
				paths = append(paths, item.Entry.Path)
			}
		case <-time.After(time.Minute):
			t.Fatalf("the change never reached the feed (got %v)", paths)
		}
	}
	assert.Equal(t, []string{"gone.txt"}, paths)
}

func TestIgnore_SkipsTheStateDirectoryInsideTheWorkspaceOnly(t *testing.T) {
	in := Ignore("/ws", "/ws/.dsh", nil)
	assert.True(t, in(".dsh"))
	assert.True(t, in(".dsh/db/x"))
	assert.False(t, in(".dshx"))
	assert.False(t, in("src/a.go"))
	out := Ignore("/ws", "/var/lib/dsh", nil)
	assert.False(t, out("var/lib/dsh"))
}
