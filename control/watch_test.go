package control

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

// nextEvent waits for the next event of w.
func nextEvent(t *testing.T, w *Watch) ChangeEvent {
	t.Helper()
	select {
	case ev, open := <-w.C:
		require.True(t, open, "the watch channel closed")
		return ev
	case <-time.After(15 * time.Second):
		t.Fatal("no change notification")
	}
	return ChangeEvent{}
}

func TestWatch_ReportsEachChangedFileByItsPathKindAndActor(t *testing.T) {
	env := newTestEnv(t)
	env.file(t, "d/old.txt", "one\n")
	watcher, writer := env.client(t), env.client(t)
	ctx := context.Background()
	sess, err := writer.OpenSession(ctx, "agent")
	require.NoError(t, err)
	w, err := watcher.Watch(ctx, WatchParams{Path: "d"})
	require.NoError(t, err)
	require.NotEmpty(t, w.ID)

	created, err := writer.Write(ctx, WriteParams{Path: "d/new.txt", Content: "a\n", Session: sess})
	require.NoError(t, err)
	ev := nextEvent(t, w)
	assert.Equal(t, ChangeEvent{Watch: w.ID, Seq: ev.Seq, Path: "d/new.txt", Kind: ChangeCreated, Version: created.Version,
		Actor: ev.Actor}, ev, "the changed file itself, not its directory")
	require.NotNil(t, ev.Actor)
	assert.Equal(t, policy.ChannelSocket, ev.Actor.Channel)
	assert.Equal(t, sess, ev.Actor.Session)
	assert.Equal(t, "agent", ev.Actor.SessionName)
	require.NotNil(t, ev.Actor.UID)
	assert.Equal(t, uint32(os.Getuid()), *ev.Actor.UID)
	prev := ev.Seq

	mod, err := writer.Write(ctx, WriteParams{Path: "d/new.txt", Content: "b\n", Session: sess})
	require.NoError(t, err)
	ev = nextEvent(t, w)
	assert.Equal(t, ChangeModified, ev.Kind)
	assert.Equal(t, mod.Version, ev.Version)
	assert.Greater(t, ev.Seq, prev)

	_, err = writer.Write(ctx, WriteParams{Path: "d/new.txt", Content: "b\n", Session: sess})
	require.NoError(t, err)
	assert.Equal(t, ChangeAttrib, nextEvent(t, w).Kind, "the same bytes written again: times only")

	_, err = writer.Move(ctx, MoveParams{From: "d/new.txt", To: "d/moved.txt", Session: sess})
	require.NoError(t, err)
	ev = nextEvent(t, w)
	assert.Equal(t, ChangeRenamed, ev.Kind)
	assert.Equal(t, "d/new.txt", ev.Path)
	assert.Equal(t, "d/moved.txt", ev.To)

	_, err = writer.Delete(ctx, DeleteParams{Path: "d/moved.txt", Session: sess})
	require.NoError(t, err)
	ev = nextEvent(t, w)
	assert.Equal(t, ChangeDeleted, ev.Kind)
	assert.Equal(t, "d/moved.txt", ev.Path)

	require.NoError(t, w.Close(ctx))
	for range w.C {
	}
	err = watcher.Call(ctx, MethodUnwatch, UnwatchParams{Watch: w.ID}, nil)
	var re *RPCError
	require.ErrorAs(t, err, &re, "the watch is gone on the daemon too")
	require.Equal(t, CodeInvalidParams, re.RPCCode)
}

