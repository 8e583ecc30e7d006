package branch

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTakeRecovered_ReportsHowEachInterruptedCommitWasSettled: a commit
// stopped while staging is reported undone, one stopped while applying
// finished (with its 200 files), one whose path changed while down undone;
// each once.
func TestTakeRecovered_ReportsHowEachInterruptedCommitWasSettled(t *testing.T) {
	for _, tc := range []struct {
		at       int
		editDown bool
		forward  bool
		reason   string
	}{
		{at: 100, reason: "stopped while staging"},
		{at: 300, forward: true},
		{at: 300, editDown: true, reason: "changed while the daemon was down"},
	} {
		t.Run(strconv.Itoa(tc.at)+map[bool]string{true: "-edited", false: ""}[tc.editDown], func(t *testing.T) {
			e := newEnv(t)
			bigBranch(t, e)
			assert.Empty(t, e.m.TakeRecovered(), "nothing to settle at the first start")
			e.m.hooks.step = func(n int) error {
				if n == tc.at {
					return errStopped
				}
				return nil
			}
			_, err := e.m.Commit(context.Background(), "big", false, nil, Hooks{})
			require.ErrorIs(t, err, errStopped)
			require.NoError(t, e.m.Close())
			if tc.editDown {
				e.put("src/f149.txt", "edited while down\n")
			}
			e.open()
			rec := e.m.TakeRecovered()
			require.Len(t, rec, 1)
			assert.Equal(t, "big", rec[0].Branch)
			assert.Equal(t, "branch big", rec[0].Label)
			assert.Equal(t, tc.forward, rec[0].Forward)
			if tc.reason != "" {
				assert.Contains(t, rec[0].Reason, tc.reason)
			}
			assert.Len(t, rec[0].Files, 200)
			deleted := 0
			for _, f := range rec[0].Files {
				if f.Deleted {
					deleted++
				}
			}
			assert.Equal(t, 20, deleted)
			assert.Empty(t, e.m.TakeRecovered(), "once")
		})
	}
}
