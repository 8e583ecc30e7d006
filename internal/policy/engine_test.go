package policy

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/patch"
)

func TestRead_RecordsPresentAtStatVersion(t *testing.T) {
	ctx := context.Background()
	e, ffs := newTestEngine(t)
	a := openSession(t, e.Store())
	f := ffs.target("f.txt")
	v := ffs.put(f, "hello\n")

	text, info, err := e.Read(ctx, a, f)
	require.NoError(t, err)
	assert.Equal(t, "hello\n", text)
	assert.Equal(t, v, info.Version)
	obs, ok := e.Store().Observation(a.Session, f.Key)
	require.True(t, ok)
	assert.Equal(t, Present(v), obs)
}

func TestRead_MissRecordsAbsentThenNotFound(t *testing.T) {
	ctx := context.Background()
	e, ffs := newTestEngine(t)
	a := openSession(t, e.Store())
	f := ffs.target("gone.txt")

	_, _, err := e.Read(ctx, a, f)
	require.ErrorIs(t, err, provider.ErrNotFound)
	obs, ok := e.Store().Observation(a.Session, f.Key)
	require.True(t, ok)
	assert.Equal(t, Absent(), obs)

	// Absent authorizes a guarded create, never an edit.
	_, err = e.Edit(ctx, a, f, provider.EditRequest{OldString: "a", NewString: "b"}, Guard{})
	assert.Equal(t, provider.CodeNotFound, provider.CodeOf(err))
	out, err := e.Write(ctx, a, f, "new\n", Guard{})
	require.NoError(t, err)
	assert.Equal(t, provider.OpCreate, out.Operation)
}

// TestStat_RecordsNothing: an observation comes from bytes; a stat of a
// present or an absent file records none.
func TestStat_RecordsNothing(t *testing.T) {
	ctx := context.Background()
	e, ffs := newTestEngine(t)
	a := openSession(t, e.Store())
	f, g := ffs.target("f.txt"), ffs.target("g.txt")
	ffs.put(f, "x")

	info, err := e.Stat(ctx, a, f)
	require.NoError(t, err)
	require.NotNil(t, info)
	info, err = e.Stat(ctx, a, g)
	require.NoError(t, err)
	assert.Nil(t, info)

	_, seen := e.Store().Observation(a.Session, f.Key)
	assert.False(t, seen, "a stat of a present file grants no observation")
	_, seen = e.Store().Observation(a.Session, g.Key)
	assert.False(t, seen, "a stat of an absent file records no absence")
}

func TestMutations_RecordOutcomeLastWriterAndAudit(t *testing.T) {
	tests := []struct {
		name    string
		op      MutationOp
		run     func(ctx context.Context, e *Engine, a Actor, f provider.Target) (provider.Version, error)
		wantObs func(v provider.Version) Observation
	}{
		{"write", OpWrite, func(ctx context.Context, e *Engine, a Actor, f provider.Target) (provider.Version, error) {
			out, err := e.Write(ctx, a, f, "w\n", Guard{})
			return out.Version, err
		}, Present},
		{"edit", OpEdit, func(ctx context.Context, e *Engine, a Actor, f provider.Target) (provider.Version, error) {
			out, err := e.Edit(ctx, a, f, provider.EditRequest{OldString: "hello", NewString: "bye"}, Guard{})
			return out.Version, err
		}, Present},
		{"patch", OpPatch, func(ctx context.Context, e *Engine, a Actor, f provider.Target) (provider.Version, error) {
			out, err := e.Patch(ctx, a, f, []patch.Hunk{{OldLines: []string{"hello"}, NewLines: []string{"bye"}}}, Guard{})
			return out.Version, err
		}, Present},
		{"delete", OpDelete, func(ctx context.Context, e *Engine, a Actor, f provider.Target) (provider.Version, error) {
			_, err := e.Delete(ctx, a, f, Guard{})
			return "", err
		}, func(provider.Version) Observation { return Absent() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			e, ffs := newTestEngine(t)
			a := openSession(t, e.Store())
			f := ffs.target("f.txt")
			v0 := ffs.put(f, "hello\n")
			_, _, err := e.Read(ctx, a, f)
			require.NoError(t, err)

			v, err := tc.run(ctx, e, a, f)
			require.NoError(t, err)

			obs, ok := e.Store().Observation(a.Session, f.Key)
			require.True(t, ok)
			assert.Equal(t, tc.wantObs(v), obs)
			lw, ok := e.Store().LastWrite(f.Key)
			require.True(t, ok)
			assert.Equal(t, tc.op, lw.Op)
			assert.Equal(t, a, lw.Actor)
			assert.Equal(t, v, lw.Version)
			assert.Equal(t, "f.txt", lw.Path)
			entries, err := e.Store().Audit(AuditQuery{Path: "f.txt"})
			require.NoError(t, err)
			require.Len(t, entries, 1)
			assert.Equal(t, tc.op, entries[0].Op)
			assert.Equal(t, v0, entries[0].Before)
			assert.Equal(t, v, entries[0].After)
			assert.False(t, entries[0].Unconditional)
		})
	}
}

