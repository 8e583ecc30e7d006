package control

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy"
)

func TestDescribeChange_OneWording(t *testing.T) {
	tests := []struct {
		c    Change
		want string
	}{
		{Change{Op: policy.OpWrite, Channel: policy.ChannelMount, PID: 12, Session: "s-1", SessionName: "vim", Age: 3 * time.Second},
			`by a write through the mount (pid 12, session s-1 ("vim")), 3s ago`},
		{Change{Op: policy.OpWrite, Channel: policy.ChannelMount, PID: 12}, "by a write through the mount (pid 12), just now"},
		{Change{Op: policy.OpEdit, Channel: policy.ChannelSocket, Session: "s-2", SessionName: "agent"},
			`by an edit from session s-2 ("agent") over the socket, just now`},
		{Change{Op: policy.OpEdit, Channel: policy.ChannelMCP, Session: "s-me", Unconditional: true, Age: 2 * time.Minute},
			"by an edit from this session over MCP, unconditionally, 2m ago"},
		{Change{Channel: policy.ChannelSocket}, "by a change over the socket, just now"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, DescribeChange(tt.c, "s-me"))
	}
}

func TestLog_EntriesCarryTheSessionNameAfterItClosed(t *testing.T) {
	env := newTestEnv(t)
	c := env.client(t)
	ctx := context.Background()
	id, err := c.OpenSession(ctx, "short-lived")
	require.NoError(t, err)
	_, err = c.Write(ctx, WriteParams{Path: "n.txt", Content: "x", Session: id})
	require.NoError(t, err)
	require.NoError(t, c.CloseSession(ctx, id))
	res, err := c.Log(ctx, LogParams{Path: "n.txt"})
	require.NoError(t, err)
	require.Len(t, res.Entries, 1)
	assert.Equal(t, id, res.Entries[0].Session)
	assert.Equal(t, "short-lived", res.Entries[0].SessionName)
}
