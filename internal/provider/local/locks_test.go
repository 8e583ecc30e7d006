package local

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

// TestLockTable_AnUnusedLockIsReused pins that taking and releasing the
// lock of one key or two nobody holds reuses a freed lock (the table
// allocates only the release function), and that a reused lock
// is free: a second holder of the same key still waits.
func TestLockTable_AnUnusedLockIsReused(t *testing.T) {
	lt := newLockTable()
	ctx := context.Background()
	for _, keys := range [][]provider.Key{{"a"}, {"a", "b"}} {
		allocs := testing.AllocsPerRun(100, func() {
			release, err := lt.lock(ctx, keys...)
			require.NoError(t, err)
			release()
		})
		assert.LessOrEqual(t, allocs, 1.0, "lock %v", keys)
		assert.Zero(t, lt.size(), "locks released")
	}
	release, err := lt.lock(ctx, "a")
	require.NoError(t, err)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = lt.lock(cancelled, "a")
	assert.ErrorIs(t, err, context.Canceled, "a held lock taken from the free list still excludes")
	release()
	assert.Zero(t, lt.size())
}
