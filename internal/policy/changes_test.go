package policy

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

// changedPaths lists the paths of a ChangesSince answer.
func changedPaths(c ChangesSince) []string {
	var out []string
	for _, e := range c.Entries {
		out = append(out, e.Path)
	}
	return out
}

func TestChangesSince_ListsTheChangesAfterSinceWithoutRefusals(t *testing.T) {
	s := openStore(t, t.TempDir(), quietOptions())
	base := s.LastSeq()
	appendChange(t, s, "a")
	mid := s.LastSeq()
	require.NoError(t, s.AppendAudit(AuditEntry{Path: "refused", Op: OpWrite, Refused: provider.CodeStaleVersion}))
	appendChange(t, s, "b")

	all, err := s.ChangesSince(base, 0)
	require.NoError(t, err)
	assert.True(t, all.Vouched)
	assert.Equal(t, []string{"a", "b"}, changedPaths(all))
	assert.Equal(t, s.LastSeq(), all.Upto)

	later, err := s.ChangesSince(mid, 0)
	require.NoError(t, err)
	assert.True(t, later.Vouched)
	assert.Equal(t, []string{"b"}, changedPaths(later), "only what came after since")

	none, err := s.ChangesSince(all.Upto, 0)
	require.NoError(t, err)
	assert.True(t, none.Vouched, "asking again from Upto is vouched for")
	assert.Empty(t, none.Entries)
}

func TestChangesSince_PagesThroughLongLogsAndTruncatesAtMax(t *testing.T) {
	s := openStore(t, t.TempDir(), quietOptions())
	base := s.LastSeq()
	const total = changesPage*2 + 7
	for range total {
		appendChange(t, s, "f")
	}
	all, err := s.ChangesSince(base, 0)
	require.NoError(t, err)
	assert.Len(t, all.Entries, total)
	assert.False(t, all.Truncated)
	for i := 1; i < len(all.Entries); i++ {
		require.Less(t, all.Entries[i-1].Seq, all.Entries[i].Seq, "oldest first, no duplicate")
	}

	capped, err := s.ChangesSince(base, 10)
	require.NoError(t, err)
	assert.True(t, capped.Truncated)
	assert.Len(t, capped.Entries, 10)
}

func TestChangesSince_DoesNotVouchForAnEarlierRunLostChangesOrTheFuture(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, quietOptions())
	appendChange(t, s, "a")
	old := s.LastSeq()
	require.NoError(t, s.Close())

	s2 := openStore(t, dir, quietOptions())
	appendChange(t, s2, "b")
	prev, err := s2.ChangesSince(old, 0)
	require.NoError(t, err)
	assert.False(t, prev.Vouched, "a seq of an earlier run")
	assert.Empty(t, prev.Entries)

	future, err := s2.ChangesSince(s2.LastSeq()+5, 0)
	require.NoError(t, err)
	assert.False(t, future.Vouched)

	before := s2.LastSeq()
	s2.MarkChangesLost()
	appendChange(t, s2, "c")
	lost, err := s2.ChangesSince(before, 0)
	require.NoError(t, err)
	assert.False(t, lost.Vouched, "a seq from before the watcher lost changes")
	after, err := s2.ChangesSince(s2.feed.base, 0)
	require.NoError(t, err)
	assert.True(t, after.Vouched)
	assert.Equal(t, []string{"c"}, changedPaths(after))
}

func TestChangesInProgress_ListsHeldAndAnnouncedPaths(t *testing.T) {
	e, fs := newTestEngine(t)
	assert.Empty(t, e.ChangesInProgress())
	held := fs.target("held.txt")
	release := e.HoldOwn(held)
	announced := fs.target("announced.txt")
	e.Announce(context.Background(), announced)
	assert.Equal(t, []string{"announced.txt", "held.txt"}, e.ChangesInProgress())

	release()
	require.NoError(t, e.RecordApplied(context.Background(), AppliedChange{Actor: Actor{Channel: ChannelSocket}, Op: OpWrite, Target: announced, After: "v"}))
	assert.Empty(t, e.ChangesInProgress(), "released and committed: the audit log has them now")
}

func TestChangesSince_DoesNotVouchForPrunedHistory(t *testing.T) {
	s := openStore(t, t.TempDir(), quietOptions())
	base := s.LastSeq()
	for _, p := range []string{"a", "b", "c"} {
		appendChange(t, s, p)
	}
	n, err := s.PruneAudit(Retention{MaxEntries: 1}, time.Now())
	require.NoError(t, err)
	require.Positive(t, n)
	old, err := s.ChangesSince(base, 0)
	require.NoError(t, err)
	assert.False(t, old.Vouched, "entries after since were pruned")
	kept, err := s.ChangesSince(s.LastSeq()-1, 0)
	require.NoError(t, err)
	assert.True(t, kept.Vouched)
	assert.Equal(t, []string{"c"}, changedPaths(kept))
}
