package service

import (
	"testing"
	"time"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWatch_ScopeOfFileDirectoryAndRecursiveWatches(t *testing.T) {
	cases := []struct {
		root      string
		recursive bool
		in, out   []string
	}{
		{root: "f.txt", in: []string{"f.txt"}, out: []string{"f.txt.bak", "g.txt", "d/f.txt"}},
		{root: "d", in: []string{"d", "d/a", "d/.x"}, out: []string{"d/s/a", "dd/a", "e"}},
		{root: "d", recursive: true, in: []string{"d", "d/a", "d/s/t/a"}, out: []string{"dd/a", "e"}},
		{root: ".", in: []string{"a", ".git"}, out: []string{"d/a"}},
		{root: ".", recursive: true, in: []string{"a", "d/s/a"}},
	}
	for _, c := range cases {
		s := watchScope{root: c.root, recursive: c.recursive}
		for _, p := range c.in {
			assert.True(t, s.covers(p), "%+v covers %s", c, p)
		}
		for _, p := range c.out {
			assert.False(t, s.covers(p), "%+v does not cover %s", c, p)
		}
	}
}

func TestWatch_MergeKinds(t *testing.T) {
	cases := []struct{ prev, next, want ChangeKind }{
		{ChangeCreated, ChangeModified, ChangeCreated},
		{ChangeCreated, ChangeAttrib, ChangeCreated},
		{ChangeCreated, ChangeDeleted, ChangeDeleted},
		{ChangeModified, ChangeAttrib, ChangeModified},
		{ChangeAttrib, ChangeModified, ChangeModified},
		{ChangeDeleted, ChangeCreated, ChangeCreated},
		{ChangeModified, ChangeDeleted, ChangeDeleted},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, mergeKinds(c.prev, c.next), "%s then %s", c.prev, c.next)
	}
}

func TestWatch_AnotherUIDSeesOnlyTheChannelOfOthersChanges(t *testing.T) {
	s, _ := newTestService(t)
	sess, err := s.store.OpenOwnedSession("theirs", 4242)
	require.NoError(t, err)
	other := policy.AuditEntry{Seq: 9, Path: "f", Op: policy.OpWrite, Actor: policy.Actor{Session: sess.ID, PID: 77, UID: 4242, Channel: policy.ChannelMount}}
	own := policy.AuditEntry{Seq: 10, Path: "f", Op: policy.OpWrite, Actor: policy.Actor{PID: 78, UID: 1000, Channel: policy.ChannelMount}}
	peer := &watchState{id: "w1", scope: watchScope{root: "."}, peer: 1000}
	ev, ok := s.eventFor(peer, other)
	require.True(t, ok)
	assert.Equal(t, &ChangeActor{Channel: policy.ChannelMount}, ev.Actor, "no session, pid or uid of another uid")
	ev, _ = s.eventFor(peer, own)
	require.NotNil(t, ev.Actor.UID)
	assert.Equal(t, int32(78), ev.Actor.PID, "its own changes in full")
	admin := &watchState{id: "w2", scope: watchScope{root: "."}, peer: 0, full: true}
	ev, _ = s.eventFor(admin, other)
	assert.Equal(t, "theirs", ev.Actor.SessionName)
	assert.Equal(t, int32(77), ev.Actor.PID)
}

func TestWatch_ChangeOfEveryOp(t *testing.T) {
	cases := []struct {
		e    policy.AuditEntry
		want ChangeEvent
	}{
		{policy.AuditEntry{Op: policy.OpCreate, Path: "a", After: "v"}, ChangeEvent{Kind: ChangeCreated, Path: "a", Version: "v"}},
		{policy.AuditEntry{Op: policy.OpLink, Path: "a"}, ChangeEvent{Kind: ChangeCreated, Path: "a"}},
		{policy.AuditEntry{Op: policy.OpWrite, Path: "a", After: "v", Detail: "create"}, ChangeEvent{Kind: ChangeCreated, Path: "a", Version: "v"}},
		{policy.AuditEntry{Op: policy.OpWrite, Path: "a", Before: "u", After: "v"}, ChangeEvent{Kind: ChangeModified, Path: "a", Version: "v"}},
		{policy.AuditEntry{Op: policy.OpWrite, Path: "a"}, ChangeEvent{Kind: ChangeModified, Path: "a"}},
		{policy.AuditEntry{Op: policy.OpWrite, Path: "a", Before: "v", After: "v"}, ChangeEvent{Kind: ChangeAttrib, Path: "a", Version: "v"}},
		{policy.AuditEntry{Op: policy.OpEdit, Path: "a", Before: "u", After: "v"}, ChangeEvent{Kind: ChangeModified, Path: "a", Version: "v"}},
		{policy.AuditEntry{Op: policy.OpPatch, Path: "a", Before: "u", After: "v"}, ChangeEvent{Kind: ChangeModified, Path: "a", Version: "v"}},
		{policy.AuditEntry{Op: policy.OpTruncate, Path: "a"}, ChangeEvent{Kind: ChangeModified, Path: "a"}},
		{policy.AuditEntry{Op: policy.OpSetattr, Path: "a", Before: "v", After: "v"}, ChangeEvent{Kind: ChangeAttrib, Path: "a", Version: "v"}},
		{policy.AuditEntry{Op: policy.OpDelete, Path: "a", Before: "v"}, ChangeEvent{Kind: ChangeDeleted, Path: "a"}},
		{policy.AuditEntry{Op: policy.OpUnlink, Path: "a"}, ChangeEvent{Kind: ChangeDeleted, Path: "a"}},
		{policy.AuditEntry{Op: policy.OpRename, Path: "a", To: "b", After: "v"}, ChangeEvent{Kind: ChangeRenamed, Path: "a", To: "b", Version: "v"}},
		{policy.AuditEntry{Op: policy.OpMove, Path: "a", To: "b", After: "v"}, ChangeEvent{Kind: ChangeRenamed, Path: "a", To: "b", Version: "v"}},
		{policy.AuditEntry{Op: policy.OpMove, Path: "a", To: "b", After: "v", Detail: "source not removed: FS_IO_ERROR: x"}, ChangeEvent{Kind: ChangeCreated, Path: "b", Version: "v"}},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, changeOf(c.e), "%s %s", c.e.Op, c.e.Detail)
	}
}

func TestCoalescer_MergesWithinTheWindowByTheChangesTimes(t *testing.T) {
	t0 := time.Now()
	a := &ChangeActor{Session: "s"}
	co := coalescer{window: 30 * time.Millisecond}
	co.add(ChangeEvent{Seq: 1, Path: "f", Kind: ChangeCreated, Actor: a, at: t0})
	co.add(ChangeEvent{Seq: 2, Path: "f", Kind: ChangeModified, Actor: a, at: t0.Add(10 * time.Millisecond)})
	co.add(ChangeEvent{Seq: 3, Path: "f", Kind: ChangeDeleted, Actor: a, at: t0.Add(300 * time.Millisecond)})
	got := co.take()
	require.Len(t, got, 2, "%+v", got)
	assert.Equal(t, ChangeCreated, got[0].Kind)
	assert.Equal(t, uint64(2), got[0].Seq)
	assert.Equal(t, ChangeDeleted, got[1].Kind)
}
