package policy

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

// externalEntries returns the audit entries of channel external.
func externalEntries(t *testing.T, e *Engine) []AuditEntry {
	t.Helper()
	all, err := e.Store().Audit(AuditQuery{Match: func(a AuditEntry) bool { return a.Actor.Channel == ChannelExternal }})
	require.NoError(t, err)
	return all
}

func TestRecordExternal_IsAuditedAsExternalAndObserved(t *testing.T) {
	e, fs := newTestEngine(t)
	f := fs.target("f.txt")
	var seen []Event
	e.AddObserver(func(_ context.Context, ev Event) error { seen = append(seen, ev); return nil })

	rec, err := e.RecordExternal(context.Background(), ExternalChange{Op: OpWrite, Target: f, After: "v1"})
	require.NoError(t, err)
	assert.True(t, rec)
	entries := externalEntries(t, e)
	require.Len(t, entries, 1)
	assert.Equal(t, "f.txt", entries[0].Path)
	assert.Equal(t, OpWrite, entries[0].Op)
	assert.Equal(t, provider.Version("v1"), entries[0].After)
	require.Len(t, seen, 1, "observers (the FUSE invalidator) learn of it")
	assert.Equal(t, ChannelExternal, seen[0].Actor.Channel)
}

func TestRecordExternal_TheDaemonsOwnSocketChangeIsNotReportedAgain(t *testing.T) {
	e, fs := newTestEngine(t)
	a := openSession(t, e.Store())
	ctx := context.Background()
	f := fs.target("f.txt")
	out, err := e.Write(ctx, a, f, "new\n", Guard{Unconditional: true})
	require.NoError(t, err)

	// The watcher sees the same publish.
	rec, err := e.RecordExternal(ctx, ExternalChange{Op: OpWrite, Target: f, After: out.Version})
	require.NoError(t, err)
	assert.False(t, rec)
	// A later out-of-band change of other bytes is someone else's.
	rec, err = e.RecordExternal(ctx, ExternalChange{Op: OpWrite, Target: f, After: "other"})
	require.NoError(t, err)
	assert.True(t, rec)
	assert.Len(t, externalEntries(t, e), 1)
}

func TestRecordExternal_OwnDeleteAndRenameAreRecognised(t *testing.T) {
	e, fs := newTestEngine(t)
	ctx := context.Background()
	src, dst, gone := fs.target("src.txt"), fs.target("dst.txt"), fs.target("gone.txt")
	fs.put(src, "s\n")
	fs.put(gone, "g\n")
	require.NoError(t, e.RecordMount(ctx, Actor{Channel: ChannelMount}, OpRename, src, "", "", &dst))
	require.NoError(t, e.RecordMount(ctx, Actor{Channel: ChannelMount}, OpUnlink, gone, "", "", nil))

	for _, c := range []ExternalChange{
		{Op: OpRename, Target: src, To: &dst},
		{Op: OpDelete, Target: gone},
	} {
		rec, err := e.RecordExternal(ctx, c)
		require.NoError(t, err)
		assert.False(t, rec, "%s %s", c.Op, c.Target.DisplayPath)
	}
	// The own delete does not explain a re-creation.
	rec, err := e.RecordExternal(ctx, ExternalChange{Op: OpCreate, Target: gone, After: "g2"})
	require.NoError(t, err)
	assert.True(t, rec)
}

func TestRecordExternal_OwnChangeExplainsOnlyForAWhile(t *testing.T) {
	clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
	s := openStore(t, t.TempDir(), quietOptions().WithNow(clock.Now))
	fs := newFakeFS()
	e := NewEngine(s, fs)
	ctx := context.Background()
	f := fs.target("f.txt")
	require.NoError(t, e.RecordMount(ctx, Actor{Channel: ChannelMount}, OpSetattr, f, "v", "v", nil))
	clock.Advance(ownTTL + time.Second)
	rec, err := e.RecordExternal(ctx, ExternalChange{Op: OpSetattr, Target: f, After: "v"})
	require.NoError(t, err)
	assert.True(t, rec, "a chmod long after the daemon's own is someone else's")
}

