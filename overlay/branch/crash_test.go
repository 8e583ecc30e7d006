package branch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
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
// 200 staged, applying mark, 1 mkdir + 200 applied, reset, journal gone.
const commitSteps = 1 + 200 + 1 + 201 + 2

// crashPoints are the steps a commit is stopped at.
var crashPoints = []int{0, 1, 2, 50, 100, 199, 200, 201, 202, 203, 204, 250, 300, 350, 380, 400, 401, 402, 403, 404}

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
			_, err := e.m.Commit(context.Background(), "big", false, Hooks{})
			require.ErrorIs(t, err, errStopped)
			e.restart()
			got := e.snapshot()
			if at <= 200 {
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
			e.m.hooks.step = func(n int) error {
				if n == at {
					return errStopped
				}
				return nil
			}
			_, err := e.m.Commit(context.Background(), "big", false, Hooks{})
			require.ErrorIs(t, err, errStopped)
			require.NoError(t, e.m.Close())
			// While down: someone edits a file the commit writes last.
			e.put("src/f149.txt", "edited while down\n")
			e.open()
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

// TestCommit_KilledByKill9IsAllOrNothing runs a 200-file commit, and the
// same changes applied as one atomic change set (what fs.patch {atomic}
// does), in a child process that kills itself with SIGKILL at each crash
// point, then opens the state again here: entirely before or entirely
// after.
func TestCommit_KilledByKill9IsAllOrNothing(t *testing.T) {
	if os.Getenv("DSH_BRANCH_KILL_AT") != "" {
		t.Skip("helper")
	}
	for _, how := range []string{"commit", "atomic"} {
		for _, at := range crashPoints {
			if how == "atomic" && at == commitSteps-1 {
				continue // an atomic change set has no branch to reset: one step fewer
			}
			t.Run(how+"/"+strconv.Itoa(at), func(t *testing.T) {
				e := newEnv(t)
				before, after := bigBranch(t, e)
				require.NoError(t, e.m.Close())
				cmd := exec.Command(os.Args[0], "-test.run=^TestKillHelper$", "-test.count=1")
				cmd.Env = append(os.Environ(), "DSH_BRANCH_KILL_AT="+strconv.Itoa(at), "DSH_BRANCH_HOW="+how,
					"DSH_BRANCH_WS="+e.ws, "DSH_BRANCH_STATE="+e.state)
				out, err := cmd.CombinedOutput()
				var ee *exec.ExitError
				require.ErrorAs(t, err, &ee, "%s", out)
				ws, ok := ee.Sys().(syscall.WaitStatus)
				require.True(t, ok)
				require.True(t, ws.Signaled(), "%s", out)
				assert.Equal(t, syscall.SIGKILL, ws.Signal())
				e.open()
				if at <= 200 {
					assert.Equal(t, before, e.snapshot())
				} else {
					assert.Equal(t, after, e.snapshot())
				}
				assertClean(t, e)
			})
		}
	}
}

// TestKillHelper is the child of TestCommit_KilledByKill9IsAllOrNothing.
func TestKillHelper(t *testing.T) {
	at, err := strconv.Atoi(os.Getenv("DSH_BRANCH_KILL_AT"))
	if err != nil {
		t.Skip("only run as a helper process")
	}
	e := &env{t: t, ws: os.Getenv("DSH_BRANCH_WS"), state: os.Getenv("DSH_BRANCH_STATE")}
	lfs, err := newLower(e.ws)
	require.NoError(t, err)
	e.lower = lfs
	e.opts.hooks.step = func(n int) error {
		if n == at {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		return nil
	}
	e.open()
	if os.Getenv("DSH_BRANCH_HOW") == "atomic" {
		b, err := e.m.Get("big")
		require.NoError(t, err)
		b.mu.RLock()
		cs := b.changeSet()
		b.mu.RUnlock()
		cs.Label = "atomic patch"
		_, err = e.m.Apply(context.Background(), cs, Hooks{})
		t.Fatalf("atomic apply returned (%v) instead of being killed at %d", err, at)
	}
	_, err = e.m.Commit(context.Background(), "big", false, Hooks{})
	t.Fatalf("commit returned (%v) instead of being killed at %d", err, at)
}

// assertClean checks that no journal and no staging are left.
func assertClean(t *testing.T, e *env) {
	t.Helper()
	des, err := os.ReadDir(e.m.journals.dir)
	require.NoError(t, err)
	assert.Empty(t, des, "no journal left")
	_, err = os.Stat(e.m.hostPath(StagingDir))
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
	_, err := e.m.Commit(context.Background(), "big", false, Hooks{})
	require.ErrorIs(t, err, errStopped)
	require.NoError(t, e.m.Close())
	e.put("src/f000.txt", "old 0\n") // f000 was written first
	e.open()
	assert.Equal(t, before, e.snapshot())
	assertClean(t, e)
}
