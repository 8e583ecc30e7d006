package policy

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

// TestCache_EvictedObservationStillRefusesStaleEdit: with the smallest
// caches, a session's observation and a cached digest are evicted
// (after reaching Badger); the guard reads them back and still refuses an
// edit based on what the session read before another writer changed it.
func TestCache_EvictedObservationStillRefusesStaleEdit(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir(), quietOptions().WithCacheEntries(1).WithFlushEntries(1<<20))
	fs := newFakeFS()
	e := NewEngine(s, fs)
	a, b := openSession(t, s), openSession(t, s)
	target := fs.target("/ws/f.go")
	fs.put(target, "alpha\n")
	_, _, err := e.Read(ctx, a, target)
	require.NoError(t, err)
	_, _, err = e.Read(ctx, b, target)
	require.NoError(t, err)
	_, err = e.Edit(ctx, b, target, provider.EditRequest{OldString: "alpha", NewString: "beta"}, Guard{})
	require.NoError(t, err)
	want := digestFor(provider.FileID{Dev: 1, Ino: 42}, 42)
	s.RememberDigest(provider.FileID{Dev: 1, Ino: 42}, want)

	// Push everything out of the caches: flush, then touch many other keys.
	require.NoError(t, s.Flush())
	for i := range 2000 {
		other := fs.target(fmt.Sprintf("/ws/other-%d", i))
		_, _ = s.Observation(a.Session, other.Key)
		_, _ = s.Digest(provider.FileID{Dev: 2, Ino: uint64(i)})
	}
	require.NoError(t, s.Flush())
	entries, dirty := s.buf.size()
	cached, ddirty := s.digests.size()
	assert.Zero(t, dirty)
	assert.Zero(t, ddirty)
	assert.LessOrEqual(t, entries, 3*bufferShards, "the record cache stays bounded")
	assert.LessOrEqual(t, cached, 3*digestShards, "the digest cache stays bounded")

	got42, ok := s.Digest(provider.FileID{Dev: 1, Ino: 42})
	require.True(t, ok)
	assert.Equal(t, want, got42, "an evicted digest is read back")
	_, err = e.Edit(ctx, a, target, provider.EditRequest{OldString: "alpha", NewString: "gamma"}, Guard{})
	require.Error(t, err)
	assert.Equal(t, provider.CodeStaleVersion, provider.CodeOf(err), "a stale read is refused after eviction")
	got, _ := fs.content(target)
	assert.Equal(t, "beta\n", got)
}

// TestCache_DirtyEntriesAreNeverEvicted: unflushed records and digests
// survive any amount of cache pressure.
func TestCache_DirtyEntriesAreNeverEvicted(t *testing.T) {
	s := openStore(t, t.TempDir(), quietOptions().WithCacheEntries(1).WithFlushEntries(1<<20).WithFlushInterval(1<<40))
	a := openSession(t, s)
	fs := newFakeFS()
	target := fs.target("/ws/keep")
	require.NoError(t, s.Record(a.Session, target.Key, Present("v7")))
	id := provider.FileID{Dev: 1, Ino: 7}
	want := digestFor(id, 7)
	s.RememberDigest(id, want)
	for i := range 2000 {
		_, _ = s.Observation(a.Session, fs.target(fmt.Sprintf("/ws/o-%d", i)).Key)
		_, _ = s.Digest(provider.FileID{Dev: 3, Ino: uint64(i)})
	}
	obs, ok := s.Observation(a.Session, target.Key)
	require.True(t, ok)
	assert.Equal(t, Present("v7"), obs)
	got, ok := s.Digest(id)
	require.True(t, ok)
	assert.Equal(t, want, got)
	_, dirty := s.digests.size()
	assert.Equal(t, 1, dirty)
}
