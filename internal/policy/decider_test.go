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

// runOp performs op on subject through the engine; for a move destination
// the source is src, otherwise subject is the source and dst the destination.
func runOp(ctx context.Context, e *Engine, a Actor, op string, subject, other provider.Target) error {
	var err error
	switch op {
	case "write":
		_, err = e.Write(ctx, a, subject, "new\n", Guard{})
	case "edit":
		_, err = e.Edit(ctx, a, subject, provider.EditRequest{OldString: "hello", NewString: "bye"}, Guard{})
	case "patch":
		_, err = e.Patch(ctx, a, subject, []patch.Hunk{{OldLines: []string{"hello"}, NewLines: []string{"bye"}}}, Guard{})
	case "delete":
		_, err = e.Delete(ctx, a, subject, Guard{})
	case "moveSource":
		_, err = e.Move(ctx, a, subject, other, nil, Guard{}, Guard{})
	case "moveDestination":
		_, err = e.Move(ctx, a, other, subject, nil, Guard{}, Guard{})
	default:
		panic(op)
	}
	return err
}

func TestDecisions_ObservationTable(t *testing.T) {
	type state string
	const (
		unseen  state = "unseen"
		absent  state = "absent"
		present state = "present"
	)
	create := &provider.WriteIntent{Kind: provider.CreateIfAbsent}
	tests := []struct {
		op       string
		state    state
		noSess   bool
		wantCode provider.Code
		wantOp   string
		// want* below: expected guard; replace/version "at v" when set.
		wantWrite   *provider.WriteIntent
		wantReplace bool
		wantVersion bool
	}{
		{op: "write", state: unseen, wantWrite: create},
		{op: "write", state: absent, wantWrite: create},
		{op: "write", state: present, wantReplace: true},
		{op: "edit", state: unseen, wantCode: provider.CodeNotObserved, wantOp: "edit"},
		{op: "edit", state: absent, wantCode: provider.CodeNotFound, wantOp: "edit"},
		{op: "edit", state: present, wantVersion: true},
		{op: "patch", state: unseen, wantCode: provider.CodeNotObserved, wantOp: "patch"},
		{op: "patch", state: absent, wantCode: provider.CodeNotFound, wantOp: "patch"},
		{op: "patch", state: present, wantVersion: true},
		{op: "delete", state: unseen, wantCode: provider.CodeNotObserved, wantOp: "delete"},
		{op: "delete", state: absent, wantCode: provider.CodeNotFound, wantOp: "delete"},
		{op: "delete", state: present, wantVersion: true},
		{op: "moveSource", state: unseen, wantCode: provider.CodeNotObserved, wantOp: "move"},
		{op: "moveSource", state: absent, wantCode: provider.CodeNotFound, wantOp: "move"},
		{op: "moveSource", state: present, wantVersion: true},
		{op: "moveDestination", state: unseen, wantWrite: create},
		{op: "moveDestination", state: absent, wantWrite: create},
		{op: "moveDestination", state: present, wantReplace: true},
		// No session, no owner: treated as unseen (seed 004's agent-without-session rung).
		{op: "write", state: unseen, noSess: true, wantWrite: create},
		{op: "edit", state: unseen, noSess: true, wantCode: provider.CodeNotObserved, wantOp: "edit"},
		{op: "patch", state: unseen, noSess: true, wantCode: provider.CodeNotObserved, wantOp: "patch"},
		{op: "delete", state: unseen, noSess: true, wantCode: provider.CodeNotObserved, wantOp: "delete"},
		{op: "moveSource", state: unseen, noSess: true, wantCode: provider.CodeNotObserved, wantOp: "move"},
	}
	for _, tc := range tests {
		name := tc.op + "/" + string(tc.state)
		if tc.noSess {
			name = tc.op + "/no-session"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			store := openStore(t, t.TempDir(), quietOptions())
			ffs := newFakeFS()
			rec := &guardRecorder{FileSystem: ffs}
			e := NewEngine(store, rec)
			a := openSession(t, store)
			if tc.noSess {
				a = Actor{Channel: ChannelMount, PID: 42}
			}
			subject, other := ffs.target("f.txt"), ffs.target("other.txt")
			v := ffs.put(subject, "hello\n")
			if tc.op == "moveDestination" {
				ov := ffs.put(other, "source\n")
				if !tc.noSess {
					require.NoError(t, store.Record(a.Session, other.Key, Present(ov)))
				}
			}
			switch {
			case tc.noSess:
			case tc.state == absent:
				require.NoError(t, store.Record(a.Session, subject.Key, Absent()))
			case tc.state == present:
				require.NoError(t, store.Record(a.Session, subject.Key, Present(v)))
			}

			err := runOp(ctx, e, a, tc.op, subject, other)

			w, vg, calls := rec.last()
			if tc.wantCode != "" {
				require.Error(t, err)
				assert.Equal(t, tc.wantCode, provider.CodeOf(err))
				var pe *provider.Error
				require.True(t, errors.As(err, &pe))
				assert.Equal(t, tc.wantOp, pe.Op)
				assert.Zero(t, calls, "the provider must not be called when the policy refuses")
				return
			}
			require.Equal(t, 1, calls)
			if tc.op == "moveSource" {
				w = nil // the destination intent is not this row's subject
			}
			if tc.op == "moveDestination" {
				vg = nil
			}
			switch {
			case tc.wantReplace:
				assert.Equal(t, &provider.WriteIntent{Kind: provider.ReplaceIfVersion, Version: v}, w)
			case tc.wantVersion:
				assert.Equal(t, &provider.VersionGuard{Version: v}, vg)
			default:
				assert.Equal(t, tc.wantWrite, w)
			}
		})
	}
}

