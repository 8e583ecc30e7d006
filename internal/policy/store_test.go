package policy

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

func TestClose_IsIdempotentAndRefusesLaterUse(t *testing.T) {
	s := openStore(t, t.TempDir(), quietOptions())
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	_, err := s.OpenSession("late")
	assert.ErrorIs(t, err, ErrClosed)
	assert.ErrorIs(t, s.AppendAudit(AuditEntry{Path: "x"}), ErrClosed)
}

func TestPersistence_CleanRestartKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, quietOptions())
	sess, err := s.OpenSession("agent")
	require.NoError(t, err)
	key := provider.Key("/ws/f.txt")
	require.NoError(t, s.Record(sess.ID, key, Present("v7")))
	require.NoError(t, s.Record(sess.ID, "/ws/gone", Absent()))
	id := provider.FileID{Dev: 1, Ino: 42}
	want := digestFor(id, 42)
	s.RememberDigest(id, want)
	untouched := provider.FileID{Dev: 1, Ino: 43}
	actor := Actor{Session: sess.ID, UID: 1000, Channel: ChannelSocket}
	rec := WriteRecord{Actor: actor, Op: OpEdit, Time: time.Unix(1700000000, 0).UTC(), Version: "v7", Path: "f.txt"}
	require.NoError(t, s.SetLastWrite(key, rec))
	require.NoError(t, s.AppendAudit(AuditEntry{Key: key, Path: "f.txt", Op: OpEdit, Actor: actor, Before: "v6", After: "v7"}))
	require.NoError(t, s.Close())

	r := openStore(t, dir, quietOptions())
	assert.False(t, r.Recovered())
	got, ok := r.Session(sess.ID)
	require.True(t, ok)
	assert.Equal(t, "agent", got.Name)
	assert.True(t, sess.Opened.Equal(got.Opened))
	obs, ok := r.Observation(sess.ID, key)
	require.True(t, ok)
	assert.Equal(t, Present("v7"), obs)
	obs, ok = r.Observation(sess.ID, "/ws/gone")
	require.True(t, ok)
	assert.Equal(t, Absent(), obs)
	cached, ok := r.Digest(id)
	require.True(t, ok)
	assert.Equal(t, want, cached, "a clean restart keeps cached digests exactly")
	_, ok = r.Digest(untouched)
	assert.False(t, ok)
	lw, ok := r.LastWrite(key)
	require.True(t, ok)
	assert.Equal(t, rec.Actor, lw.Actor)
	assert.Equal(t, rec.Version, lw.Version)
	assert.True(t, rec.Time.Equal(lw.Time))
	entries, err := r.Audit(AuditQuery{})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, provider.Version("v6"), entries[0].Before)
	assert.NotZero(t, entries[0].Seq)
	assert.False(t, entries[0].Time.IsZero())
}

func TestDigests_LastRememberedWinsAndDecodesExactly(t *testing.T) {
	s := openStore(t, t.TempDir(), quietOptions())
	a, b := provider.FileID{Dev: 1, Ino: 1}, provider.FileID{Dev: 1, Ino: 2}
	_, ok := s.Digest(a)
	assert.False(t, ok)
	s.RememberDigest(a, digestFor(a, 1))
	s.RememberDigest(a, digestFor(a, 2))
	s.RememberDigest(b, digestFor(b, 3))
	got, ok := s.Digest(a)
	require.True(t, ok)
	assert.Equal(t, digestFor(a, 2), got)
	dec, err := decodeDigest(encodeDigest(digestFor(b, 3)))
	require.NoError(t, err)
	assert.Equal(t, digestFor(b, 3), dec)
	_, err = decodeDigest([]byte("short"))
	assert.Error(t, err)
}