func TestMove_SourceAbsentOnlyWhenRemoved(t *testing.T) {
	for _, removed := range []bool{true, false} {
		name := "source removed"
		if !removed {
			name = "source kept"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			e, ffs := newTestEngine(t)
			ffs.failSourceRemoval = !removed
			a := openSession(t, e.Store())
			src, dst := ffs.target("a.txt"), ffs.target("b.txt")
			vs := ffs.put(src, "move me\n")
			_, _, err := e.Read(ctx, a, src)
			require.NoError(t, err)

			out, err := e.Move(ctx, a, src, dst, nil, Guard{}, Guard{})
			require.NoError(t, err)
			assert.Equal(t, removed, out.SourceDeleted)

			obs, ok := e.Store().Observation(a.Session, dst.Key)
			require.True(t, ok)
			assert.Equal(t, Present(out.Destination.Version), obs)
			obs, ok = e.Store().Observation(a.Session, src.Key)
			require.True(t, ok)
			if removed {
				assert.Equal(t, Absent(), obs)
			} else {
				assert.Equal(t, Present(vs), obs, "a source that was not removed keeps its observation")
			}
			entries, err := e.Store().Audit(AuditQuery{Path: "b.txt"})
			require.NoError(t, err)
			require.Len(t, entries, 1, "the exact-path filter matches the destination (To)")
			assert.Equal(t, "a.txt", entries[0].Path)
			assert.Equal(t, OpMove, entries[0].Op)
			if !removed {
				assert.Contains(t, entries[0].Detail, "source not removed")
			}
		})
	}
}

func TestGuard_ExplicitOverridesDecider(t *testing.T) {
	ctx := context.Background()
	e, ffs := newTestEngine(t)
	a := openSession(t, e.Store())
	f := ffs.target("f.txt")
	v := ffs.put(f, "hello\n")

	// Unseen: the decider would refuse, but an explicit current version wins.
	out, err := e.Edit(ctx, a, f, provider.EditRequest{OldString: "hello", NewString: "bye"},
		Guard{Version: &provider.VersionGuard{Version: v}})
	require.NoError(t, err)

	// Observed at the new version: the decider would allow, but an explicit
	// old version is refused by the provider.
	_, err = e.Edit(ctx, a, f, provider.EditRequest{OldString: "bye", NewString: "hi"},
		Guard{Version: &provider.VersionGuard{Version: v}})
	assert.Equal(t, provider.CodeStaleVersion, provider.CodeOf(err))
	got, _ := ffs.content(f)
	assert.Equal(t, "bye\n", got)

	// An explicit write intent replaces the decider's too.
	_, err = e.Write(ctx, a, f, "again\n", Guard{Write: &provider.WriteIntent{Kind: provider.CreateIfAbsent}})
	assert.Equal(t, provider.CodeNotObserved, provider.CodeOf(err))
	_, err = e.Write(ctx, a, f, "again\n", Guard{Write: &provider.WriteIntent{Kind: provider.ReplaceIfVersion, Version: out.Version}})
	require.NoError(t, err)
}

