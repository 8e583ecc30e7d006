package control

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

func paths(entries []LogEntry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, string(e.Op)+" "+e.Path+" "+string(e.Refused))
	}
	return out
}

func TestLog_RefusalsAreAuditedAndFiltered(t *testing.T) {
	env := newTestEnv(t)
	env.file(t, "a.txt", "a\n")
	env.file(t, "b.txt", "b\n")
	c := env.client(t)
	ctx := context.Background()
	sa, err := c.OpenSession(ctx, "a")
	require.NoError(t, err)
	sb, err := c.OpenSession(ctx, "b")
	require.NoError(t, err)

	_, err = c.Write(ctx, WriteParams{Path: "a.txt", Content: "evil\n", Session: sa})
	requireFS(t, err, provider.CodeNotObserved)
	_, err = c.Edit(ctx, EditParams{Path: "b.txt", OldString: "b", NewString: "x", Session: sb})
	requireFS(t, err, provider.CodeNotObserved)
	_, err = c.Write(ctx, WriteParams{Path: "new.txt", Content: "n\n", Session: sa})
	require.NoError(t, err)
	_, err = c.Write(ctx, WriteParams{Path: "../outside.txt", Content: "x\n", Session: sa})
	requireFS(t, err, provider.CodeSandboxDenied)
	res, err := c.Patch(ctx, PatchParams{Session: sa, Patch: "*** Begin Patch\n*** Update File: b.txt\n@@\n-b\n+y\n*** End Patch\n"})
	requireFS(t, err, provider.CodeNotObserved)
	require.Nil(t, res)
	_, err = c.Move(ctx, MoveParams{From: "a.txt", To: "c.txt", Session: sb})
	requireFS(t, err, provider.CodeNotObserved)

	yes, no := true, false
	refused, err := c.Log(ctx, LogParams{Refused: &yes})
	require.NoError(t, err)
	assert.Equal(t, []string{
		"move a.txt FS_NOT_OBSERVED",
		"patch b.txt FS_NOT_OBSERVED",
		"write ../outside.txt FS_SANDBOX_DENIED",
		"edit b.txt FS_NOT_OBSERVED",
		"write a.txt FS_NOT_OBSERVED",
	}, paths(refused.Entries))
	for _, e := range refused.Entries {
		assert.NotEmpty(t, e.Reason, "%s %s", e.Op, e.Path)
		assert.Equal(t, policy.ChannelSocket, e.Channel)
		assert.Equal(t, uint32(os.Getuid()), e.UID)
		assert.Equal(t, int32(os.Getpid()), e.PID)
		assert.Empty(t, e.Before)
		assert.Empty(t, e.After)
	}
	assert.Equal(t, "c.txt", refused.Entries[0].To)
	assert.Equal(t, sa, refused.Entries[4].Session)
	assert.Equal(t, sb, refused.Entries[3].Session)

	changes, err := c.Log(ctx, LogParams{Refused: &no})
	require.NoError(t, err)
	assert.Equal(t, []string{"write new.txt "}, paths(changes.Entries))

	all, err := c.Log(ctx, LogParams{})
	require.NoError(t, err)
	assert.Len(t, all.Entries, 6, "refusals are listed by default")

	bOnly, err := c.Log(ctx, LogParams{Session: sb})
	require.NoError(t, err)
	assert.Equal(t, []string{"move a.txt FS_NOT_OBSERVED", "edit b.txt FS_NOT_OBSERVED"}, paths(bOnly.Entries))

	since, err := c.Log(ctx, LogParams{Since: refused.Entries[2].Seq})
	require.NoError(t, err)
	assert.Equal(t, []string{"move a.txt FS_NOT_OBSERVED", "patch b.txt FS_NOT_OBSERVED"}, paths(since.Entries))

	onA, err := c.Log(ctx, LogParams{Path: "a.txt"})
	require.NoError(t, err)
	assert.Equal(t, []string{"move a.txt FS_NOT_OBSERVED", "write a.txt FS_NOT_OBSERVED"}, paths(onA.Entries),
		"a path filter does not hide refusals")

	raw := env.raw(t).call(t, `{"jsonrpc":"2.0","id":1,"method":"fs.log","params":{"refused":true,"limit":1}}`)
	require.Nil(t, raw.Error)
	assert.Contains(t, string(raw.Result), `"refused":"FS_NOT_OBSERVED"`)
	assert.Contains(t, string(raw.Result), `"reason":"`)
}

