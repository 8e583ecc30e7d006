package control

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBranchDiff_ConflictIsTheBranchsOwnChange(t *testing.T) {
	env := newBranchEnv(t)
	env.file(t, "a.txt", "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\n")
	env.file(t, "b.txt", "b0\n")
	ctx := context.Background()
	c := env.client(t)
	_, err := c.BranchCreate(ctx, BranchCreateParams{Name: "feat"})
	require.NoError(t, err)
	for _, p := range []string{"a.txt", "b.txt"} {
		_, err = c.Read(ctx, ReadParams{Path: p, Branch: "feat"})
		require.NoError(t, err)
	}
	_, err = c.Edit(ctx, EditParams{Path: "a.txt", OldString: "l8", NewString: "branch 8", Branch: "feat"})
	require.NoError(t, err)
	_, err = c.Edit(ctx, EditParams{Path: "b.txt", OldString: "b0", NewString: "b1", Branch: "feat"})
	require.NoError(t, err)
	// Someone else changes a.txt's first line in the workspace.
	_, err = c.Read(ctx, ReadParams{Path: "a.txt"})
	require.NoError(t, err)
	_, err = c.Edit(ctx, EditParams{Path: "a.txt", OldString: "l1", NewString: "other 1"})
	require.NoError(t, err)

	d, err := c.BranchDiff(ctx, BranchDiffParams{Name: "feat"})
	require.NoError(t, err)
	assert.Equal(t, []BranchFile{
		{Path: "a.txt", Status: "modified", Conflict: true},
		{Path: "b.txt", Status: "modified"},
	}, d.Files)
	assert.Contains(t, d.Diff, "-l8\n+branch 8\n")
	assert.NotContains(t, d.Diff, "other 1", "the diff is the branch's change, not an undo of the workspace's")
}
