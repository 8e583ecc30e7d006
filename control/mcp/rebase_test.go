package mcp_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/control/mcp"
)

// The branch_rebase tool: a conflict lists the regions in the error
// text; with markers the branch gets them and the result names the file.
func TestBranchRebase_ConflictTextAndMarkers(t *testing.T) {
	d := startDaemon(t)
	ctx := context.Background()
	d.writeFile(t, "f.txt", "a\nb\nc\n")
	_, err := d.admin.BranchCreate(ctx, control.BranchCreateParams{Name: "fix"})
	require.NoError(t, err)
	_, err = d.admin.Write(ctx, control.WriteParams{Path: "f.txt", Content: "a\nB\nc\n", Branch: "fix", Unconditional: true})
	require.NoError(t, err)
	d.writeFile(t, "f.txt", "a\nW\nc\n")
	a := d.connect(t, "rebaser")

	text := a.fail(t, mcp.ToolBranchRebase, map[string]any{"name": "fix"})
	assert.Contains(t, text, "FS_MERGE_CONFLICT: ")
	assert.Contains(t, text, "f.txt, from base line 2:\n<<<<<<< ours\nB\n=======\nW\n>>>>>>> theirs")

	res := a.call(t, mcp.ToolBranchRebase, map[string]any{"name": "fix", "markers": true})
	require.False(t, res.IsError, textOf(res))
	var out mcp.BranchRebaseOutput
	structured(t, res, &out)
	assert.Equal(t, mcp.BranchRebaseOutput{Merged: []string{"f.txt"}, Flagged: []string{"f.txt"}}, out)
	assert.Contains(t, textOf(res), "conflict markers")
}
