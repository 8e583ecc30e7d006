package control

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireHungUp checks that the server closed the raw connection.
func (rc *rawConn) requireHungUp(tb testing.TB) {
	tb.Helper()
	require.NoError(tb, rc.c.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err := rc.r.ReadByte()
	require.True(tb, errors.Is(err, io.EOF), "the server must close the connection, got %v", err)
}

func TestConnections_OverTheCapRefusedWithAnErrorLine(t *testing.T) {
	env := newTestEnv(t, func(c *testConfig) { c.MaxConnections = 2 })
	a, b := env.raw(t), env.raw(t)
	require.Nil(t, a.call(t, statusLine).Error)
	require.Nil(t, b.call(t, statusLine).Error)

	over := env.raw(t)
	r := over.recv(t)
	require.NotNil(t, r.Error, "the third connection is refused")
	assert.Equal(t, CodeUnavailable, r.Error.Code)
	assert.Contains(t, r.Error.Message, "2 connections")
	assert.Contains(t, r.Error.Message, "--max-connections")
	over.requireHungUp(t)

	require.NoError(t, a.c.Close())
	require.Eventually(t, func() bool { return env.srv.connCount() < 2 }, 10*time.Second, time.Millisecond)
	again := env.raw(t)
	assert.Nil(t, again.call(t, statusLine).Error, "a slot freed is usable again")
	assert.Nil(t, b.call(t, statusLine).Error)
}

func TestRequestLine_UnfinishedLineTimesOut(t *testing.T) {
	env := newTestEnv(t, func(c *testConfig) { c.RequestTimeout = 100 * time.Millisecond })
	rc := env.raw(t)
	_, err := rc.c.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"fs.re`))
	require.NoError(t, err)
	r := rc.recv(t)
	require.NotNil(t, r.Error, "an unfinished line is answered with an error")
	assert.Equal(t, CodeInvalidRequest, r.Error.Code)
	assert.Contains(t, r.Error.Message, "unfinished after 100ms")
	rc.requireHungUp(t)
	require.Eventually(t, func() bool { return env.srv.connCount() == 0 }, 10*time.Second, time.Millisecond)
}

func TestIdle_ConnectionsWithoutStateAreClosedQuietWatchersAreNot(t *testing.T) {
	const idle = 100 * time.Millisecond
	env := newTestEnv(t, func(c *testConfig) { c.IdleTimeout = idle })
	env.file(t, "f.txt", "x\n")

	watcher := env.raw(t)
	r := watcher.call(t, `{"jsonrpc":"2.0","id":1,"method":"fs.watch","params":{"path":"f.txt"}}`)
	require.Nil(t, r.Error)
	opener := env.raw(t)
	r = opener.call(t, `{"jsonrpc":"2.0","id":1,"method":"session.open","params":{"name":"mcp"}}`)
	require.Nil(t, r.Error)
	bystander := env.raw(t)
	require.Nil(t, bystander.call(t, statusLine).Error)

	r = bystander.recv(t)
	require.NotNil(t, r.Error, "a connection that holds nothing is closed when idle")
	assert.Equal(t, CodeUnavailable, r.Error.Code)
	assert.Contains(t, r.Error.Message, "idle for 100ms")
	bystander.requireHungUp(t)

	time.Sleep(5 * idle) // several idle periods with nothing sent
	assert.Nil(t, watcher.call(t, statusLine).Error, "a quiet watch connection is not idle")
	assert.Nil(t, opener.call(t, statusLine).Error, "a connection holding the session it opened is not idle")
	assert.Equal(t, 2, env.srv.connCount())
}

func TestWatches_CapRefusesTheNextWatch(t *testing.T) {
	env := newTestEnv(t, func(c *testConfig) { c.Svc.MaxWatches = 1 })
	env.file(t, "f.txt", "x\n")
	ctx := context.Background()
	cl := env.client(t)
	w, err := cl.Watch(ctx, WatchParams{Path: "f.txt"})
	require.NoError(t, err)
	_, err = cl.Watch(ctx, WatchParams{Path: "f.txt"})
	var re *RPCError
	require.ErrorAs(t, err, &re, "the second watch is refused")
	assert.Equal(t, CodeUnavailable, re.RPCCode)
	require.NoError(t, w.Close(ctx))
	w2, err := cl.Watch(ctx, WatchParams{Path: "f.txt"})
	require.NoError(t, err, "an unwatched slot is free again")
	require.NoError(t, w2.Close(ctx))
}

func TestPendingBytes_SharedBudgetRefusesAndDropsTheLine(t *testing.T) {
	const budget = 1 << 20
	env := newTestEnv(t, func(c *testConfig) { c.MaxRequestBytes, c.MaxPendingBytes = budget, budget })
	hog := env.raw(t)
	_, err := hog.c.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"fs.write","params":{"path":"a","content":"` + strings.Repeat("a", 900<<10)))
	require.NoError(t, err)
	// Every full 64 KiB fragment of the unfinished line is held and
	// counted (the rest waits in the read buffer).
	require.Eventually(t, func() bool { return env.srv.pending.inUse() == 14*readBufferSize }, 10*time.Second, time.Millisecond,
		"the unfinished line is held and counted")

	other := env.raw(t)
	line := `{"jsonrpc":"2.0","id":2,"method":"fs.write","params":{"path":"b","content":"` + strings.Repeat("b", 300<<10) + `"}}`
	before := env.srv.pending.inUse()
	r := other.call(t, line)
	require.NotNil(t, r.Error, "a line past the shared budget is refused (%d bytes held before, result %d bytes)", before, len(r.Result))
	assert.Equal(t, CodeUnavailable, r.Error.Code)
	assert.Contains(t, r.Error.Message, "--max-pending-bytes")
	assert.LessOrEqual(t, env.srv.pending.inUse(), int64(budget))
	_, ok := env.content(t, "b")
	assert.False(t, ok, "the refused request did not run")
	assert.Nil(t, other.call(t, statusLine).Error, "the connection goes on with its next line")

	require.NoError(t, hog.c.Close())
	require.Eventually(t, func() bool { return env.srv.pending.inUse() == 0 }, 10*time.Second, time.Millisecond,
		"a hung-up connection gives its bytes back")
	r = other.call(t, line)
	require.Nil(t, r.Error, "with the budget free the same request runs: %+v", r.Error)
	got, _ := env.content(t, "b")
	assert.Len(t, got, 300<<10)
	assert.Zero(t, env.srv.pending.inUse(), "an answered request gives its bytes back")
}

func TestLineReader_BudgetDropsOnlyTheLineThatPassesIt(t *testing.T) {
	b := &byteBudget{max: 10}
	lr := newLineReader(strings.NewReader("0123456789ABCDEF\nok\n"), 100)
	lr.budget = b
	f, err := lr.nextFrame()
	require.NoError(t, err)
	assert.Equal(t, lineOverBudget, f.status)
	assert.Nil(t, f.line)
	assert.Zero(t, b.inUse(), "a dropped line holds nothing")
	f, err = lr.nextFrame()
	require.NoError(t, err)
	assert.Equal(t, lineOK, f.status)
	assert.Equal(t, "ok", string(f.line))
	assert.Equal(t, int64(2), f.held)
	assert.Equal(t, int64(2), b.inUse(), "a returned line holds its bytes until released")
	b.release(f.held)
	_, err = lr.nextFrame()
	assert.ErrorIs(t, err, io.EOF)
	assert.Zero(t, b.inUse())
}

func TestConfig_PendingBoundBelowRequestBoundIsRefused(t *testing.T) {
	env := newTestEnv(t)
	_, err := NewServer(Config{SocketPath: env.sock + "2", Service: env.svc, MaxRequestBytes: 2 << 20, MaxPendingBytes: 1 << 20})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pending-bytes")
}

// TestConnections_OneUIDCannotLockOthersOut is item 7 of issue 28: with 8
// connections at most, one other uid holds 2 (a quarter), other uids
// together 6 (2 kept for root and the daemon's uid), and the refusal
// names the limit hit.
func TestConnections_OneUIDCannotLockOthersOut(t *testing.T) {
	q := &peerQueue{}
	if os.Geteuid() != 0 {
		t.Skip("the fake peer uids need a root daemon")
	}
	env := newTestEnv(t, withPeers(q), func(c *testConfig) {
		c.MaxConnections = 8
		c.AllowUIDs = append(c.AllowUIDs, 65531, 65532, 65533)
	})
	as := func(uid uint32) *rawConn {
		q.push(uid)
		return env.raw(t)
	}
	refused := func(rc *rawConn, want string) {
		t.Helper()
		r := rc.recv(t)
		require.NotNil(t, r.Error, "refused")
		assert.Equal(t, CodeUnavailable, r.Error.Code)
		assert.Contains(t, r.Error.Message, want)
		rc.requireHungUp(t)
	}
	var held []*rawConn
	for _, uid := range []uint32{65531, 65531, 65532, 65532, 65533, 65533} {
		rc := as(uid)
		require.Nil(t, rc.call(t, statusLine).Error, "uid %d", uid)
		held = append(held, rc)
	}
	refused(as(65531), "uid 65531 already holds 2 connections (the daemon's --max-connections-per-uid)")
	q.push(65534) // not allowed, counted as an uid of its own: the reserve refuses it first
	refused(env.raw(t), "reserve of 2")
	for i := 0; i < 2; i++ {
		rc := env.raw(t) // the daemon's own uid
		require.Nil(t, rc.call(t, statusLine).Error, "the daemon's uid is served from the reserve")
		held = append(held, rc)
	}
	refused(env.raw(t), "already serves 8 connections (its --max-connections)")
	require.NoError(t, held[0].c.Close())
	require.Eventually(t, func() bool { return env.srv.connCount() < 8 }, 10*time.Second, time.Millisecond)
	rc := as(65531)
	assert.Nil(t, rc.call(t, statusLine).Error, "a slot given back is usable again")
}
