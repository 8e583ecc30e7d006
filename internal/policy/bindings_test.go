package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBindings_PersistAcrossRestartAndOutliveTheirSession pins what a
// restarted daemon needs: bindings stored by one Store are loaded by the
// next, closing their session does not drop them, and DeleteBinding does.
func TestBindings_PersistAcrossRestartAndOutliveTheirSession(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, quietOptions())
	sess, err := s.OpenSession("agent")
	require.NoError(t, err)
	byCgroup := BindingRecord{Session: sess.ID, Cgroup: "/user/dshmount/agent-1"}
	byPID := BindingRecord{Session: sess.ID, PID: 4242, Start: 99}
	require.NoError(t, s.PutBinding(byCgroup))
	require.NoError(t, s.PutBinding(byPID))
	require.NoError(t, s.CloseSession(sess.ID))
	got, err := s.Bindings()
	require.NoError(t, err)
	assert.ElementsMatch(t, []BindingRecord{byCgroup, byPID}, got, "closing the session keeps its bindings")
	require.NoError(t, s.Close())

	s = openStore(t, dir, quietOptions())
	got, err = s.Bindings()
	require.NoError(t, err)
	assert.ElementsMatch(t, []BindingRecord{byCgroup, byPID}, got, "bindings survive a restart")
	require.NoError(t, s.DeleteBinding(byPID))
	got, err = s.Bindings()
	require.NoError(t, err)
	assert.Equal(t, []BindingRecord{byCgroup}, got)
}