func TestLog_StaleRefusalNamesTheCodeAndTheReason(t *testing.T) {
	env := newTestEnv(t)
	env.file(t, "f.txt", "one\n")
	c := env.client(t)
	ctx := context.Background()
	s, err := c.OpenSession(ctx, "agent")
	require.NoError(t, err)
	_, err = c.Read(ctx, ReadParams{Path: "f.txt", Session: s})
	require.NoError(t, err)
	env.file(t, "f.txt", "changed by a person\n")

	_, err = c.Edit(ctx, EditParams{Path: "f.txt", OldString: "one", NewString: "two", Session: s})
	requireFS(t, err, provider.CodeStaleVersion)
	_, err = c.Delete(ctx, DeleteParams{Path: "f.txt", Session: s})
	requireFS(t, err, provider.CodeStaleVersion)

	yes := true
	log, err := c.Log(ctx, LogParams{Refused: &yes, Session: s})
	require.NoError(t, err)
	require.Len(t, log.Entries, 2, "each refused socket request is logged, even the same (session, path, code) within a second")
	assert.Equal(t, policy.OpDelete, log.Entries[0].Op)
	e := log.Entries[1]
	assert.Equal(t, policy.OpEdit, e.Op)
	assert.Equal(t, provider.CodeStaleVersion, e.Refused)
	assert.Contains(t, e.Reason, "changed since you read it")
	assert.Equal(t, "f.txt", e.Path)
}

func TestWatch_RefusalIsNotAChange(t *testing.T) {
	env := newTestEnv(t)
	env.file(t, "w.txt", "one\n")
	watcher, writer := env.client(t), env.client(t)
	ctx := context.Background()
	w, err := watcher.Watch(ctx, WatchParams{Path: "w.txt"})
	require.NoError(t, err)

	for range 20 {
		_, err = writer.Write(ctx, WriteParams{Path: "w.txt", Content: "evil\n"})
		requireFS(t, err, provider.CodeNotObserved)
		_, err = writer.Edit(ctx, EditParams{Path: "w.txt", OldString: "one", NewString: "x", Expected: &VersionExpected{Version: "v-old"}})
		requireFS(t, err, provider.CodeStaleVersion)
	}
	yes := true
	log, err := writer.Log(ctx, LogParams{Refused: &yes})
	require.NoError(t, err)
	require.Len(t, log.Entries, 40, "each refused socket request is logged")

	// The first notification is the first real change, not a refusal.
	_, err = writer.Read(ctx, ReadParams{Path: "w.txt"})
	require.NoError(t, err)
	out, err := writer.Write(ctx, WriteParams{Path: "w.txt", Content: "two\n"})
	require.NoError(t, err)
	select {
	case ev := <-w.C:
		assert.Equal(t, ChangeModified, ev.Kind)
		assert.Equal(t, out.Version, ev.Version, "a refusal was sent as a change")
	case <-time.After(15 * time.Second):
		t.Fatal("no change notification for the real write")
	}
}

func TestLog_ChannelDeclaredAtSessionOpenLabelsTheConnection(t *testing.T) {
	env := newTestEnv(t)
	env.file(t, "a.txt", "a\n")
	mcpConn, plain := env.client(t), env.client(t)
	ctx := context.Background()
	s, err := mcpConn.OpenSessionWith(ctx, SessionOpenParams{Name: "agent", Channel: policy.ChannelMCP})
	require.NoError(t, err)

	_, err = mcpConn.Write(ctx, WriteParams{Path: "a.txt", Content: "x\n", Session: s})
	requireFS(t, err, provider.CodeNotObserved)
	_, err = mcpConn.Write(ctx, WriteParams{Path: "new.txt", Content: "x\n", Session: s})
	require.NoError(t, err)
	_, err = plain.Write(ctx, WriteParams{Path: "a.txt", Content: "y\n"})
	requireFS(t, err, provider.CodeNotObserved)

	log, err := plain.Log(ctx, LogParams{})
	require.NoError(t, err)
	require.Len(t, log.Entries, 3)
	assert.Equal(t, []policy.Channel{policy.ChannelSocket, policy.ChannelMCP, policy.ChannelMCP},
		[]policy.Channel{log.Entries[0].Channel, log.Entries[1].Channel, log.Entries[2].Channel})

	_, err = plain.OpenSessionWith(ctx, SessionOpenParams{Channel: "carrier-pigeon"})
	var re *RPCError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, CodeInvalidParams, re.RPCCode)
}
