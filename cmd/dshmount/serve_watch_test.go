package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/policy"
	"github.com/dshmount/dshmount/policy/localstore"
	"github.com/dshmount/dshmount/provider"
	"github.com/dshmount/dshmount/provider/local"
)

// A watcher that fails for good must not leave the feed vouching for
// changes it can no longer see: fs.changes (git fsmonitor) stops vouching,
// live subscribers are told they lost changes, and a since from before the
// failure is FS_CHANGES_LOST.
func TestWorkspaceRecorder_AFailedWatcherEndsTheFeedsVouching(t *testing.T) {
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
	deliver := workspaceRecorder(context.Background(), lfs, engine, func(string) bool { return false }, nil, nil,
		func() { stops++ }, quiet)
	deliver(nil, errors.New("inotify read: input/output error"))

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