func TestRecordExternal_AnAnnouncedSocketChangeThatCommitsIsNotExternal(t *testing.T) {
	e, fs := newTestEngine(t)
	f := fs.target("f.txt")
	ctx := context.Background()
	id := e.own.begin(f) // a socket mutation between its guard and its commit
	var wg sync.WaitGroup
	var rec bool
	var err error
	wg.Add(1)
	go func() {
		defer wg.Done()
		rec, err = e.RecordExternal(ctx, ExternalChange{Op: OpWrite, Target: f, After: "v9"})
	}()
	e.own.commit(mutation{actor: Actor{Channel: ChannelSocket}, op: OpWrite, target: f, after: "v9", obs: Present("v9"), own: id})
	wg.Wait()
	require.NoError(t, err)
	assert.False(t, rec)
	assert.Empty(t, externalEntries(t, e))
}

func TestRecordExternal_TheTempFileOfAnOwnPublishIsNotExternal(t *testing.T) {
	e, fs := newTestEngine(t)
	ctx := context.Background()
	f, tmp := fs.target("d/f.txt"), fs.target("d/.f.txt.tmp")
	id := e.own.begin(f)
	e.own.commit(mutation{actor: Actor{Channel: ChannelSocket}, op: OpWrite, target: f, after: "v1", obs: Present("v1"), own: id})
	tmp2 := fs.target("d/.f.txt.dsh-0123456789abcdef.tmp")
	for _, c := range []ExternalChange{
		{Op: OpCreate, Target: tmp, After: "v1"},
		{Op: OpRename, Target: tmp, To: &f, After: "v1"},
		{Op: OpCreate, Target: tmp2},
		{Op: OpDelete, Target: tmp2},
	} {
		rec, err := e.RecordExternal(ctx, c)
		require.NoError(t, err)
		assert.False(t, rec, "%s %s", c.Op, c.Target.DisplayPath)
	}
	other := fs.target("d/.g.txt.tmp")
	rec, err := e.RecordExternal(ctx, ExternalChange{Op: OpCreate, Target: other})
	require.NoError(t, err)
	assert.True(t, rec, "a temp name of a file the daemon did not touch is someone else's")
}

func TestRecordExternal_ADirectoryMadeForAnOwnPublishIsNotExternal(t *testing.T) {
	e, fs := newTestEngine(t)
	ctx := context.Background()
	f := fs.target("made/for/f.txt")
	id := e.own.begin(f)
	e.own.commit(mutation{actor: Actor{Channel: ChannelSocket}, op: OpWrite, target: f, after: "v1", obs: Present("v1"), own: id})
	rec, err := e.RecordExternal(ctx, ExternalChange{Op: OpCreate, Target: fs.target("made"), Dir: true})
	require.NoError(t, err)
	assert.False(t, rec)
	rec, err = e.RecordExternal(ctx, ExternalChange{Op: OpCreate, Target: fs.target("other"), Dir: true})
	require.NoError(t, err)
	assert.True(t, rec)
}

func TestRecordExternal_AFileHeldOpenForWritingByTheMountIsNotExternal(t *testing.T) {
	e, fs := newTestEngine(t)
	ctx := context.Background()
	f := fs.target("f.txt")
	release := e.HoldOwn(f)
	rec, err := e.RecordExternal(ctx, ExternalChange{Op: OpWrite, Target: f, After: "half-written"})
	require.NoError(t, err)
	assert.False(t, rec, "the mount records its writes at flush")
	require.NoError(t, e.RecordMount(ctx, Actor{Channel: ChannelMount}, OpWrite, f, "", "done", nil))
	release()
	release() // idempotent
	rec, err = e.RecordExternal(ctx, ExternalChange{Op: OpWrite, Target: f, After: "done"})
	require.NoError(t, err)
	assert.False(t, rec, "a late event of the recorded write")
	rec, err = e.RecordExternal(ctx, ExternalChange{Op: OpWrite, Target: f, After: "someone else"})
	require.NoError(t, err)
	assert.True(t, rec)
}

