package branch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bigBranch fills the workspace with 170 files and makes branch "big"
// change 200: 150 modified, 30 created, 20 deleted. It returns the
// workspace before and after the commit.
func bigBranch(t testing.TB, e *env) (before, after map[string]string) {
	t.Helper()
	for i := range 170 {
		e.put(fmt.Sprintf("src/f%03d.txt", i), fmt.Sprintf("old %d\n", i))
	}
	before = e.snapshot()
	b, err := e.m.Create("big")
	require.NoError(t, err)
	for i := range 150 {
		bwrite(t, b, fmt.Sprintf("src/f%03d.txt", i), fmt.Sprintf("new %d\n", i))
	}
	for i := 150; i < 170; i++ {
		bdelete(t, b, fmt.Sprintf("src/f%03d.txt", i))
	}
	for i := range 30 {
		bwrite(t, b, fmt.Sprintf("gen/g%02d.txt", i), fmt.Sprintf("gen %d\n", i))
	}
	after = map[string]string{"src/": "<dir>", "gen/": "<dir>"}
	for i := range 150 {
		after[fmt.Sprintf("src/f%03d.txt", i)] = fmt.Sprintf("new %d\n", i)
	}
	for i := range 30 {
		after[fmt.Sprintf("gen/g%02d.txt", i)] = fmt.Sprintf("gen %d\n", i)
	}
	return before, after
}

// commitSteps is the number of hook steps of bigBranch's commit: intent,
// 200 staged, applying mark, 1 mkdir + 200 applied, applied mark, reset,
// journal gone.
const commitSteps = 1 + 200 + 1 + 201 + 3

// Hook steps of bigBranch's commit where its state changes.
const (
	lastStaging   = 200 // up to here the journal says staging
	appliedMarked = 403 // from here the journal says applied
	journalGone   = 405 // the journal is deleted
)

// crashPoints are the steps a commit is stopped at.
var crashPoints = []int{0, 1, 2, 50, 100, 199, 200, 201, 202, 203, 250, 300, 350, 380, 400, 401, 402, 403, 404, 405}

// TestCommit_StoppedAtAnyStepIsAllOrNothing stops a 200-file commit at
// each crash point, as a kill -9 would leave the disk (a test hook), then
// starts again: the workspace is entirely before (stopped before the
// journal said applying) or entirely after.
func TestCommit_StoppedAtAnyStepIsAllOrNothing(t *testing.T) {
	require.Equal(t, commitSteps-1, crashPoints[len(crashPoints)-1])
	for _, at := range crashPoints {
		t.Run(strconv.Itoa(at), func(t *testing.T) {
			e := newEnv(t)
			before, after := bigBranch(t, e)
			e.m.hooks.step = func(n int) error {
				if n == at {
					return errStopped
				}
				return nil
			}
			_, err := e.m.Commit(context.Background(), "big", false, nil, Hooks{})
			require.ErrorIs(t, err, errStopped)
			e.restart()
			got := e.snapshot()
			if at <= lastStaging {
				assert.Equal(t, before, got, "stopped while staging: all before")
				b, err := e.m.Get("big")
				require.NoError(t, err, "the branch is intact")
				assert.Equal(t, 200, b.Changed())
			} else {
				assert.Equal(t, after, got, "stopped while applying: all after")
				_, err := e.m.Get("big")
				assert.Error(t, err, "the committed branch is gone")
			}
			assertClean(t, e)
		})
	}
}

// TestCommit_RollsBackWhenAPathChangedWhileDown: finishing would overwrite
// a change made while the daemon was down, so the start undoes the commit
// instead; that change stays.
func TestCommit_RollsBackWhenAPathChangedWhileDown(t *testing.T) {
	for _, at := range []int{202, 300, 402} {
		t.Run(strconv.Itoa(at), func(t *testing.T) {
			e := newEnv(t)
			before, _ := bigBranch(t, e)
			// While down: someone edits a file the commit writes last.
			commitStoppedThenEdited(t, e, false, func(n int) bool { return n == at }, "src/f149.txt", "edited while down\n")
			want := before
			want["src/f149.txt"] = "edited while down\n"
			assert.Equal(t, want, e.snapshot())
			b, err := e.m.Get("big")
			require.NoError(t, err, "the branch is kept")
			assert.Positive(t, b.Changed())
			assertClean(t, e)
		})
	}
}

