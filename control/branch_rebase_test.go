package control

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

const rebaseBase = "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\n"

// divergedBranch makes branch fix over f.txt holding base, writes ours in
// the branch and then theirs in the workspace, and returns a client.
func divergedBranch(t *testing.T, env *testEnv, base, ours, theirs string) *Client {
	t.Helper()
	env.file(t, "f.txt", base)
	ctx := context.Background()
	c := env.client(t)
	_, err := c.BranchCreate(ctx, BranchCreateParams{Name: "fix"})
	require.NoError(t, err)
	_, err = c.Write(ctx, WriteParams{Path: "f.txt", Content: ours, Branch: "fix", Unconditional: true})
	require.NoError(t, err)
	_, err = c.Write(ctx, WriteParams{Path: "f.txt", Content: theirs, Unconditional: true})
	require.NoError(t, err)
	return c
}

// The README recipe's case over the socket: the branch and the workspace
// change lines three apart; branch.commit alone is refused, and
// branch.commit {rebase: true} leaves both changes in the workspace.
func TestBranch_CommitRebaseKeepsBothChanges(t *testing.T) {
	env := newBranchEnv(t)
	ctx := context.Background()
	c := divergedBranch(t, env, rebaseBase,
		"l1\nl2\nBRANCH\nl4\nl5\nl6\nl7\nl8\nl9\nl10\n", "l1\nl2\nl3\nl4\nl5\nl6\nWORKSPACE\nl8\nl9\nl10\n")

	_, err := c.BranchCommit(ctx, BranchCommitParams{Name: "fix"})
	require.True(t, errors.Is(err, provider.ErrStaleVersion), "%v", err)
	res, err := c.BranchCommit(ctx, BranchCommitParams{Name: "fix", Rebase: true})
	require.NoError(t, err)
	assert.Len(t, res.Files, 1)
	got, _ := env.content(t, "f.txt")
	assert.Equal(t, "l1\nl2\nBRANCH\nl4\nl5\nl6\nWORKSPACE\nl8\nl9\nl10\n", got)
}

func TestBranch_RebaseConflictHunksAndMarkers(t *testing.T) {
	env := newBranchEnv(t)
	ctx := context.Background()
	c := divergedBranch(t, env, "a\nb\nc\n", "a\nB\nc\n", "a\nW\nc\n")

	_, err := c.BranchRebase(ctx, BranchRebaseParams{Name: "fix"})
	re := rpcErr(t, err)
	assert.Equal(t, provider.CodeMergeConflict, re.Code)
	assert.Equal(t, []string{"f.txt"}, re.Conflicts)
	assert.Equal(t, []ConflictHunk{{Path: "f.txt", BaseStart: 2, Base: "b\n", Ours: "B\n", Theirs: "W\n"}}, re.ConflictHunks)

	res, err := c.BranchRebase(ctx, BranchRebaseParams{Name: "fix", Markers: true})
	require.NoError(t, err)
	assert.Equal(t, &BranchRebaseResult{Merged: []string{"f.txt"}, Flagged: []string{"f.txt"}}, res)
	_, err = c.BranchCommit(ctx, BranchCommitParams{Name: "fix"})
	assert.Equal(t, provider.CodeMergeConflict, rpcErr(t, err).Code, "markers still in the branch")
	got, _ := env.content(t, "f.txt")
	assert.Equal(t, "a\nW\nc\n", got)
}
