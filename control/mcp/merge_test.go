package mcp_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control/mcp"
)

// The edit tool's merge argument: a stale edit far from the other
// agent's change is merged and says so; without merge it stays stale.
func TestEdit_MergeArgumentMergesAStaleEdit(t *testing.T) {
	d := startDaemon(t)
	d.writeFile(t, "f.txt", "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n")
	a, b := d.connect(t, "a"), d.connect(t, "b")
	a.ok(t, mcp.ToolRead, map[string]any{"path": "f.txt"})
	b.ok(t, mcp.ToolRead, map[string]any{"path": "f.txt"})
	b.ok(t, mcp.ToolEdit, map[string]any{"path": "f.txt", "old_string": "seven\n", "new_string": "SEVEN\n"})

	text := a.fail(t, mcp.ToolEdit, map[string]any{"path": "f.txt", "old_string": "one\n", "new_string": "ONE\n"})
	assert.Contains(t, text, "FS_STALE_VERSION")

	res := a.call(t, mcp.ToolEdit, map[string]any{"path": "f.txt", "old_string": "one\n", "new_string": "ONE\n", "merge": true})
	require.False(t, res.IsError, textOf(res))
	var out mcp.EditOutput
	structured(t, res, &out)
	assert.NotEmpty(t, out.MergedOver)
	assert.Contains(t, textOf(res), "merged")
	assert.Equal(t, "ONE\ntwo\nthree\nfour\nfive\nsix\nSEVEN\neight\n", d.readFile(t, "f.txt"))
}