func TestCloseSession_DropsObservations(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, quietOptions())
	gone, err := s.OpenSession("gone")
	require.NoError(t, err)
	kept, err := s.OpenSession("kept")
	require.NoError(t, err)
	// Some observations reach Badger, some are still buffered.
	require.NoError(t, s.Record(gone.ID, "/ws/a", Present("v1")))
	require.NoError(t, s.Record(kept.ID, "/ws/a", Present("v1")))
	require.NoError(t, s.Flush())
	require.NoError(t, s.Record(gone.ID, "/ws/b", Absent()))

	require.NoError(t, s.CloseSession(gone.ID))

	_, ok := s.Observation(gone.ID, "/ws/a")
	assert.False(t, ok)
	_, ok = s.Observation(gone.ID, "/ws/b")
	assert.False(t, ok)
	_, ok = s.Session(gone.ID)
	assert.False(t, ok)
	assert.ErrorIs(t, s.Record(gone.ID, "/ws/c", Absent()), ErrUnknownSession)
	assert.ErrorIs(t, s.CloseSession(gone.ID), ErrUnknownSession)
	_, ok = s.Observation(kept.ID, "/ws/a")
	assert.True(t, ok, "other sessions keep their observations")

	require.NoError(t, s.Close())
	r := openStore(t, dir, quietOptions())
	_, ok = r.Observation(gone.ID, "/ws/a")
	assert.False(t, ok, "dropped observations stay dropped after a restart")
	_, ok = r.Session(gone.ID)
	assert.False(t, ok)
	_, ok = r.Observation(kept.ID, "/ws/a")
	assert.True(t, ok)
}

func TestSessions_ListTouchAndRandomIDs(t *testing.T) {
	clock := &manualClock{now: time.Unix(1700000000, 0)}
	s := openStore(t, t.TempDir(), quietOptions().WithNow(clock.Now))
	a, err := s.OpenSession("a")
	require.NoError(t, err)
	clock.Advance(time.Second)
	b, err := s.OpenSession("")
	require.NoError(t, err)
	assert.Regexp(t, `^s-[0-9a-f]{16}$`, string(a.ID))
	assert.NotEqual(t, a.ID, b.ID)
	list := s.Sessions()
	require.Len(t, list, 2)
	assert.Equal(t, []SessionID{a.ID, b.ID}, []SessionID{list[0].ID, list[1].ID}, "oldest first")

	clock.Advance(time.Minute)
	s.Touch(a.ID)
	got, _ := s.Session(a.ID)
	assert.True(t, got.LastUsed.Equal(clock.Now()))
}

func TestCollectIdle_ClosesOnlyIdleSessions(t *testing.T) {
	clock := &manualClock{now: time.Unix(1700000000, 0)}
	s := openStore(t, t.TempDir(), quietOptions().WithNow(clock.Now).WithSessionTTL(time.Hour).WithJanitorInterval(0))
	idle, err := s.OpenSession("idle")
	require.NoError(t, err)
	busy, err := s.OpenSession("busy")
	require.NoError(t, err)
	require.NoError(t, s.Record(idle.ID, "/ws/a", Present("v1")))

	clock.Advance(50 * time.Minute)
	s.Touch(busy.ID)
	assert.Empty(t, s.CollectIdle(clock.Now()))
	clock.Advance(20 * time.Minute)

	assert.Equal(t, []SessionID{idle.ID}, s.CollectIdle(clock.Now()))
	_, ok := s.Session(idle.ID)
	assert.False(t, ok)
	_, ok = s.Observation(idle.ID, "/ws/a")
	assert.False(t, ok)
	_, ok = s.Session(busy.ID)
	assert.True(t, ok)
}

func TestJanitor_CollectsIdleSessions(t *testing.T) {
	s := openStore(t, t.TempDir(), quietOptions().WithSessionTTL(time.Millisecond).WithJanitorInterval(5*time.Millisecond))
	sess, err := s.OpenSession("idle")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, ok := s.Session(sess.ID)
		return !ok
	}, 10*time.Second, 5*time.Millisecond, "the janitor must close the idle session")
}

