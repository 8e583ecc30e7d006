package local

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

// race runs the calls on real goroutines released together and returns
// their errors in call order.
func race(calls ...func() error) []error {
	errs := make([]error, len(calls))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, call := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = call()
		}()
	}
	close(start)
	wg.Wait()
	return errs
}

// oneWinner asserts exactly one nil error and one FS_STALE_VERSION.
func oneWinner(t *testing.T, errs []error) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, winner, "two calls won")
			winner = i
			continue
		}
		requireCode(t, err, provider.CodeStaleVersion)
	}
	require.NotEqual(t, -1, winner, "no call won: %v", errs)
	return winner
}

func TestConcurrentGuardedWrites_OneWinsOneStale(t *testing.T) {
	for round := range 20 {
		fs, root := newTestFS(t, Options{})
		put(t, root, "f.txt", "base")
		tg := target(t, fs, "f.txt")
		v := versionOf(t, fs, tg)
		ctx := context.Background()
		guard := &provider.WriteIntent{Kind: provider.ReplaceIfVersion, Version: v}
		contents := []string{"first writer", "second writer"}
		errs := race(
			func() error { _, err := fs.WriteText(ctx, tg, contents[0], guard); return err },
			func() error { _, err := fs.WriteText(ctx, tg, contents[1], guard); return err },
		)
		w := oneWinner(t, errs)
		assert.Equal(t, contents[w], get(t, root, "f.txt"), "round %d", round)
		assert.Zero(t, fs.locks.size(), "locks released")

		// A third write at the fresh version succeeds.
		_, err := fs.WriteText(ctx, tg, "third", &provider.WriteIntent{Kind: provider.ReplaceIfVersion, Version: versionOf(t, fs, tg)})
		require.NoError(t, err)
		assert.Equal(t, "third", get(t, root, "f.txt"))
		assert.Empty(t, tempFiles(t, root))
	}
}

func TestConcurrentWriteVersusEdit_OneWinsOneStale(t *testing.T) {
	for round := range 20 {
		fs, root := newTestFS(t, Options{})
		put(t, root, "f.txt", "hello world")
		tg := target(t, fs, "f.txt")
		v := versionOf(t, fs, tg)
		ctx := context.Background()
		errs := race(
			func() error {
				_, err := fs.WriteText(ctx, tg, "rewritten", &provider.WriteIntent{Kind: provider.ReplaceIfVersion, Version: v})
				return err
			},
			func() error {
				_, err := fs.EditText(ctx, tg, provider.EditRequest{OldString: "world", NewString: "there"}, &provider.VersionGuard{Version: v})
				return err
			},
		)
		w := oneWinner(t, errs)
		want := []string{"rewritten", "hello there"}[w]
		assert.Equal(t, want, get(t, root, "f.txt"), "round %d", round)
		assert.Zero(t, fs.locks.size(), "locks released")
		_, err := fs.EditText(ctx, tg, provider.EditRequest{OldString: want, NewString: "after"}, &provider.VersionGuard{Version: versionOf(t, fs, tg)})
		require.NoError(t, err)
	}
}

func TestConcurrentUnguardedEdits_AllApplied(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	const n = 16
	content := ""
	for i := range n {
		content += fmt.Sprintf("<%d>", i)
	}
	put(t, root, "f.txt", content)
	tg := target(t, fs, "f.txt")
	calls := make([]func() error, n)
	for i := range n {
		calls[i] = func() error {
			_, err := fs.EditText(context.Background(), tg, provider.EditRequest{OldString: fmt.Sprintf("<%d>", i), NewString: "."}, nil)
			return err
		}
	}
	for _, err := range race(calls...) {
		require.NoError(t, err)
	}
	assert.Equal(t, "................", get(t, root, "f.txt"), "unguarded edits are still serialized: none is lost")
}

func TestConcurrentMoves_OppositeDirectionsDoNotDeadlock(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "a.txt", "a")
	put(t, root, "b.txt", "b")
	a, b := target(t, fs, "a.txt"), target(t, fs, "b.txt")
	ctx := context.Background()
	for range 10 {
		errs := race(
			func() error { _, err := fs.MoveFile(ctx, a, b, provider.MoveOptions{}); return err },
			func() error { _, err := fs.MoveFile(ctx, b, a, provider.MoveOptions{}); return err },
		)
		// One moves, the other finds its source gone (stale) or moves back.
		for _, err := range errs {
			if err != nil {
				requireCode(t, err, provider.CodeStaleVersion)
			}
		}
		if _, err := fs.Stat(ctx, a); err == nil {
			put(t, root, "a.txt", "a")
			put(t, root, "b.txt", "b")
		}
	}
	assert.Zero(t, fs.locks.size())
}

func TestLockTable_WaitHonoursContext(t *testing.T) {
	lt := newLockTable()
	unlock, err := lt.lock(context.Background(), "k")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := lt.lock(ctx, "other", "k")
		done <- err
	}()
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	unlock()
	assert.Zero(t, lt.size(), "a cancelled waiter holds nothing")
	unlock2, err := lt.lock(context.Background(), "k", "other")
	require.NoError(t, err)
	unlock2()
}