func TestWatch_RecursiveSeesDeeperChangesNonRecursiveDoesNot(t *testing.T) {
	env := newTestEnv(t)
	env.file(t, "d/sub/deep.txt", "x\n")
	cl := env.client(t)
	ctx := context.Background()
	rec, err := cl.Watch(ctx, WatchParams{Path: "d", Recursive: true})
	require.NoError(t, err)
	flat, err := cl.Watch(ctx, WatchParams{Path: "d"})
	require.NoError(t, err)
	_, err = cl.Write(ctx, WriteParams{Path: "d/sub/new.txt", Content: "n\n"})
	require.NoError(t, err)
	_, err = cl.Write(ctx, WriteParams{Path: "d/top.txt", Content: "t\n"})
	require.NoError(t, err)
	ev := nextEvent(t, rec)
	assert.Equal(t, "d/sub/new.txt", ev.Path)
	assert.Equal(t, ChangeCreated, ev.Kind)
	assert.Equal(t, "d/top.txt", nextEvent(t, rec).Path)
	assert.Equal(t, "d/top.txt", nextEvent(t, flat).Path, "the deeper change is not the flat watch's")
}

func TestWatch_CoalescesOnePathOfOneActorNeverARename(t *testing.T) {
	env := newTestEnv(t, func(c *testConfig) { c.Svc.WatchWindow = 3 * time.Second })
	cl := env.client(t)
	ctx := context.Background()
	w, err := cl.Watch(ctx, WatchParams{Path: "."})
	require.NoError(t, err)
	var last WriteResult
	for i := range 4 {
		out, err := cl.Write(ctx, WriteParams{Path: "c.txt", Content: fmt.Sprintf("%d\n", i)})
		require.NoError(t, err)
		last = *out
	}
	_, err = cl.Move(ctx, MoveParams{From: "c.txt", To: "r.txt"})
	require.NoError(t, err)
	_, err = cl.Write(ctx, WriteParams{Path: "c.txt", Content: "again\n"})
	require.NoError(t, err)
	lastSeq := env.store.LastSeq()

	ev := nextEvent(t, w)
	assert.Equal(t, ChangeCreated, ev.Kind, "created, then written: created")
	assert.Equal(t, "c.txt", ev.Path)
	assert.Equal(t, last.Version, ev.Version, "the last version")
	ren := nextEvent(t, w)
	assert.Equal(t, ChangeRenamed, ren.Kind)
	assert.Greater(t, ren.Seq, ev.Seq)
	again := nextEvent(t, w)
	assert.Equal(t, ChangeCreated, again.Kind, "a change after the rename is not merged across it")
	assert.Equal(t, lastSeq, again.Seq)
}

func TestWatch_SinceReplaysThenGoesLiveAcrossAReconnect(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	first := env.client(t)
	w, err := first.Watch(ctx, WatchParams{Path: ".", Recursive: true})
	require.NoError(t, err)
	_, err = first.Write(ctx, WriteParams{Path: "a.txt", Content: "a\n"})
	require.NoError(t, err)
	seen := nextEvent(t, w).Seq
	require.NoError(t, first.Close())

	writer := env.client(t)
	for _, p := range []string{"b.txt", "c.txt", "d.txt"} {
		_, err = writer.Write(ctx, WriteParams{Path: p, Content: p})
		require.NoError(t, err)
	}
	second := env.client(t)
	w2, err := second.Watch(ctx, WatchParams{Path: ".", Recursive: true, Since: &seen})
	require.NoError(t, err)
	assert.Equal(t, seen, w2.Seq)
	_, err = writer.Write(ctx, WriteParams{Path: "e.txt", Content: "e"})
	require.NoError(t, err)
	var paths []string
	prev := seen
	for len(paths) < 4 {
		ev := nextEvent(t, w2)
		require.Greater(t, ev.Seq, prev, "in order, no duplicate")
		prev = ev.Seq
		paths = append(paths, ev.Path)
	}
	assert.Equal(t, []string{"b.txt", "c.txt", "d.txt", "e.txt"}, paths, "the replay, then live")
}

