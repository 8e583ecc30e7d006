package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy/kv"
	"github.com/dshmount/dshmount/internal/provider"
)

func commitFiles(from, to int) []CommitFile {
	var out []CommitFile
	for i := from; i < to; i++ {
		p := fmt.Sprintf("dir/f%03d", i)
		out = append(out, CommitFile{Target: provider.Target{Key: provider.Key("/ws/" + p), DisplayPath: p}, Base: "v0"})
	}
	return out
}

func countPrefix(t *testing.T, s *Store, prefix string, fn func(kv.Pair)) int {
	t.Helper()
	n := 0
	require.NoError(t, s.db.Scan(context.Background(), kv.Range{Prefix: []byte(prefix)}, func(p kv.Pair) error {
		n++
		if fn != nil {
			fn(p)
		}
		return nil
	}))
	return n
}

// A 200-file commit on a default etcd (128 operations per transaction)
// writes its journal record, claims every file in chunks, and releases
// them with the new versions; a second daemon's overlapping commit is
// refused naming exactly the held files and leaves nothing claimed.
func TestShared_CommitClaims200FilesInChunksAllOrNothing(t *testing.T) {
	srv := startEtcd(t) // etcd's default --max-txn-ops (128)
	a := openShared(t, srv, quietOptions().WithWorkspaceRoot("/ws"))
	b := openShared(t, srv, quietOptions().WithWorkspaceRoot("/ws").WithClaimWait(time.Nanosecond))
	ea, eb := &Engine{store: a}, &Engine{store: b}

	start := time.Now()
	c, err := ea.ClaimCommit(context.Background(), "atomic patch", commitFiles(0, 200))
	took := time.Since(start)
	require.NoError(t, err)
	t.Logf("a 200-file commit claim on etcd took %s", took)
	var j commitJournal
	require.Equal(t, 1, countPrefix(t, a, prefixCommitJournal, func(p kv.Pair) {
		require.NoError(t, json.Unmarshal(p.Value, &j))
	}), "the journal record is written")
	assert.Len(t, j.Keys, 200)
	assert.Equal(t, provider.Version("v0"), j.Bases[199])

	// B's commit overlaps on f190..f209: refused, naming the held files,
	// and none of its own files (f200..f209) stays claimed.
	_, err = eb.ClaimCommit(context.Background(), "branch x", commitFiles(190, 210))
	var ce *ClaimConflictError
	require.True(t, errors.As(err, &ce), "got %v", err)
	assert.True(t, errors.Is(err, provider.ErrStaleVersion))
	want := []string{}
	for i := 190; i < 200; i++ {
		want = append(want, fmt.Sprintf("dir/f%03d", i))
	}
	assert.Equal(t, want, ce.Paths)
	_, err = b.Claim(context.Background(), "edit", "dir/f205", "/ws/dir/f205")
	require.NoError(t, err, "the refused commit released what it had taken")
	assert.Equal(t, 1, countPrefix(t, a, prefixCommitJournal, nil), "and deleted its journal record")

	after := map[provider.Key]provider.Version{}
	for _, f := range commitFiles(0, 200) {
		after[f.Target.Key] = "v1"
	}
	c.Release(after)
	assert.Equal(t, 0, countPrefix(t, a, prefixCommitJournal, nil), "released: no journal record left")
	n := 0
	countPrefix(t, a, prefixVersion+"./dir/f1", func(p kv.Pair) {
		n++
		assert.Contains(t, string(p.Value), `"version":"v1"`)
		assert.NotContains(t, string(p.Value), "owner")
	})
	assert.Equal(t, 100, n)
	c2, err := eb.ClaimCommit(context.Background(), "branch x", commitFiles(190, 200))
	require.NoError(t, err)
	c2.Release(nil)
}

// A daemon killed mid-commit leaves its claims and journal record; once the
// claims expired, the next daemon to open resolves the record: the files
// are unclaimed at an unknown version, and the record is gone.
func TestShared_StoppedCommitJournalResolvedByNextDaemon(t *testing.T) {
	srv := startEtcd(t)
	now := time.Now()
	a := openShared(t, srv, quietOptions().WithWorkspaceRoot("/ws").WithNow(func() time.Time { return now }))
	_, err := (&Engine{store: a}).ClaimCommit(context.Background(), "atomic patch", commitFiles(0, 3))
	require.NoError(t, err)
	// a dies here: no release.

	early := openShared(t, srv, quietOptions().WithWorkspaceRoot("/ws").WithNow(func() time.Time { return now.Add(time.Second) }))
	assert.Equal(t, 1, countPrefix(t, early, prefixCommitJournal, nil), "a live commit's record is left alone")

	later := now.Add(DefaultOptions().ClaimTTL + time.Second)
	c := openShared(t, srv, quietOptions().WithWorkspaceRoot("/ws").WithNow(func() time.Time { return later }))
	assert.Equal(t, 0, countPrefix(t, c, prefixCommitJournal, nil), "the stopped commit's record is resolved")
	assert.Equal(t, 3, countPrefix(t, c, prefixVersion, func(p kv.Pair) {
		assert.Equal(t, "{}", string(p.Value), "unclaimed, version unknown")
	}))
}

// MarkChangesLost on a shared store takes its new base from the shared
// counter, not this daemon's mirror of it: a change another daemon makes
// after the loss is always after the seq a subscriber is told to resume
// from, and a since before the loss is refused.
func TestShared_MarkChangesLostBaseIsAboveEveryDaemonsSeq(t *testing.T) {
	srv := startEtcd(t)
	b := openShared(t, srv, quietOptions().WithWorkspaceRoot("/ws"))
	a := openShared(t, srv, quietOptions().WithWorkspaceRoot("/ws")) // opened last: its mirror equals the counter
	before := a.LastSeq()
	a.MarkChangesLost()
	_, err := a.Subscribe(before, 0)
	var lost *ChangesLostError
	require.True(t, errors.As(err, &lost), "a since before the loss is refused: %v", err)
	got, err := a.ChangesSince(before, 0)
	require.NoError(t, err)
	assert.False(t, got.Vouched, "ChangesSince refuses it too")

	require.NoError(t, b.AppendAudit(AuditEntry{Key: "/ws/x", Path: "x", Op: OpWrite, After: "v1"}))
	seq, err := b.auditCounter()
	require.NoError(t, err)
	assert.Greater(t, seq, lost.Resume, "B's change after the loss is after the resume seq, so a resubscriber gets it")
	sub, err := a.Subscribe(lost.Resume, 0)
	require.NoError(t, err, "the resume seq is accepted")
	sub.Close()
}
