package policy

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

func TestRetention_MaxEntriesPrunesTheOldestAndLosesOlderSinces(t *testing.T) {
	s := openStore(t, t.TempDir(), quietOptions())
	base := s.LastSeq()
	for range 10 {
		appendChange(t, s, "f")
	}
	n, err := s.PruneAudit(Retention{MaxEntries: 4}, time.Now())
	require.NoError(t, err)
	assert.Equal(t, 6, n)
	left, err := s.Audit(AuditQuery{Limit: 100})
	require.NoError(t, err)
	require.Len(t, left, 4, "fs.log lists what is retained")
	oldest := left[len(left)-1].Seq

	_, err = s.Subscribe(base, 0)
	var lost *ChangesLostError
	require.ErrorAs(t, err, &lost, "a since older than the retained history")
	assert.Equal(t, provider.CodeChangesLost, provider.CodeOf(err))
	assert.Equal(t, s.LastSeq(), lost.Resume)

	sub, err := s.Subscribe(oldest-1, 0)
	require.NoError(t, err, "the oldest retained entry can still be replayed")
	defer sub.Close()
	seqs, _, gone := collect(t, sub, 4)
	assert.False(t, gone)
	assert.Equal(t, oldest, seqs[0])
}

func TestRetention_MaxAgePrunesOnlyOlderEntries(t *testing.T) {
	s := openStore(t, t.TempDir(), quietOptions())
	now := time.Now()
	for _, age := range []time.Duration{3 * time.Hour, 2 * time.Hour, 90 * time.Minute, time.Minute, 0} {
		require.NoError(t, s.AppendAudit(AuditEntry{Time: now.Add(-age), Path: "f", Op: OpWrite}))
	}
	n, err := s.PruneAudit(Retention{MaxAge: time.Hour}, now)
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	left, err := s.Audit(AuditQuery{Limit: 100})
	require.NoError(t, err)
	require.Len(t, left, 2)
	for _, e := range left {
		assert.False(t, e.Time.Before(now.Add(-time.Hour)))
	}
	n, err = s.PruneAudit(Retention{MaxAge: time.Hour}, now)
	require.NoError(t, err)
	assert.Zero(t, n, "nothing more to prune")
}

func TestRetention_AReplayRacingThePruneEndsLostNeverWithAGap(t *testing.T) {
	s := openStore(t, t.TempDir(), quietOptions())
	base := s.LastSeq()
	const total = 3 * feedReplayPage
	for range total {
		appendChange(t, s, "f")
	}
	sub, err := s.Subscribe(base, 0)
	require.NoError(t, err)
	defer sub.Close()
	_, err = s.PruneAudit(Retention{MaxEntries: 10}, time.Now())
	require.NoError(t, err)
	want := base + 1
	lost := false
	for it := range sub.C {
		if it.Lost {
			lost = true
			break
		}
		require.Equal(t, want, it.Entry.Seq, "entries come without a gap until the Lost item")
		want++
	}
	assert.True(t, lost, "the replay cannot vouch for the pruned entries: Lost")
}

func TestRetention_StartPrunesInTheBackgroundUntilStopped(t *testing.T) {
	s := openStore(t, t.TempDir(), quietOptions())
	for range 5 {
		appendChange(t, s, "f")
	}
	stop := s.StartRetention(Retention{MaxEntries: 2, Interval: time.Hour})
	require.Eventually(t, func() bool {
		left, err := s.Audit(AuditQuery{Limit: 100})
		return err == nil && len(left) == 2
	}, 10*time.Second, 10*time.Millisecond, "the first pruning runs at start")
	stop()
	require.NoError(t, s.Close())
	_, err := s.PruneAudit(Retention{MaxEntries: 1}, time.Now())
	assert.True(t, errors.Is(err, ErrClosed))
}
