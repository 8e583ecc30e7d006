package control

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

func TestWatch_InABranchSeesItsChangesAndTheUnshadowedWorkspace(t *testing.T) {
	env := newBranchEnv(t)
	env.file(t, "a.txt", "a0\n")
	ctx := context.Background()
	c := env.client(t)
	for _, n := range []string{"feat", "other"} {
		_, err := c.BranchCreate(ctx, BranchCreateParams{Name: n})
		require.NoError(t, err)
	}
	w, err := c.Watch(ctx, WatchParams{Path: ".", Recursive: true, Branch: "feat"})
	require.NoError(t, err)

	// The branch's own write.
	_, err = c.Read(ctx, ReadParams{Path: "a.txt", Branch: "feat"})
	require.NoError(t, err)
	mine, err := c.Write(ctx, WriteParams{Path: "a.txt", Content: "a1\n", Branch: "feat"})
	require.NoError(t, err)
	ev := nextEvent(t, w)
	assert.Equal(t, "a.txt", ev.Path)
	assert.Equal(t, ChangeModified, ev.Kind)
	assert.Equal(t, mine.Version, ev.Version)

	// Not shown: another branch's write, and a workspace write of a path
	// the branch changed. Shown: a workspace write of a path it did not.
	_, err = c.Write(ctx, WriteParams{Path: "o.txt", Content: "o\n", Branch: "other"})
	require.NoError(t, err)
	_, err = c.Write(ctx, WriteParams{Path: "a.txt", Content: "ws\n", Unconditional: true})
	require.NoError(t, err)
	_, err = c.Write(ctx, WriteParams{Path: "live.txt", Content: "live\n"})
	require.NoError(t, err)
	ev = nextEvent(t, w)
	assert.Equal(t, "live.txt", ev.Path, "the live base shows through; a.txt is the branch's and o.txt another branch's")
	assert.Equal(t, ChangeCreated, ev.Kind)

	// Refused like any path of the branch: a missing directory.
	_, err = c.Watch(ctx, WatchParams{Path: "nope/x", Branch: "feat"})
	assert.Equal(t, provider.CodeNotFound, rpcErr(t, err).Code)
	_, err = c.Watch(ctx, WatchParams{Path: ".", Branch: "missing"})
	assert.Equal(t, provider.CodeNotFound, rpcErr(t, err).Code)

	// Discarded: the watch ends at the next change the daemon records.
	require.NoError(t, c.BranchDiscard(ctx, "feat"))
	_, err = c.Write(ctx, WriteParams{Path: "after.txt", Content: "x\n"})
	require.NoError(t, err)
	ev = nextEvent(t, w)
	assert.Equal(t, ChangeLost, ev.Kind)
}

func TestWatch_WorkspaceAndBranchWatchesSideBySide(t *testing.T) {
	env := newBranchEnv(t)
	ctx := context.Background()
	c := env.client(t)
	_, err := c.BranchCreate(ctx, BranchCreateParams{Name: "feat"})
	require.NoError(t, err)
	w, err := c.Watch(ctx, WatchParams{Path: "."})
	require.NoError(t, err)
	bw, err := c.Watch(ctx, WatchParams{Path: ".", Branch: "feat"})
	require.NoError(t, err)
	_, err = c.Write(ctx, WriteParams{Path: "b.txt", Content: "b\n", Branch: "feat"})
	require.NoError(t, err)
	_, err = c.Write(ctx, WriteParams{Path: "w.txt", Content: "w\n"})
	require.NoError(t, err)
	assert.Equal(t, "b.txt", nextEvent(t, bw).Path)
	assert.Equal(t, "w.txt", nextEvent(t, w).Path, "the workspace watch never sees the branch's write")
	assert.Equal(t, "w.txt", nextEvent(t, bw).Path)
}
