package mcp_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/control/mcp"
)

func TestApplyPatch_AtomicGoesThroughTheJournal(t *testing.T) {
	d := startDaemon(t)
	d.writeFile(t, "a.txt", "alpha\n")
	a := d.connect(t, "patcher")
	a.ok(t, mcp.ToolRead, map[string]any{"path": "a.txt"})
	res := a.call(t, mcp.ToolApplyPatch, map[string]any{"atomic": true, "patch": "*** Begin Patch\n*** Update File: a.txt\n@@\n-alpha\n+ALPHA\n*** Add File: b.txt\n+b\n*** End Patch"})
	require.False(t, res.IsError, textOf(res))
	assert.Equal(t, "ALPHA\n", d.readFile(t, "a.txt"))
	assert.Equal(t, "b\n", d.readFile(t, "b.txt"))
	lg, err := d.admin.Log(context.Background(), control.LogParams{Path: "b.txt"})
	require.NoError(t, err)
	require.NotEmpty(t, lg.Entries)
	assert.Equal(t, "atomic patch", lg.Entries[0].Detail, "committed by the journal, not op by op")
}

func TestConfig_BranchMakesEveryToolActInIt(t *testing.T) {
	d := startDaemon(t)
	d.writeFile(t, "a.txt", "alpha\n")
	_, err := d.admin.BranchCreate(context.Background(), control.BranchCreateParams{Name: "agent-work"})
	require.NoError(t, err)
	d.branch = "agent-work"
	a := d.connect(t, "brancher")
	a.ok(t, mcp.ToolRead, map[string]any{"path": "a.txt"})
	a.ok(t, mcp.ToolEdit, map[string]any{"path": "a.txt", "old_string": "alpha", "new_string": "beta"})
	a.ok(t, mcp.ToolWrite, map[string]any{"path": "new.txt", "content": "n\n"})
	assert.Equal(t, "alpha\n", d.readFile(t, "a.txt"), "the workspace is untouched")
	assert.False(t, d.exists("new.txt"))
	diff, err := d.admin.BranchDiff(context.Background(), control.BranchDiffParams{Name: "agent-work"})
	require.NoError(t, err)
	assert.Equal(t, []control.BranchFile{{Path: "a.txt", Status: "modified"}, {Path: "new.txt", Status: "added"}}, diff.Files)
}
