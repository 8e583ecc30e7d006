package policy

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAudit_SincePagingMissesNothingUnderConcurrentWriters pages through
// the audit log with Since while many writers append: every entry the
// writers appended is seen exactly once. A page may only end at a seq
// below which every entry is already readable; otherwise an entry buffered
// in a shard the flush had already passed is skipped for good.
func TestAudit_SincePagingMissesNothingUnderConcurrentWriters(t *testing.T) {
	s := openStore(t, t.TempDir(), quietOptions())
	since := s.LastSeq()
	const writers, each = 16, 400
	var wg sync.WaitGroup
	var done atomic.Bool
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				assert.NoError(t, s.AppendAudit(AuditEntry{Path: string(rune('a'+w)) + "/" + string(rune('a'+i%26)), Op: OpWrite}))
			}
		}()
	}
	go func() { wg.Wait(); done.Store(true) }()
	seen := map[uint64]int{}
	for {
		finished := done.Load()
		page, err := s.Audit(AuditQuery{Since: since, Limit: 7, Kind: AuditChanges})
		require.NoError(t, err)
		for _, e := range page {
			seen[e.Seq]++
			since = max(since, e.Seq)
		}
		if finished && len(page) == 0 {
			break
		}
	}
	var missed []uint64
	for seq := s.feed.base + 1; seq <= s.LastSeq(); seq++ {
		if seen[seq] == 0 {
			missed = append(missed, seq)
		}
	}
	assert.Empty(t, missed, "entries the pages skipped")
	assert.Equal(t, writers*each, len(seen), "every appended entry was paged")
	for seq, n := range seen {
		require.Equal(t, 1, n, "seq %d seen twice", seq)
	}
}
