package fuse

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heldCommit is a CommitWaiter whose one "commit" changes the paths in
// held until release.
type heldCommit struct {
	held map[string]bool
	done chan struct{}
	once sync.Once
}

func (h *heldCommit) AwaitCommit(ctx context.Context, rel string) error {
	if !h.held[rel] {
		return nil
	}
	select {
	case <-h.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *heldCommit) release() { h.once.Do(func() { close(h.done) }) }

// TestMount_OpensWaitForACommitOfTheirPath: while a commit changes d/a.txt
// (and so its directory d), opening that file for reading or writing and
// opening the directory wait until it ends; other files open at once.
func TestMount_OpensWaitForACommitOfTheirPath(t *testing.T) {
	h := &heldCommit{held: map[string]bool{"d/a.txt": true, "d": true, ".": true}, done: make(chan struct{})}
	e := newEnv(t, envOptions{commits: h})
	t.Cleanup(h.release)
	e.put("d/a.txt", "a\n")
	e.put("keep.txt", "k\n")

	data, err := os.ReadFile(e.m("keep.txt"))
	require.NoError(t, err, "an untouched file opens at once")
	assert.Equal(t, "k\n", string(data))

	answered := make(chan string, 3)
	go func() {
		_, err := os.ReadFile(e.m("d/a.txt"))
		answered <- "read " + errString(err)
	}()
	go func() {
		f, err := os.OpenFile(e.m("d/a.txt"), os.O_WRONLY, 0)
		if err == nil {
			f.Close()
		}
		answered <- "open for writing " + errString(err)
	}()
	go func() {
		_, err := os.ReadDir(e.m("d"))
		answered <- "readdir " + errString(err)
	}()
	select {
	case a := <-answered:
		t.Fatalf("%s answered while the commit was running", a)
	case <-time.After(300 * time.Millisecond):
	}
	h.release()
	var got []string
	for range 3 {
		got = append(got, <-answered)
	}
	assert.ElementsMatch(t, []string{"read <nil>", "open for writing <nil>", "readdir <nil>"}, got)
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