// assertClean checks that no journal and no staging are left.
func assertClean(t *testing.T, e *env) {
	t.Helper()
	des, err := os.ReadDir(e.m.journals.Path)
	require.NoError(t, err)
	assert.Empty(t, des, "no journal left")
	_, err = os.Stat(filepath.Join(e.ws, StagingDir))
	assert.True(t, os.IsNotExist(err), "no staging left")
}

// TestCommit_RollsBackWhenAnAppliedPathWasRestoredWhileDown: a file the
// commit had already renamed into place was given its old bytes back while
// the daemon was down; finishing would leave a mix, so the start undoes
// the commit.
func TestCommit_RollsBackWhenAnAppliedPathWasRestoredWhileDown(t *testing.T) {
	e := newEnv(t)
	before, _ := bigBranch(t, e)
	e.m.hooks.step = func(n int) error {
		if n == 300 { // about half the writes are in place
			return errStopped
		}
		return nil
	}
	_, err := e.m.Commit(context.Background(), "big", false, nil, Hooks{})
	require.ErrorIs(t, err, errStopped)
	require.NoError(t, e.m.Close())
	e.put("src/f000.txt", "old 0\n") // f000 was written first
	e.open()
	assert.Equal(t, before, e.snapshot())
	assertClean(t, e)
}

// TestCommit_StoppedOnceTheBranchWentKeepsTheCommit is the scenario of
// issue 27: a commit is stopped (as by a kill -9) after its branch was
// removed (or, with keep, emptied) and before its journal went, and a file
// it wrote is changed while the daemon is down. The start must finish the
// commit with that change on top (the branch's writes are in the
// workspace), not undo it (they would be nowhere).
func TestCommit_StoppedOnceTheBranchWentKeepsTheCommit(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep=%v", keep), func(t *testing.T) {
			e := newEnv(t)
			_, after := bigBranch(t, e)
			dir := filepath.Join(e.state, "branches", "big")
			commitStoppedThenEdited(t, e, keep, func(int) bool {
				st, err := os.Stat(filepath.Join(dir, "changes.log"))
				return os.IsNotExist(err) || err == nil && st.Size() == 0 // the branch is gone or empty
			}, "src/f100.txt", "edited while down\n")
			want := after
			want["src/f100.txt"] = "edited while down\n"
			assert.Equal(t, want, e.snapshot(), "the commit stands, with the change made while down on top")
			recs := e.m.TakeRecovered()
			require.Len(t, recs, 1)
			assert.True(t, recs[0].Forward, "finished, not undone: %s", recs[0].Reason)
			require.Len(t, recs[0].OutOfBand, 1)
			assert.Equal(t, "src/f100.txt", recs[0].OutOfBand[0].Target.DisplayPath)
			b, err := e.m.Get("big")
			if keep {
				require.NoError(t, err)
				assert.Zero(t, b.Changed(), "a kept branch goes on empty")
			} else {
				assert.Error(t, err, "the committed branch is gone")
			}
			assertClean(t, e)
		})
	}
}

// commitStoppedThenEdited commits branch big (keep), stopped as a kill -9
// would stop it at the first hook step stop accepts, writes rel while the
// manager is closed, and opens it again.
func commitStoppedThenEdited(t *testing.T, e *env, keep bool, stop func(n int) bool, rel, content string) {
	t.Helper()
	e.m.hooks.step = func(n int) error {
		if stop(n) {
			return errStopped
		}
		return nil
	}
	_, err := e.m.Commit(context.Background(), "big", keep, nil, Hooks{})
	require.ErrorIs(t, err, errStopped)
	require.NoError(t, e.m.Close())
	e.put(rel, content)
	e.open()
}