func TestGuard_UnconditionalSkipsDeciderAndIsAudited(t *testing.T) {
	ctx := context.Background()
	e, ffs := newTestEngine(t)
	a := openSession(t, e.Store())
	f := ffs.target("f.txt")
	ffs.put(f, "hello\n")

	_, err := e.Edit(ctx, a, f, provider.EditRequest{OldString: "hello", NewString: "bye"}, Guard{})
	require.Equal(t, provider.CodeNotObserved, provider.CodeOf(err))
	_, err = e.Edit(ctx, a, f, provider.EditRequest{OldString: "hello", NewString: "bye"}, Guard{Unconditional: true})
	require.NoError(t, err)

	entries, err := e.Store().Audit(AuditQuery{})
	require.NoError(t, err)
	require.Len(t, entries, 2, "the change and, before it, the refusal")
	assert.True(t, entries[0].Unconditional)
	assert.False(t, entries[0].IsRefusal())
	assert.Equal(t, provider.CodeNotObserved, entries[1].Refused)
}

func TestObserver_FailureReportedMutationStays(t *testing.T) {
	ctx := context.Background()
	e, ffs := newTestEngine(t)
	a := openSession(t, e.Store())
	f := ffs.target("f.txt")
	boom := errors.New("cache invalidation failed")
	var seen []Event
	e.AddObserver(func(_ context.Context, ev Event) error { return boom })
	e.AddObserver(func(_ context.Context, ev Event) error { seen = append(seen, ev); return nil })

	out, err := e.Write(ctx, a, f, "kept\n", Guard{})
	require.ErrorIs(t, err, ErrObserverFailed)
	require.ErrorIs(t, err, boom)
	assert.NotEmpty(t, out.Version, "the outcome is valid")
	got, ok := ffs.content(f)
	require.True(t, ok)
	assert.Equal(t, "kept\n", got, "an observer failure never undoes the mutation")
	obs, _ := e.Store().Observation(a.Session, f.Key)
	assert.Equal(t, Present(out.Version), obs)

	require.Len(t, seen, 1, "every observer runs even when an earlier one fails")
	assert.Equal(t, OpWrite, seen[0].Op)
	assert.Equal(t, f, seen[0].Target)
	assert.Equal(t, out.Version, seen[0].After)
	assert.Equal(t, Present(out.Version), seen[0].Observation)
}

