package mcp_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/control/mcp"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

func TestRefusal_MCPRefusalIsAuditedAsMCP(t *testing.T) {
	d := startDaemon(t)
	d.writeFile(t, "a.txt", "one\n")
	a := d.connect(t, "agent")
	text := a.fail(t, mcp.ToolEdit, map[string]any{"path": "a.txt", "old_string": "one", "new_string": "1"})
	require.True(t, strings.HasPrefix(text, "FS_NOT_OBSERVED"), text)

	refused := true
	log, err := d.admin.Log(context.Background(), control.LogParams{Refused: &refused})
	require.NoError(t, err)
	require.Len(t, log.Entries, 1)
	e := log.Entries[0]
	assert.Equal(t, policy.ChannelMCP, e.Channel)
	assert.Equal(t, a.session, e.Session)
	assert.Equal(t, provider.CodeNotObserved, e.Refused)
	assert.Equal(t, "a.txt", e.Path)
}

func TestRefusal_StaleTextNamesAnotherAgentOverMCP(t *testing.T) {
	d := startDaemon(t)
	d.writeFile(t, "a.txt", "one\ntwo\n")
	a, b := d.connect(t, "agent-a"), d.connect(t, "agent-b")
	a.ok(t, mcp.ToolRead, map[string]any{"path": "a.txt"})
	b.ok(t, mcp.ToolRead, map[string]any{"path": "a.txt"})
	b.ok(t, mcp.ToolEdit, map[string]any{"path": "a.txt", "old_string": "two", "new_string": "2"})
	// A refusal of b's session is newer than its edit; a is still told
	// about the edit, the newest change.
	_, err := d.admin.Write(context.Background(), control.WriteParams{Path: "a.txt", Content: "x\n", Session: b.session,
		Expected: &control.WriteExpected{Kind: provider.ReplaceIfVersion, Version: "v-old"}})
	require.Equal(t, provider.CodeStaleVersion, provider.CodeOf(err), "err: %v", err)

	text := a.fail(t, mcp.ToolEdit, map[string]any{"path": "a.txt", "old_string": "one", "new_string": "1"})
	assert.Contains(t, text, "by an edit from session ")
	assert.Contains(t, text, `("agent-b") over MCP`)
}