func TestWatch_SinceTheDaemonCannotVouchForIsChangesLostWithResume(t *testing.T) {
	env := newTestEnv(t)
	cl := env.client(t)
	ctx := context.Background()
	zero := uint64(0)
	_, err := cl.Watch(ctx, WatchParams{Path: ".", Since: &zero})
	re := requireFS(t, err, provider.CodeChangesLost)
	assert.Equal(t, env.store.LastSeq(), re.Resume, "data.resume names the seq to resubscribe from")

	since := env.store.LastSeq()
	for i := range 5 {
		_, err = cl.Write(ctx, WriteParams{Path: fmt.Sprintf("f%d", i), Content: "x"})
		require.NoError(t, err)
	}
	_, err = env.store.PruneAudit(policy.Retention{MaxEntries: 2}, time.Now())
	require.NoError(t, err)
	_, err = cl.Watch(ctx, WatchParams{Path: ".", Since: &since})
	re = requireFS(t, err, provider.CodeChangesLost)
	assert.Contains(t, re.Message, fmt.Sprint(re.Resume))
	resume := re.Resume
	w, err := cl.Watch(ctx, WatchParams{Path: ".", Since: &resume})
	require.NoError(t, err, "the seq it returned is accepted")
	require.NoError(t, w.Close(ctx))

	future := env.store.LastSeq() + 10
	_, err = cl.Watch(ctx, WatchParams{Path: ".", Since: &future})
	requireFS(t, err, provider.CodeInvalidArgument)
}

func TestWatch_ASubscriberThatFallsBehindGetsOneLostAndTheWatchEnds(t *testing.T) {
	env := newTestEnv(t, func(c *testConfig) { c.Svc.WatchBuffer = 16 })
	rc := env.raw(t)
	r := rc.call(t, `{"jsonrpc":"2.0","id":1,"method":"fs.watch","params":{"path":"."}}`)
	require.Nil(t, r.Error)
	var res WatchResult
	require.NoError(t, json.Unmarshal(r.Result, &res))
	// The peer reads nothing while 5,000 changes are made: the socket, the
	// window and the feed's buffer fill up.
	const total = 5000
	for i := range total {
		require.NoError(t, env.store.AppendAudit(policy.AuditEntry{Path: fmt.Sprintf("f%d", i), Op: policy.OpCreate,
			Actor: policy.Actor{Channel: policy.ChannelExternal}}))
	}
	var lost, changes int
	prev := res.Seq
	for lost == 0 {
		line := rc.recv(t)
		require.Equal(t, NotifyChanged, line.Method)
		var n struct{ Params ChangeEvent }
		require.NoError(t, json.Unmarshal(mustRawParams(t, line), &n.Params))
		if n.Params.Kind == ChangeLost {
			lost++
			assert.GreaterOrEqual(t, n.Params.Seq, prev, "the lost event names a seq to resume from")
			continue
		}
		require.Greater(t, n.Params.Seq, prev)
		prev = n.Params.Seq
		changes++
	}
	assert.Less(t, changes, total, "it fell behind")
	// The watch is over: the next line is the answer to this call, and
	// unwatching it says it is unknown.
	r = rc.call(t, `{"jsonrpc":"2.0","id":2,"method":"fs.unwatch","params":{"watch":"`+res.Watch+`"}}`)
	require.NotNil(t, r.Error, "no further notification; the watch ended")
	assert.Equal(t, CodeInvalidParams, r.Error.Code)
}

func TestWatch_MissingPathNeedsItsDirectory(t *testing.T) {
	env := newTestEnv(t)
	cl := env.client(t)
	ctx := context.Background()
	_, err := cl.Watch(ctx, WatchParams{Path: "no/such/dir/file"})
	require.Error(t, err)
	require.NotEmpty(t, provider.CodeOf(err), "a filesystem error: %v", err)

	w, err := cl.Watch(ctx, WatchParams{Path: "later.txt"})
	require.NoError(t, err, "a file that does not exist yet")
	require.NoError(t, os.WriteFile(filepath.Join(env.root, "other.txt"), nil, 0o644))
	_, err = cl.Write(ctx, WriteParams{Path: "later.txt", Content: "x"})
	require.NoError(t, err)
	ev := nextEvent(t, w)
	assert.Equal(t, ChangeCreated, ev.Kind)
	assert.Equal(t, "later.txt", ev.Path)
}

