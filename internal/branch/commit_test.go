package branch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

func TestCommit_AppliesEverythingAndRemovesTheBranch(t *testing.T) {
	e := newEnv(t)
	e.put("a.txt", "a0\n")
	e.put("gone.txt", "g\n")
	e.put("old/x.txt", "x\n")
	e.put("old/sub/y.txt", "y\n")
	e.put("mv.txt", "m\n")
	require.NoError(t, os.Chmod(filepath.Join(e.ws, "a.txt"), 0o755))
	b, err := e.m.Create("c")
	require.NoError(t, err)
	bwrite(t, b, "a.txt", "a1\n")
	bdelete(t, b, "gone.txt")
	bwrite(t, b, "new/deep/n.txt", "n\n")
	require.NoError(t, b.RemoveDir(context.Background(), "old"))
	_, err = b.MoveFile(context.Background(), bt(t, b, "mv.txt"), bt(t, b, "moved.txt"), provider.MoveOptions{})
	require.NoError(t, err)

	var applied []AppliedFile
	var announced []provider.Target
	var origins []any
	files, err := e.m.Commit(context.Background(), "c", false, "the caller", Hooks{
		Announce: func(_ context.Context, o any, ts []provider.Target) { announced, origins = ts, append(origins, o) },
		Applied:  func(_ context.Context, o any, fs []AppliedFile) { applied, origins = fs, append(origins, o) },
	})
	require.NoError(t, err)
	assert.Equal(t, []any{"the caller", "the caller"}, origins, "the commit's origin reaches its hooks")
	assert.Equal(t, files, applied)
	assert.Len(t, announced, 7)
	assert.Equal(t, map[string]string{
		"a.txt": "a1\n", "new/": "<dir>", "new/deep/": "<dir>", "new/deep/n.txt": "n\n", "moved.txt": "m\n",
	}, e.snapshot())
	st, err := os.Stat(filepath.Join(e.ws, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), st.Mode().Perm(), "the mode of the replaced file is kept")
	_, err = e.m.Get("c")
	assert.Equal(t, provider.CodeNotFound, provider.CodeOf(err))
	des, _ := os.ReadDir(filepath.Join(e.state, "branches"))
	assert.Empty(t, des)
	des, _ = os.ReadDir(filepath.Join(e.state, "branches.journal"))
	assert.Empty(t, des)
	_, err = os.Stat(filepath.Join(e.ws, StagingDir))
	assert.True(t, os.IsNotExist(err), "no staging left")
	byPath := map[string]AppliedFile{}
	for _, f := range applied {
		byPath[f.Target.DisplayPath] = f
	}
	assert.True(t, byPath["gone.txt"].Deleted)
	assert.True(t, byPath["old/sub/y.txt"].Deleted)
	assert.Empty(t, byPath["new/deep/n.txt"].Before)
	assert.NotEmpty(t, byPath["a.txt"].Before)
}

func TestCommit_KeepGoesOnEmpty(t *testing.T) {
	e := newEnv(t)
	e.put("a.txt", "a0\n")
	b, err := e.m.Create("k")
	require.NoError(t, err)
	bwrite(t, b, "a.txt", "a1\n")
	_, err = e.m.Commit(context.Background(), "k", true, nil, Hooks{})
	require.NoError(t, err)
	assert.Equal(t, "a1\n", e.get("a.txt"))
	b2, err := e.m.Get("k")
	require.NoError(t, err)
	assert.Same(t, b, b2)
	assert.Equal(t, 0, b.Changed())
	assert.Equal(t, "a1\n", bread(t, b, "a.txt"))
	e.put("a.txt", "a2\n")
	assert.Equal(t, "a2\n", bread(t, b, "a.txt"), "empty over the live workspace")
	bwrite(t, b, "a.txt", "a3\n")
	_, err = e.m.Commit(context.Background(), "k", true, nil, Hooks{})
	require.NoError(t, err)
	assert.Equal(t, "a3\n", e.get("a.txt"))
	e.restart()
	b, err = e.m.Get("k")
	require.NoError(t, err)
	assert.Equal(t, 0, b.Changed())
}