func TestMount_CheckTable(t *testing.T) {
	vp := func(v provider.Version) *provider.Version { return &v }
	tests := []struct {
		name     string
		noSess   bool
		obs      *Observation
		current  *provider.Version
		create   bool
		wantCode provider.Code
	}{
		{name: "no session is never refused", noSess: true, current: vp("v1")},
		{name: "unseen", current: vp("v1"), wantCode: provider.CodeNotObserved},
		{name: "observed absent, file exists", obs: &Observation{Kind: ObservedAbsent}, current: vp("v1"), wantCode: provider.CodeNotFound},
		{name: "observed absent, file absent", obs: &Observation{Kind: ObservedAbsent}, wantCode: provider.CodeNotFound},
		{name: "present at current", obs: &Observation{Kind: ObservedPresent, Version: "v1"}, current: vp("v1")},
		{name: "present, changed since", obs: &Observation{Kind: ObservedPresent, Version: "v1"}, current: vp("v2"), wantCode: provider.CodeStaleVersion},
		{name: "present, removed since", obs: &Observation{Kind: ObservedPresent, Version: "v1"}, wantCode: provider.CodeStaleVersion},
		{name: "create unseen absent file", create: true},
		{name: "create observed-absent file", create: true, obs: &Observation{Kind: ObservedAbsent}},
		{name: "create over a file removed since read", create: true, obs: &Observation{Kind: ObservedPresent, Version: "v1"}, wantCode: provider.CodeStaleVersion},
		{name: "create over an existing unseen file", create: true, current: vp("v1"), wantCode: provider.CodeNotObserved},
		{name: "create over an existing file at the read version", create: true, obs: &Observation{Kind: ObservedPresent, Version: "v1"}, current: vp("v1")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, ffs := newTestEngine(t)
			a := openSession(t, e.Store())
			if tc.noSess {
				a = Actor{PID: 7, Channel: ChannelMount}
			}
			f := ffs.target("f.txt")
			if tc.obs != nil {
				require.NoError(t, e.ObserveMount(a, f, *tc.obs))
			}
			var err error
			if tc.create {
				err = e.CheckMountCreate(a, OpWrite, f, tc.current)
			} else {
				err = e.CheckMount(a, OpWrite, f, tc.current)
			}
			if tc.wantCode == "" {
				assert.NoError(t, err)
				return
			}
			assert.Equal(t, tc.wantCode, provider.CodeOf(err), "err: %v", err)
		})
	}
}

func TestMount_ClosedSessionRefused(t *testing.T) {
	e, ffs := newTestEngine(t)
	a := openSession(t, e.Store())
	f := ffs.target("f.txt")
	require.NoError(t, e.ObserveMount(a, f, Present("v1")))
	require.NoError(t, e.Store().CloseSession(a.Session))
	v := provider.Version("v1")
	err := e.CheckMount(a, OpWrite, f, &v)
	assert.Equal(t, provider.CodeNotObserved, provider.CodeOf(err))
	assert.ErrorIs(t, err, ErrUnknownSession)
}

func TestMount_RecordRenameAndUnlink(t *testing.T) {
	ctx := context.Background()
	e, ffs := newTestEngine(t)
	a := openSession(t, e.Store())
	a.Channel = ChannelMount
	a.PID = 99
	src, dst := ffs.target("a.txt"), ffs.target("a.txt~")
	var events []Event
	e.AddObserver(func(_ context.Context, ev Event) error { events = append(events, ev); return nil })

	require.NoError(t, e.RecordMount(ctx, a, OpRename, src, "v1", "v2", &dst))
	obs, _ := e.Store().Observation(a.Session, dst.Key)
	assert.Equal(t, Present("v2"), obs)
	obs, _ = e.Store().Observation(a.Session, src.Key)
	assert.Equal(t, Absent(), obs)
	lw, ok := e.Store().LastWrite(dst.Key)
	require.True(t, ok)
	assert.Equal(t, OpRename, lw.Op)
	assert.Equal(t, int32(99), lw.Actor.PID)

	require.NoError(t, e.RecordMount(ctx, a, OpUnlink, dst, "v2", "", nil))
	obs, _ = e.Store().Observation(a.Session, dst.Key)
	assert.Equal(t, Absent(), obs)

	// An unbound process is recorded (last writer, audit) but observes nothing.
	other := Actor{PID: 5, UID: 1000, Channel: ChannelMount}
	require.NoError(t, e.RecordMount(ctx, other, OpWrite, src, "", "v9", nil))
	lw, ok = e.Store().LastWrite(src.Key)
	require.True(t, ok)
	assert.Equal(t, other, lw.Actor)

	entries, err := e.Store().Audit(AuditQuery{})
	require.NoError(t, err)
	require.Len(t, entries, 3)
	assert.Equal(t, []MutationOp{OpWrite, OpUnlink, OpRename}, []MutationOp{entries[0].Op, entries[1].Op, entries[2].Op}, "newest first")
	require.Len(t, events, 3)
	assert.Equal(t, &dst, events[0].To)
}
