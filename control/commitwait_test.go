package control

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBranch_SocketReadsWaitForACommitOfTheirPath holds a branch commit
// open after its files are in place and checks that fs.read, fs.stat and
// fs.list of what it changes answer only once it has ended, while a read
// of an untouched file answers at once.
func TestBranch_SocketReadsWaitForACommitOfTheirPath(t *testing.T) {
	env := newBranchEnv(t)
	env.file(t, "d/a.txt", "a0\n")
	env.file(t, "keep.txt", "k\n")
	ctx := context.Background()
	c := env.client(t)
	_, err := c.BranchCreate(ctx, BranchCreateParams{Name: "feat"})
	require.NoError(t, err)
	_, err = c.Write(ctx, WriteParams{Path: "d/a.txt", Content: "a1\n", Branch: "feat", Unconditional: true})
	require.NoError(t, err)

	held, release := make(chan struct{}), make(chan struct{})
	env.hooks.CommitApplied = func() {
		close(held)
		<-release
	}
	committed := make(chan error, 1)
	go func() {
		_, err := env.client(t).BranchCommit(ctx, BranchCommitParams{Name: "feat"})
		committed <- err
	}()
	<-held

	r, err := env.client(t).Read(ctx, ReadParams{Path: "keep.txt"})
	require.NoError(t, err, "a path the commit does not change is read at once")
	assert.Equal(t, "k", r.Lines[0].Text)

	answered := make(chan string, 3)
	reader := env.client(t)
	go func() {
		r, err := reader.Read(ctx, ReadParams{Path: "d/a.txt"})
		if err != nil {
			answered <- "read: " + err.Error()
			return
		}
		answered <- "read " + r.Lines[0].Text
	}()
	statter := env.client(t)
	go func() {
		_, err := statter.Stat(ctx, StatParams{Path: "d/a.txt"})
		answered <- "stat " + errString(err)
	}()
	lister := env.client(t)
	go func() {
		_, err := lister.List(ctx, ListParams{Path: "d"})
		answered <- "list " + errString(err)
	}()
	select {
	case a := <-answered:
		t.Fatalf("%q answered while the commit was still being applied", a)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	require.NoError(t, <-committed)
	var got []string
	for range 3 {
		got = append(got, <-answered)
	}
	assert.ElementsMatch(t, []string{"read a1", "stat <nil>", "list <nil>"}, got)
}