// TestCommit_ConflictMatrix: a change the workspace got since the branch
// started from a path refuses the whole commit with that path named;
// changes elsewhere do not.
func TestCommit_ConflictMatrix(t *testing.T) {
	cases := []struct {
		name      string
		branch    func(t *testing.T, b *Branch)
		workspace func(e *env)
		conflicts []string
	}{
		{"changed path modified", func(t *testing.T, b *Branch) { bwrite(t, b, "a.txt", "mine\n") },
			func(e *env) { e.put("a.txt", "theirs\n") }, []string{"a.txt"}},
		{"changed path deleted", func(t *testing.T, b *Branch) { bwrite(t, b, "a.txt", "mine\n") },
			func(e *env) { require.NoError(e.t, os.Remove(filepath.Join(e.ws, "a.txt"))) }, []string{"a.txt"}},
		{"deleted path modified", func(t *testing.T, b *Branch) { bdelete(t, b, "a.txt") },
			func(e *env) { e.put("a.txt", "theirs\n") }, []string{"a.txt"}},
		{"created path created", func(t *testing.T, b *Branch) { bwrite(t, b, "n.txt", "mine\n") },
			func(e *env) { e.put("n.txt", "theirs\n") }, []string{"n.txt"}},
		{"gained under a deleted directory", func(t *testing.T, b *Branch) {
			require.NoError(t, b.RemoveDir(context.Background(), "d"))
		}, func(e *env) { e.put("d/new.txt", "theirs\n") }, []string{"d/new.txt"}},
		{"several at once", func(t *testing.T, b *Branch) {
			bwrite(t, b, "a.txt", "mine\n")
			bwrite(t, b, "b.txt", "mine\n")
			bwrite(t, b, "c.txt", "mine\n")
		}, func(e *env) { e.put("c.txt", "theirs\n"); e.put("a.txt", "theirs\n") }, []string{"a.txt", "c.txt"}},
		{"unchanged path modified", func(t *testing.T, b *Branch) { bwrite(t, b, "a.txt", "mine\n") },
			func(e *env) { e.put("b.txt", "theirs\n"); e.put("other/new.txt", "x") }, nil},
		{"changed path rewritten to the same bytes", func(t *testing.T, b *Branch) { bwrite(t, b, "a.txt", "mine\n") },
			func(e *env) { e.put("a.txt", "a0\n") }, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.put("a.txt", "a0\n")
			e.put("b.txt", "b0\n")
			e.put("c.txt", "c0\n")
			e.put("d/x.txt", "x\n")
			b, err := e.m.Create("br")
			require.NoError(t, err)
			tc.branch(t, b)
			tc.workspace(e)
			before := e.snapshot()
			_, err = e.m.Commit(context.Background(), "br", false, nil, Hooks{})
			if tc.conflicts == nil {
				require.NoError(t, err)
				return
			}
			var ce *ConflictError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.conflicts, ce.Paths)
			assert.ErrorIs(t, err, provider.ErrStaleVersion)
			assert.Equal(t, before, e.snapshot(), "nothing applied")
			still, err := e.m.Get("br")
			require.NoError(t, err, "the branch is kept")
			assert.Positive(t, still.Changed())
		})
	}
}

func TestCommit_OtherBranchFirstWins(t *testing.T) {
	e := newEnv(t)
	e.put("f.txt", "0\n")
	e.put("g.txt", "0\n")
	b1, err := e.m.Create("one")
	require.NoError(t, err)
	b2, err := e.m.Create("two")
	require.NoError(t, err)
	bwrite(t, b1, "f.txt", "one\n")
	bwrite(t, b2, "f.txt", "two\n")
	bwrite(t, b2, "g.txt", "two\n")
	_, err = e.m.Commit(context.Background(), "one", false, nil, Hooks{})
	require.NoError(t, err)
	_, err = e.m.Commit(context.Background(), "two", false, nil, Hooks{})
	var ce *ConflictError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, []string{"f.txt"}, ce.Paths)
	assert.Equal(t, "one\n", e.get("f.txt"))
	assert.Equal(t, "0\n", e.get("g.txt"))
}

func TestCommit_RacingBranchesOneWinner(t *testing.T) {
	for round := range 20 {
		e := newEnv(t)
		e.put("f.txt", "0\n")
		const n = 4
		for i := range n {
			b, err := e.m.Create(fmt.Sprintf("b%d", i))
			require.NoError(t, err)
			bwrite(t, b, "f.txt", fmt.Sprintf("from %d\n", i))
		}
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				_, errs[i] = e.m.Commit(context.Background(), fmt.Sprintf("b%d", i), false, nil, Hooks{})
			})
		}
		wg.Wait()
		winners := 0
		for i, err := range errs {
			if err == nil {
				winners++
				assert.Equal(t, fmt.Sprintf("from %d\n", i), e.get("f.txt"), "round %d", round)
				continue
			}
			var ce *ConflictError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, []string{"f.txt"}, ce.Paths)
		}
		assert.Equal(t, 1, winners, "round %d", round)
	}
}

func TestCommit_WaitsForTheTargetLock(t *testing.T) {
	e := newEnv(t)
	e.put("f.txt", "0\n")
	b, err := e.m.Create("w")
	require.NoError(t, err)
	bwrite(t, b, "f.txt", "1\n")
	unlock, err := e.lower.Lock(context.Background(), e.lower.TargetForRel("f.txt").Key)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := e.m.Commit(context.Background(), "w", false, nil, Hooks{})
		done <- err
	}()
	// While the lock is held (a socket or mount mutation of f.txt), the
	// commit cannot apply; a change made under it makes the commit stale.
	e.put("f.txt", "changed under the lock\n")
	unlock()
	var ce *ConflictError
	require.ErrorAs(t, <-done, &ce)
	assert.Equal(t, "changed under the lock\n", e.get("f.txt"))
}
