package branch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

const rebaseBase = "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\n"

// branchOf makes branch fix over f.txt holding base and writes ours in it.
func branchOf(t *testing.T, e *env, base, ours string) *Branch {
	t.Helper()
	e.put("f.txt", base)
	b, err := e.m.Create("fix")
	require.NoError(t, err)
	bwrite(t, b, "f.txt", ours)
	return b
}

// The README recipe's case: the branch and the workspace change lines
// three apart. Commit alone is refused; rebase merges, and the commit
// then leaves both changes in the workspace.
func TestRebase_NearbyChangesMergeAndCommit(t *testing.T) {
	e := newEnv(t)
	b := branchOf(t, e, rebaseBase, "l1\nl2\nBRANCH\nl4\nl5\nl6\nl7\nl8\nl9\nl10\n")
	e.put("f.txt", "l1\nl2\nl3\nl4\nl5\nl6\nWORKSPACE\nl8\nl9\nl10\n")

	_, err := e.m.Commit(context.Background(), "fix", true, nil, Hooks{})
	require.True(t, errors.Is(err, provider.ErrStaleVersion), "commit before rebase: %v", err)

	res, err := e.m.Rebase(context.Background(), "fix", false)
	require.NoError(t, err)
	assert.Equal(t, []string{"f.txt"}, res.Merged)
	assert.Empty(t, res.Flagged)
	both := "l1\nl2\nBRANCH\nl4\nl5\nl6\nWORKSPACE\nl8\nl9\nl10\n"
	assert.Equal(t, both, bread(t, b, "f.txt"))

	// The base moved with the merge: a restart keeps it, and the commit applies.
	e.restart()
	_, err = e.m.Commit(context.Background(), "fix", false, nil, Hooks{})
	require.NoError(t, err)
	assert.Equal(t, both, e.get("f.txt"))
}

func TestRebase_ConflictChangesNothing(t *testing.T) {
	e := newEnv(t)
	e.put("f.txt", rebaseBase)
	e.put("g.txt", rebaseBase)
	b, err := e.m.Create("fix")
	require.NoError(t, err)
	bwrite(t, b, "f.txt", "l1\nl2\nBRANCH\nl4\nl5\nl6\nl7\nl8\nl9\nl10\n")
	bwrite(t, b, "g.txt", "G\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\n")
	e.put("f.txt", "l1\nl2\nWORKSPACE\nl4\nl5\nl6\nl7\nl8\nl9\nl10\n")
	e.put("g.txt", "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nG10\n") // mergeable

	_, err = e.m.Rebase(context.Background(), "fix", false)
	var ce *MergeConflictError
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.True(t, errors.Is(err, provider.ErrMergeConflict))
	assert.Equal(t, []string{"f.txt"}, ce.Paths)
	assert.Equal(t, []ConflictHunk{{Path: "f.txt", BaseStart: 3, Base: "l3\n", Ours: "BRANCH\n", Theirs: "WORKSPACE\n"}}, ce.Hunks)
	// Nothing changed, the mergeable file included.
	assert.Equal(t, "G\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\n", bread(t, b, "g.txt"))
	assert.Equal(t, "l1\nl2\nBRANCH\nl4\nl5\nl6\nl7\nl8\nl9\nl10\n", bread(t, b, "f.txt"))
}

func TestRebase_MarkersFlagUntilResolved(t *testing.T) {
	e := newEnv(t)
	b := branchOf(t, e, "a\nb\nc\n", "a\nB\nc\n")
	e.put("f.txt", "a\nW\nc\n")

	res, err := e.m.Rebase(context.Background(), "fix", true)
	require.NoError(t, err)
	assert.Equal(t, []string{"f.txt"}, res.Flagged)
	assert.Equal(t, "a\n<<<<<<< branch fix\nB\n=======\nW\n>>>>>>> workspace\nc\n", bread(t, b, "f.txt"))

	e.restart() // the flag is recorded
	b, err = e.m.Get("fix")
	require.NoError(t, err)
	_, err = e.m.Commit(context.Background(), "fix", true, nil, Hooks{})
	var ce *MergeConflictError
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.True(t, ce.Markers)
	assert.Equal(t, "a\nW\nc\n", e.get("f.txt"))

	bwrite(t, b, "f.txt", "a\nB and W\nc\n")
	_, err = e.m.Commit(context.Background(), "fix", false, nil, Hooks{})
	require.NoError(t, err)
	assert.Equal(t, "a\nB and W\nc\n", e.get("f.txt"))
}

func TestRebase_DeletedInWorkspaceConflicts(t *testing.T) {
	e := newEnv(t)
	branchOf(t, e, rebaseBase, "changed\n")
	require.NoError(t, os.Remove(filepath.Join(e.ws, "f.txt")))
	_, err := e.m.Rebase(context.Background(), "fix", true)
	var ce *MergeConflictError
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.Equal(t, []string{"f.txt"}, ce.Paths)
}

func TestRebase_UnmovedWorkspaceMergesNothing(t *testing.T) {
	e := newEnv(t)
	b := branchOf(t, e, rebaseBase, "changed\n")
	bwrite(t, b, "new.txt", "new\n")
	res, err := e.m.Rebase(context.Background(), "fix", false)
	require.NoError(t, err)
	assert.Empty(t, res.Merged)
}