func TestRecordExternal_AMountOperationIsOwnFromItsSyscallToItsRecord(t *testing.T) {
	e, fs := newTestEngine(t)
	ctx := context.Background()
	f, g := fs.target("f.txt"), fs.target("g.txt")
	// The watcher may see the create before the mount has recorded it.
	done := e.Changing(f, g)
	rec, err := e.RecordExternal(ctx, ExternalChange{Op: OpCreate, Target: f, After: "empty"})
	require.NoError(t, err)
	assert.False(t, rec, "seen between the syscall and its record")
	require.NoError(t, e.RecordMount(ctx, Actor{Channel: ChannelMount}, OpCreate, f, "", "empty", nil))
	done()
	done() // idempotent
	rec, err = e.RecordExternal(ctx, ExternalChange{Op: OpCreate, Target: f, After: "empty"})
	require.NoError(t, err)
	assert.False(t, rec, "a late event of the recorded create")
	// g's operation failed: nothing recorded, so nothing of g is explained.
	rec, err = e.RecordExternal(ctx, ExternalChange{Op: OpCreate, Target: g, After: "someone else"})
	require.NoError(t, err)
	assert.True(t, rec, "an operation that recorded nothing explains nothing after it ended")
}

func TestRecordExternal_ARefusedSocketChangeEndsItsAnnouncement(t *testing.T) {
	e, fs := newTestEngine(t)
	a := openSession(t, e.Store())
	ctx := context.Background()
	f := fs.target("f.txt")
	fs.put(f, "old\n")
	// A guard the provider refuses under its lock (after prepare).
	_, err := e.Write(ctx, a, f, "new\n", Guard{Write: &provider.WriteIntent{Kind: provider.ReplaceIfVersion, Version: "not-it"}})
	require.Error(t, err)

	done := make(chan bool, 1)
	go func() {
		rec, rerr := e.RecordExternal(ctx, ExternalChange{Op: OpWrite, Target: f, After: "someone else"})
		assert.NoError(t, rerr)
		done <- rec
	}()
	select {
	case rec := <-done:
		assert.True(t, rec, "the refused change wrote nothing: this one is someone else's")
	case <-time.After(ownWait / 2):
		t.Fatal("RecordExternal waited for an announcement that its refused change never ended")
	}
}

func TestRecordExternal_OnlyTheAnnouncementsOpenWhenTheEventIsCheckedAreWaitedFor(t *testing.T) {
	clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
	s := openStore(t, t.TempDir(), quietOptions().WithNow(clock.Now))
	fs := newFakeFS()
	e := NewEngine(s, fs)
	f := fs.target("f.txt")
	first := e.own.begin(f)
	second := e.own.begin(f)
	// Another change of the same path fails: that must not count as the end
	// of the first one.
	e.own.abort(second, f)
	e.own.mu.Lock()
	entry := e.own.paths[f.DisplayPath]
	until, open := entry.waitFor([]uint64{first, second}, clock.Now())
	e.own.mu.Unlock()
	assert.True(t, open, "the first announcement is still open")
	assert.Equal(t, clock.Now().Add(ownWait), until)
	e.own.commit(mutation{actor: Actor{Channel: ChannelSocket}, op: OpWrite, target: f, after: "v1", obs: Present("v1"), own: first})
	e.own.mu.Lock()
	_, open = entry.waitFor([]uint64{first, second}, clock.Now())
	e.own.mu.Unlock()
	assert.False(t, open)
}