func TestAudit_NewestFirstLimitAndExactPath(t *testing.T) {
	s := openStore(t, t.TempDir(), quietOptions())
	for i := 0; i < 150; i++ {
		e := AuditEntry{Path: fmt.Sprintf("f%d.txt", i%3), Op: OpWrite, Detail: fmt.Sprint(i)}
		if i == 149 {
			e.Path, e.To, e.Op = "src.txt", "f0.txt", OpMove
		}
		require.NoError(t, s.AppendAudit(e))
	}
	all, err := s.Audit(AuditQuery{})
	require.NoError(t, err)
	require.Len(t, all, DefaultAuditLimit)
	assert.Equal(t, "149", all[0].Detail)
	for i := 1; i < len(all); i++ {
		assert.Greater(t, all[i-1].Seq, all[i].Seq)
	}

	f0, err := s.Audit(AuditQuery{Path: "f0.txt", Limit: 3})
	require.NoError(t, err)
	require.Len(t, f0, 3)
	assert.Equal(t, []string{"149", "147", "144"}, []string{f0[0].Detail, f0[1].Detail, f0[2].Detail})

	none, err := s.Audit(AuditQuery{Path: "f0"})
	require.NoError(t, err)
	assert.Empty(t, none, "the path filter is exact")
}

func TestObservation_RecordRejectsMalformed(t *testing.T) {
	s := openStore(t, t.TempDir(), quietOptions())
	sess, err := s.OpenSession("")
	require.NoError(t, err)
	assert.Error(t, s.Record(sess.ID, "/ws/a", Observation{Kind: ObservedPresent}))
	assert.Error(t, s.Record(sess.ID, "/ws/a", Observation{Kind: "maybe"}))
	_, ok := s.Observation(sess.ID, "/ws/a")
	assert.False(t, ok)
}

func TestCache_SmallCacheNeverServesOlderValues(t *testing.T) {
	opts := quietOptions().WithCacheEntries(64).WithFlushEntries(50).WithFlushInterval(time.Millisecond)
	s := openStore(t, t.TempDir(), opts)
	sess, err := s.OpenSession("")
	require.NoError(t, err)
	const keys, writes = 40, 300
	version := func(i int) provider.Version { return provider.Version(fmt.Sprintf("v%06d", i)) }
	var wg sync.WaitGroup
	for k := 0; k < keys; k++ {
		key := provider.Key(fmt.Sprintf("/ws/k%d", k))
		wg.Add(2)
		go func() { // the only writer of key
			defer wg.Done()
			for i := 1; i <= writes; i++ {
				assert.NoError(t, s.Record(sess.ID, key, Present(version(i))))
			}
		}()
		go func() { // a reader: what it sees never goes back in time
			defer wg.Done()
			var last provider.Version
			for i := 0; i < writes; i++ {
				obs, ok := s.Observation(sess.ID, key)
				if !ok {
					assert.Empty(t, last, "an observation vanished after being seen")
					continue
				}
				assert.GreaterOrEqual(t, obs.Version, last)
				last = obs.Version
			}
		}()
	}
	wg.Wait()
	for k := 0; k < keys; k++ {
		obs, ok := s.Observation(sess.ID, provider.Key(fmt.Sprintf("/ws/k%d", k)))
		require.True(t, ok)
		assert.Equal(t, version(writes), obs.Version)
	}
}

func TestSessions_OwnerIsPersisted(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, quietOptions())
	owned, err := s.OpenOwnedSession("agent", 65534)
	require.NoError(t, err)
	assert.Equal(t, uint32(65534), owned.Owner)
	rootOwned, err := s.OpenSession("plain")
	require.NoError(t, err)
	assert.Equal(t, uint32(0), rootOwned.Owner, "OpenSession opens a root-owned session")
	require.NoError(t, s.Close())

	r := openStore(t, dir, quietOptions())
	got, ok := r.Session(owned.ID)
	require.True(t, ok, "the session survives a restart")
	assert.Equal(t, uint32(65534), got.Owner, "the owner survives a restart")
	got, ok = r.Session(rootOwned.ID)
	require.True(t, ok)
	assert.Equal(t, uint32(0), got.Owner)
}