// mustRawParams returns a notification line's params.
func mustRawParams(t *testing.T, r rawResponse) json.RawMessage {
	t.Helper()
	require.NotEmpty(t, r.Params, "a notification with params")
	return r.Params
}

func TestWatch_ClientThatDoesNotReadGetsALostEventNotASilentDrop(t *testing.T) {
	env := newTestEnv(t)
	cl := env.client(t)
	ctx := context.Background()
	w, err := cl.Watch(ctx, WatchParams{Path: "."})
	require.NoError(t, err)
	for i := range watchBuffer + 500 {
		require.NoError(t, env.store.AppendAudit(policy.AuditEntry{Path: fmt.Sprintf("f%d", i), Op: policy.OpCreate,
			Actor: policy.Actor{Channel: policy.ChannelExternal}}))
	}
	require.Eventually(t, func() bool { return len(w.C) == watchBuffer+1 }, 20*time.Second, 10*time.Millisecond)
	var evs []ChangeEvent
	for ev := range w.C {
		evs = append(evs, ev)
	}
	require.Len(t, evs, watchBuffer+1, "the buffer, then the lost event; C is closed")
	last := evs[len(evs)-1]
	assert.Equal(t, ChangeLost, last.Kind)
	assert.Equal(t, evs[len(evs)-2].Seq, last.Seq, "resume after the last change delivered")
	require.Eventually(t, func() bool { return env.svc.Watches() == 0 }, 10*time.Second, 10*time.Millisecond,
		"the daemon's watch was stopped too")
}

func TestWatch_AnotherUIDIsToldOnlyOfDirectoriesItMayList(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the fake peer uid needs a root daemon")
	}
	q := &peerQueue{}
	env := newTestEnv(t, withPeers(q))
	require.NoError(t, os.Chmod(env.root, 0o755), "the peer may enter the workspace")
	env.file(t, "open/seed", "")
	env.file(t, "closed/seed", "")
	require.NoError(t, os.Chmod(filepath.Join(env.root, "closed"), 0o700))
	ctx := context.Background()
	owner := env.client(t)
	_, err := owner.Status(ctx) // served: it took the real uid before the peer dials
	require.NoError(t, err)
	peer := env.clientAs(t, q, otherUID)
	_, err = peer.Watch(ctx, WatchParams{Path: "closed"})
	requireDenied(t, err, "a directory it may not list cannot be watched")
	w, err := peer.Watch(ctx, WatchParams{Path: ".", Recursive: true})
	require.NoError(t, err)

	_, err = owner.Write(ctx, WriteParams{Path: "closed/secret.txt", Content: "s"})
	require.NoError(t, err)
	_, err = owner.Write(ctx, WriteParams{Path: "open/a.txt", Content: "a"})
	require.NoError(t, err)
	ev := nextEvent(t, w)
	assert.Equal(t, "open/a.txt", ev.Path, "nothing about the directory it may not list")
	assert.Equal(t, &ChangeActor{Channel: policy.ChannelSocket}, ev.Actor, "root's change: the channel only")

	_, err = owner.Move(ctx, MoveParams{From: "closed/secret.txt", To: "open/out.txt"})
	require.NoError(t, err)
	ev = nextEvent(t, w)
	assert.Equal(t, ChangeCreated, ev.Kind, "renamed out of a directory it may not list: a new file")
	assert.Equal(t, "open/out.txt", ev.Path)
	assert.Empty(t, ev.To)

	_, err = owner.Move(ctx, MoveParams{From: "open/a.txt", To: "closed/a.txt"})
	require.NoError(t, err)
	ev = nextEvent(t, w)
	assert.Equal(t, ChangeDeleted, ev.Kind, "renamed into a directory it may not list: gone")
	assert.Equal(t, "open/a.txt", ev.Path)
	assert.Empty(t, ev.To)
}

