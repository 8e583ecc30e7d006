package policy

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

func TestRecordApplied_RecordsLikeAMutation(t *testing.T) {
	e, _ := newTestEngine(t)
	a := openSession(t, e.Store())
	var prepared []string
	e.AddPreparer(func(_ context.Context, t provider.Target) { prepared = append(prepared, t.DisplayPath) })
	var events []Event
	e.AddObserver(func(_ context.Context, ev Event) error { events = append(events, ev); return nil })
	w := provider.Target{Key: "/ws/a.txt", DisplayPath: "a.txt"}
	d := provider.Target{Key: "/ws/b.txt", DisplayPath: "b.txt"}

	e.Announce(context.Background(), w, d)
	assert.Equal(t, []string{"a.txt", "b.txt"}, prepared)
	require.NoError(t, e.RecordApplied(context.Background(), AppliedChange{Actor: a, Op: OpWrite, Target: w, Before: "v1", After: "v2", Detail: "branch x commit"}))
	require.NoError(t, e.RecordApplied(context.Background(), AppliedChange{Actor: a, Op: OpDelete, Target: d, Before: "v3", Deleted: true, Detail: "branch x commit"}))

	obs, ok := e.Store().Observation(a.Session, w.Key)
	require.True(t, ok)
	assert.Equal(t, Present("v2"), obs)
	obs, ok = e.Store().Observation(a.Session, d.Key)
	require.True(t, ok)
	assert.Equal(t, Absent(), obs)
	rec, ok := e.Store().LastWrite(w.Key)
	require.True(t, ok)
	assert.Equal(t, provider.Version("v2"), rec.Version)
	entries, err := e.Store().Audit(AuditQuery{})
	require.NoError(t, err)
	require.Len(t, entries, 2)
	assert.Equal(t, "branch x commit", entries[0].Detail)
	assert.Equal(t, "b.txt", entries[0].Path)
	require.Len(t, events, 2, "the observers (the mount's invalidation) run")
	assert.Equal(t, provider.Version("v2"), events[0].After)
}