func TestRecordExternal_AnOwnChangeExplainsItsEventsHoweverLateTheWatcherIs(t *testing.T) {
	clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
	s := openStore(t, t.TempDir(), quietOptions().WithNow(clock.Now))
	fs := newFakeFS()
	e := NewEngine(s, fs)
	ctx := context.Background()
	f := fs.target("f.txt")
	drained := clock.Now() // the watcher read its queue empty here
	clock.Advance(time.Millisecond)
	require.NoError(t, e.RecordMount(ctx, Actor{Channel: ChannelMount}, OpWrite, f, "", "v", nil))
	clock.Advance(10 * ownTTL) // the watcher lags far behind

	rec, err := e.RecordExternal(ctx, ExternalChange{Op: OpWrite, Target: f, After: "v", Since: drained})
	require.NoError(t, err)
	assert.False(t, rec, "the write completed after the watcher's horizon: its events are in this batch")

	// Once the watcher has read past the write, a change is someone else's.
	rec, err = e.RecordExternal(ctx, ExternalChange{Op: OpWrite, Target: f, After: "v", Since: clock.Now()})
	require.NoError(t, err)
	assert.True(t, rec, "a change the watcher saw after it had read past the daemon's write")
}

func TestRecordExternal_AHoldCoversEventsUntilItIsReleased(t *testing.T) {
	clock := &manualClock{now: time.Unix(1_700_000_000, 0)}
	s := openStore(t, t.TempDir(), quietOptions().WithNow(clock.Now))
	fs := newFakeFS()
	e := NewEngine(s, fs)
	ctx := context.Background()
	f := fs.target("f.txt")
	release := e.HoldOwn(f)
	require.NoError(t, e.RecordMount(ctx, Actor{Channel: ChannelMount}, OpWrite, f, "", "v", nil))
	drained := clock.Now()
	clock.Advance(10 * ownTTL) // the descriptor stays open long after the record
	release()
	// The close's own event (IN_CLOSE_WRITE) reaches a watcher that had
	// read its queue empty just after the record.
	rec, err := e.RecordExternal(ctx, ExternalChange{Op: OpWrite, Target: f, After: "v", Since: drained.Add(time.Millisecond)})
	require.NoError(t, err)
	assert.False(t, rec, "events up to the release are the mount's own")
}

func TestRecordExternal_AnyRecentOwnResultExplainsNotOnlyTheLatest(t *testing.T) {
	e, fs := newTestEngine(t)
	ctx := context.Background()
	f := fs.target("f.txt")
	since := time.Now()
	mount := Actor{Channel: ChannelMount}
	require.NoError(t, e.RecordMount(ctx, mount, OpWrite, f, "", "v1", nil))
	// The watcher classified the file holding v1; before it asks, the
	// daemon wrote v2.
	require.NoError(t, e.RecordMount(ctx, mount, OpWrite, f, "v1", "v2", nil))
	for _, v := range []provider.Version{"v1", "v2"} {
		rec, err := e.RecordExternal(ctx, ExternalChange{Op: OpWrite, Target: f, After: v, Since: since})
		require.NoError(t, err)
		assert.False(t, rec, "%s is a state the daemon left", v)
	}
	rec, err := e.RecordExternal(ctx, ExternalChange{Op: OpWrite, Target: f, After: "v3", Since: since})
	require.NoError(t, err)
	assert.True(t, rec, "bytes the daemon never recorded")
}

func TestRecordExternal_AnAnnouncedChangeIsEndedByItsRecord(t *testing.T) {
	e, fs := newTestEngine(t)
	ctx := context.Background()
	f := fs.target("f.txt")
	e.Announce(ctx, f) // a branch commit renaming a staged file into place
	assert.Equal(t, []string{"f.txt"}, e.ChangesInProgress())
	require.NoError(t, e.RecordApplied(ctx, AppliedChange{Actor: Actor{Channel: ChannelSocket}, Op: OpWrite, Target: f, After: "v1"}))
	assert.Empty(t, e.ChangesInProgress(), "the record ends the announcement")
}