func TestDecisions_PreflightRecordsNothing(t *testing.T) {
	ctx := context.Background()
	e, ffs := newTestEngine(t)
	a := openSession(t, e.Store())
	f := ffs.target("f.txt")
	ffs.put(f, "x\n")

	w, err := e.WriteIntent(ctx, a, f)
	require.NoError(t, err)
	assert.Equal(t, provider.CreateIfAbsent, w.Kind)
	_, err = e.EditIntent(ctx, a, f)
	assert.Equal(t, provider.CodeNotObserved, provider.CodeOf(err))
	_, err = e.DeleteIntent(ctx, a, f)
	assert.Equal(t, provider.CodeNotObserved, provider.CodeOf(err))

	_, seen := e.Store().Observation(a.Session, f.Key)
	assert.False(t, seen, "a preflight must not record an observation")
}

func TestDecisions_UnknownSessionRefused(t *testing.T) {
	e, ffs := newTestEngine(t)
	f := ffs.target("f.txt")
	_, err := e.Write(context.Background(), Actor{Session: "s-0000000000000000"}, f, "x", Guard{})
	require.ErrorIs(t, err, ErrUnknownSession)
	_, exists := ffs.content(f)
	assert.False(t, exists)
}

func TestDecisions_DeciderSlotFirstRegisteredWins(t *testing.T) {
	ctx := context.Background()
	store := openStore(t, t.TempDir(), quietOptions())
	ffs := newFakeFS()
	f := ffs.target("f.txt")
	ffs.put(f, "hello\n")

	first := fixedDecider{write: &provider.WriteIntent{Kind: provider.ReplaceIfVersion, Version: "first"}}
	second := fixedDecider{write: &provider.WriteIntent{Kind: provider.ReplaceIfVersion, Version: "second"}}
	e := newEngine(store, ffs)
	require.True(t, e.RegisterDecider(first))
	require.False(t, e.RegisterDecider(second), "the slot is single: the second registration must be refused")
	w, err := e.WriteIntent(ctx, Actor{}, f)
	require.NoError(t, err)
	assert.Equal(t, provider.Version("first"), w.Version)

	// NewEngine takes the slot with the observation decider.
	std := NewEngine(store, ffs)
	assert.False(t, std.RegisterDecider(first))
	a := openSession(t, store)
	w, err = std.WriteIntent(ctx, a, f)
	require.NoError(t, err)
	assert.Equal(t, provider.CreateIfAbsent, w.Kind, "the observation decider must still decide")
}

type fixedDecider struct{ write *provider.WriteIntent }

func (d fixedDecider) WriteIntent(context.Context, Actor, provider.Target) (*provider.WriteIntent, error) {
	return d.write, nil
}

func (d fixedDecider) EditIntent(context.Context, Actor, provider.Target) (*provider.VersionGuard, error) {
	return &provider.VersionGuard{Version: d.write.Version}, nil
}

func (d fixedDecider) DeleteIntent(context.Context, Actor, provider.Target) (*provider.VersionGuard, error) {
	return &provider.VersionGuard{Version: d.write.Version}, nil
}
