package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKeepMount_CarriesOnlyTheSessionsFreshObservation: a session's own
// metadata change moves its observation from the version before to the
// one after; an observation of another version (someone changed the thing
// first), an absence or nothing stays as it was.
func TestKeepMount_CarriesOnlyTheSessionsFreshObservation(t *testing.T) {
	e, ffs := newTestEngine(t)
	a := openSession(t, e.Store())
	fresh, stale, absent := ffs.target("l"), ffs.target("m"), ffs.target("n")
	require.NoError(t, e.Store().Record(a.Session, fresh.Key, Present("m1-before")))
	require.NoError(t, e.Store().Record(a.Session, stale.Key, Present("m1-older")))
	require.NoError(t, e.Store().Record(a.Session, absent.Key, Absent()))
	for _, tg := range []struct {
		name string
		want Observation
		seen bool
	}{{"l", Present("m1-after"), true}, {"m", Present("m1-older"), true}, {"n", Absent(), true}, {"o", Observation{}, false}} {
		target := ffs.target(tg.name)
		require.NoError(t, e.KeepMount(a, target, "m1-before", "m1-after"))
		got, seen := e.Store().Observation(a.Session, target.Key)
		assert.Equal(t, tg.seen, seen, tg.name)
		assert.Equal(t, tg.want, got, tg.name)
	}
}
