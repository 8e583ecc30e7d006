package branch

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAwaitCommit_ReadersOfChangedPathsWaitForTheWholeCommit stops a
// 200-file commit half applied and checks that a reader of a changed file,
// of its directory and of a file the commit creates waits until the commit
// ends (then sees the new bytes), while a reader of an untouched path does
// not wait.
func TestAwaitCommit_ReadersOfChangedPathsWaitForTheWholeCommit(t *testing.T) {
	e := newEnv(t)
	e.put("other/keep.txt", "untouched\n")
	_, after := bigBranch(t, e)
	halfway, resume := make(chan struct{}), make(chan struct{})
	e.m.hooks.step = func(n int) error {
		if n == 300 { // about half the files renamed into place
			close(halfway)
			<-resume
		}
		return nil
	}
	committed := make(chan error, 1)
	go func() {
		_, err := e.m.Commit(context.Background(), "big", false, nil, Hooks{})
		committed <- err
	}()
	<-halfway

	ctx := context.Background()
	require.NoError(t, e.m.AwaitCommit(ctx, "other/keep.txt"), "an untouched path does not wait")
	require.NoError(t, e.m.AwaitCommit(ctx, "other"), "an untouched directory does not wait")

	waiters := map[string]chan string{}
	for _, rel := range []string{"src/f149.txt", "src", "gen/g00.txt", "."} {
		got := make(chan string, 1)
		waiters[rel] = got
		go func() {
			if err := e.m.AwaitCommit(ctx, rel); err != nil {
				got <- "error: " + err.Error()
				return
			}
			data, _ := os.ReadFile(filepath.Join(e.ws, "src/f149.txt"))
			got <- string(data)
		}()
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, e.m.AwaitCommit(short, "src/f000.txt"), context.DeadlineExceeded,
		"a reader of a changed path is still waiting while the commit is half applied")
	for rel, got := range waiters {
		select {
		case v := <-got:
			t.Fatalf("the reader of %s returned %q while the commit was half applied", rel, v)
		default:
		}
	}
	close(resume)
	require.NoError(t, <-committed)
	for rel, got := range waiters {
		assert.Equal(t, after["src/f149.txt"], <-got, "the reader of %s sees the commit entirely", rel)
	}
	require.NoError(t, e.m.AwaitCommit(ctx, "src/f000.txt"), "no commit: no wait")
}
