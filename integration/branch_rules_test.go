package integration

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/provider"
)

// TestBranchRules_ANewHideReachesTheBranchDiff is item 3 of issue 28: a
// branch made before a restart with a new --hide '*.key' does not show
// k.key's contents in branch.diff any more (named, marked hidden); a read
// in the branch is refused as in the workspace; the commit is refused.
func TestBranchRules_ANewHideReachesTheBranchDiff(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"k.key": "old-secret\n", "a.txt": "a0\n"}})
	ctx := testCtx(t)
	_, err := d.Client.BranchCreate(ctx, control.BranchCreateParams{Name: "b"})
	require.NoError(t, err)
	for path, content := range map[string]string{"k.key": "new-secret\n", "a.txt": "a1\n"} {
		_, err = d.Client.Write(ctx, control.WriteParams{Path: path, Content: content, Branch: "b", Unconditional: true})
		require.NoError(t, err)
	}
	d.stop()
	d = startDaemon(t, daemonOptions{Dirs: d.dirs(), Args: []string{"--hide", "*.key"}})

	page, err := d.Client.BranchDiff(ctx, control.BranchDiffParams{Name: "b"})
	require.NoError(t, err)
	assert.NotContains(t, page.Diff, "secret", "the hidden file's old and new contents are withheld")
	assert.NotContains(t, page.Diff, "k.key")
	assert.Contains(t, page.Diff, "+a1")
	access := map[string]string{}
	for _, f := range page.Files {
		access[f.Path] = f.Access
	}
	assert.Equal(t, map[string]string{"a.txt": "", "k.key": "hidden"}, access)

	out, errOut, code := d.dsh("branch", "diff", "b", "--stat")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "k.key +0 -0 (hidden in this daemon's view: content withheld, a commit is refused)")

	_, err = d.Client.Read(ctx, control.ReadParams{Path: "k.key", Branch: "b"})
	assert.Equal(t, provider.CodeSandboxDenied, provider.CodeOf(err), "%v", err)
	_, err = d.Client.BranchCommit(ctx, control.BranchCommitParams{Name: "b"})
	require.Error(t, err)
	assert.Equal(t, provider.CodeSandboxDenied, provider.CodeOf(err), "%v", err)
}