func TestWatch_FollowsTheWorkspaceNotABranchUntilItsCommit(t *testing.T) {
	env := newBranchEnv(t)
	env.file(t, "a.txt", "a0\n")
	ctx := context.Background()
	c := env.client(t)
	_, err := c.BranchCreate(ctx, BranchCreateParams{Name: "s"})
	require.NoError(t, err)
	w, err := c.Watch(ctx, WatchParams{Path: ".", Recursive: true})
	require.NoError(t, err)
	sess, err := c.OpenSessionWith(ctx, SessionOpenParams{Name: "agent", Branch: "s"})
	require.NoError(t, err)
	_, err = c.Read(ctx, ReadParams{Path: "a.txt", Session: sess})
	require.NoError(t, err)
	_, err = c.Write(ctx, WriteParams{Path: "a.txt", Content: "a1\n", Session: sess})
	require.NoError(t, err)
	_, err = c.Write(ctx, WriteParams{Path: "b.txt", Content: "b\n", Session: sess})
	require.NoError(t, err)
	_, err = c.Write(ctx, WriteParams{Path: "z.txt", Content: "in the workspace\n"})
	require.NoError(t, err)
	assert.Equal(t, "z.txt", nextEvent(t, w).Path, "nothing of the branch's writes")
	_, err = c.BranchCommit(ctx, BranchCommitParams{Name: "s", Session: string(sess)})
	require.NoError(t, err)
	got := map[string]ChangeEvent{}
	for len(got) < 2 {
		ev := nextEvent(t, w)
		got[ev.Path] = ev
	}
	assert.Equal(t, ChangeModified, got["a.txt"].Kind)
	assert.Contains(t, []ChangeKind{ChangeCreated, ChangeModified}, got["b.txt"].Kind)
	lg, err := c.Log(ctx, LogParams{Path: "a.txt", Limit: 5})
	require.NoError(t, err)
	require.NotEmpty(t, lg.Entries)
	assert.Equal(t, "branch s commit", lg.Entries[0].Detail)
	assert.Equal(t, lg.Entries[0].Seq, got["a.txt"].Seq, "the commit's entry, not the branch write's")
}

// TestWatch_ReplayMergesOnlyWhatTheLiveStreamMerges: a create and a delete
// of one file 300 ms apart are two events live; replayed with since they
// arrive together but must stay two (merging is by the changes' times,
// within the window of 30 ms).
func TestWatch_ReplayMergesOnlyWhatTheLiveStreamMerges(t *testing.T) {
	env := newTestEnv(t)
	ctx := context.Background()
	c := env.client(t)
	live, err := c.Watch(ctx, WatchParams{Path: ".", Recursive: true})
	require.NoError(t, err)
	sess, err := c.OpenSession(ctx, "agent")
	require.NoError(t, err)
	_, err = c.Write(ctx, WriteParams{Path: "a.txt", Content: "a\n", Session: sess})
	require.NoError(t, err)
	time.Sleep(300 * time.Millisecond)
	_, err = c.Delete(ctx, DeleteParams{Path: "a.txt", Session: sess})
	require.NoError(t, err)
	var liveKinds []ChangeKind
	for range 2 {
		liveKinds = append(liveKinds, nextEvent(t, live).Kind)
	}
	assert.Equal(t, []ChangeKind{ChangeCreated, ChangeDeleted}, liveKinds)

	since := live.Seq
	replay, err := env.client(t).Watch(ctx, WatchParams{Path: ".", Recursive: true, Since: &since})
	require.NoError(t, err)
	var replayed []ChangeKind
	for range 2 {
		replayed = append(replayed, nextEvent(t, replay).Kind)
	}
	assert.Equal(t, liveKinds, replayed, "the replay gives the live stream's events")
}
