package policy

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

// appendChange appends one change entry for path.
func appendChange(t *testing.T, s *Store, path string) {
	t.Helper()
	require.NoError(t, s.AppendAudit(AuditEntry{Path: path, Op: OpWrite, Actor: Actor{Channel: ChannelExternal}}))
}

// collect reads n entries (or up to a Lost item) from sub.
func collect(t *testing.T, sub *Subscription, n int) (seqs []uint64, paths []string, lost bool) {
	t.Helper()
	for len(seqs) < n {
		it, ok := <-sub.C
		if !ok {
			return seqs, paths, lost
		}
		if it.Lost {
			return seqs, paths, true
		}
		seqs = append(seqs, it.Entry.Seq)
		paths = append(paths, it.Entry.Path)
	}
	return seqs, paths, false
}

func TestFeed_ReplaysThenGoesLiveWithoutRefusals(t *testing.T) {
	s := openStore(t, t.TempDir(), quietOptions())
	base := s.LastSeq()
	appendChange(t, s, "a")
	require.NoError(t, s.AppendAudit(AuditEntry{Path: "refused", Op: OpWrite, Refused: provider.CodeStaleVersion}))
	appendChange(t, s, "b")
	sub, err := s.Subscribe(base, 0)
	require.NoError(t, err)
	defer sub.Close()
	appendChange(t, s, "c")
	seqs, paths, lost := collect(t, sub, 3)
	assert.False(t, lost)
	assert.Equal(t, []string{"a", "b", "c"}, paths, "refusals are never on the feed")
	assert.IsIncreasing(t, seqs)
}

func TestFeed_ResubscribingFromTheLastSeqHasNoGapAndNoDuplicate(t *testing.T) {
	s := openStore(t, t.TempDir(), quietOptions())
	since := s.LastSeq()
	const total = 600
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // changes keep coming while the subscriber reconnects
		defer wg.Done()
		for i := range total {
			assert.NoError(t, s.AppendAudit(AuditEntry{Path: string(rune('a' + i%26)), Op: OpWrite}))
		}
	}()
	var all []uint64
	for len(all) < total {
		sub, err := s.Subscribe(since, 0)
		require.NoError(t, err)
		seqs, _, lost := collect(t, sub, min(97, total-len(all)))
		sub.Close()
		require.False(t, lost)
		all = append(all, seqs...)
		since = seqs[len(seqs)-1]
	}
	wg.Wait()
	assert.Len(t, all, total)
	assert.IsIncreasing(t, all, "no duplicate, in order")
	entries, err := s.Audit(AuditQuery{Since: s.feed.base, Limit: 10 * total})
	require.NoError(t, err)
	assert.Len(t, entries, total, "no gap: every appended change was delivered")
}

func TestFeed_SinceFromAnEarlierRunIsChangesLost(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, quietOptions())
	appendChange(t, s, "a")
	old := s.LastSeq()
	require.NoError(t, s.Close())

	s2 := openStore(t, dir, quietOptions())
	appendChange(t, s2, "b")
	_, err := s2.Subscribe(old, 0)
	require.Error(t, err)
	assert.Equal(t, provider.CodeChangesLost, provider.CodeOf(err))
	assert.Contains(t, err.Error(), "subscribe from seq")
	sub, err := s2.Subscribe(s2.feed.base, 0)
	require.NoError(t, err, "the seq of this run's start is vouched for")
	sub.Close()
}

func TestFeed_FutureSinceIsInvalid(t *testing.T) {
	s := openStore(t, t.TempDir(), quietOptions())
	_, err := s.Subscribe(s.LastSeq()+5, 0)
	require.Error(t, err)
	assert.Equal(t, provider.CodeInvalidArgument, provider.CodeOf(err))
}

func TestFeed_ASlowSubscriberIsToldItLostChanges(t *testing.T) {
	s := openStore(t, t.TempDir(), quietOptions())
	sub, err := s.Subscribe(s.LastSeq(), 4)
	require.NoError(t, err)
	defer sub.Close()
	for range 200 { // never read meanwhile
		appendChange(t, s, "f")
	}
	seqs, _, lost := collect(t, sub, 1000)
	assert.True(t, lost)
	assert.Less(t, len(seqs), 200)
	_, open := <-sub.C
	assert.False(t, open, "the subscription ends after lost")
}

func TestFeed_LostChangesEndSubscriptionsAndOlderSinces(t *testing.T) {
	s := openStore(t, t.TempDir(), quietOptions())
	since := s.LastSeq()
	sub, err := s.Subscribe(since, 0)
	require.NoError(t, err)
	defer sub.Close()
	s.MarkChangesLost()
	_, _, lost := collect(t, sub, 1)
	assert.True(t, lost)
	_, err = s.Subscribe(since, 0)
	assert.Equal(t, provider.CodeChangesLost, provider.CodeOf(err))
}

func TestFeed_ClosingTheStoreEndsSubscriptions(t *testing.T) {
	s := openStore(t, t.TempDir(), quietOptions())
	sub, err := s.Subscribe(s.LastSeq(), 0)
	require.NoError(t, err)
	defer sub.Close()
	require.NoError(t, s.Close())
	_, _, lost := collect(t, sub, 1)
	assert.True(t, lost)
}
