package integration

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
)

// TestBranch_RebaseRecipe is the README's conflict case through the
// daemon and the CLI: the branch and a person's save through the mount
// change lines three apart; the commit is refused, 'branch commit
// --rebase' merges, and the workspace ends with both changes.
func TestBranch_RebaseRecipe(t *testing.T) {
	const base = "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\n"
	d := startDaemon(t, daemonOptions{Files: map[string]string{"f.txt": base}})
	ctx := testCtx(t)
	_, errOut, code := d.dsh("branch", "create", "fix")
	require.Equal(t, 0, code, errOut)
	sess, err := d.Client.OpenSessionWith(ctx, control.SessionOpenParams{Name: "agent", Branch: "fix"})
	require.NoError(t, err)
	_, err = d.Client.Read(ctx, control.ReadParams{Path: "f.txt", Session: sess})
	require.NoError(t, err)
	_, err = d.Client.Edit(ctx, control.EditParams{Path: "f.txt", OldString: "l3\n", NewString: "BRANCH\n", Session: sess})
	require.NoError(t, err)

	d.sh("sed -i s/^l6$/WORKSPACE/ f.txt")
	_, errOut, code = d.dsh("branch", "commit", "fix")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "FS_STALE_VERSION")

	out, errOut, code := d.dsh("branch", "commit", "fix", "--rebase")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "committed branch fix: 1 file\n")
	assert.Equal(t, "l1\nl2\nBRANCH\nl4\nl5\nWORKSPACE\nl7\nl8\nl9\nl10\n", d.sh("cat f.txt"))
}
