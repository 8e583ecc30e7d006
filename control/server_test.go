package control

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

// requireFS asserts err is a daemon filesystem error with code.
func requireFS(t *testing.T, err error, code provider.Code) *RPCError {
	t.Helper()
	require.Error(t, err)
	var re *RPCError
	require.True(t, errors.As(err, &re), "not an RPCError: %v", err)
	require.Equal(t, code, re.Code, "error: %v", err)
	return re
}

func TestSocket_FileModeAndDirectory(t *testing.T) {
	env := newTestEnv(t)
	st, err := os.Stat(env.sock)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	assert.Equal(t, os.ModeSocket, st.Mode().Type())
	dst, err := os.Stat(filepath.Dir(env.sock))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), dst.Mode().Perm())
}

func TestSocket_LiveDaemonRefusedStaleSocketReplaced(t *testing.T) {
	env := newTestEnv(t)
	_, err := NewServer(Config{SocketPath: env.sock, Service: env.svc, Logger: quietLogger()})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "held by a running daemon")

	// A socket file nobody listens on is stale and is replaced.
	stale := filepath.Join(filepath.Dir(env.sock), "stale.sock")
	ln, err := newUnlinkLessListener(stale)
	require.NoError(t, err)
	require.NoError(t, ln.Close())
	_, err = os.Stat(stale)
	require.NoError(t, err, "the stale socket file must still exist for this test")
	srv, err := NewServer(Config{SocketPath: stale, Service: env.svc, Logger: quietLogger()})
	require.NoError(t, err)
	require.NoError(t, srv.Close())

	// A regular file in the way is not removed.
	regular := filepath.Join(filepath.Dir(env.sock), "regular")
	require.NoError(t, os.WriteFile(regular, []byte("x"), 0o600))
	_, err = NewServer(Config{SocketPath: regular, Service: env.svc, Logger: quietLogger()})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a socket")
}

func TestSession_OpenBindClose(t *testing.T) {
	env := newTestEnv(t)
	c := env.client(t)
	ctx := context.Background()

	id, err := c.OpenSession(ctx, "agent")
	require.NoError(t, err)
	require.NotEmpty(t, id)
	sess, ok := env.store.Session(id)
	require.True(t, ok)
	assert.Equal(t, "agent", sess.Name)

	require.NoError(t, c.BindSession(ctx, id, 4242))
	assert.Equal(t, []bindCall{{id, 4242}}, env.binder.recorded())

	err = c.BindSession(ctx, "nope", 1)
	var re *RPCError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, CodeInvalidParams, re.RPCCode)
	assert.Equal(t, provider.CodeInvalidArgument, re.Code)
	assert.Equal(t, "unknown session nope: it was never opened or has been closed; open a new session", re.Message)

	require.NoError(t, c.CloseSession(ctx, id))
	_, ok = env.store.Session(id)
	assert.False(t, ok)
	err = c.CloseSession(ctx, id)
	require.ErrorAs(t, err, &re)
	assert.Equal(t, CodeInvalidParams, re.RPCCode)
}

func TestSession_BindWithoutBinderIsUnavailable(t *testing.T) {
	env := newTestEnv(t, func(c *testConfig) { c.Svc.Binder = nil })
	c := env.client(t)
	id, err := c.OpenSession(context.Background(), "")
	require.NoError(t, err)
	err = c.BindSession(context.Background(), id, 1)
	var re *RPCError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, CodeUnavailable, re.RPCCode)
}

func TestSession_UnknownSessionOnMutation(t *testing.T) {
	env := newTestEnv(t)
	c := env.client(t)
	_, err := c.Write(context.Background(), WriteParams{Path: "a.txt", Content: "x", Session: "ghost"})
	var re *RPCError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, CodeInvalidParams, re.RPCCode)
	assert.Equal(t, provider.CodeInvalidArgument, re.Code)
	assert.Equal(t, "unknown session ghost: it was never opened or has been closed; open a new session", re.Message)
	_, exists := env.content(t, "a.txt")
	assert.False(t, exists)
}

func TestSession_ImplicitSessionClosedWithConnection(t *testing.T) {
	env := newTestEnv(t)
	before := len(env.store.Sessions())
	c, err := Dial(env.sock)
	require.NoError(t, err)
	_, err = c.Write(context.Background(), WriteParams{Path: "a.txt", Content: "x"})
	require.NoError(t, err)
	sessions := env.store.Sessions()
	require.Len(t, sessions, before+1)
	assert.True(t, strings.HasPrefix(sessions[len(sessions)-1].Name, "conn-"))
	require.NoError(t, c.Close())
	require.Eventually(t, func() bool { return len(env.store.Sessions()) == before }, 10*time.Second, 5*time.Millisecond)
}

func TestStat_ReportsWithoutObserving(t *testing.T) {
	env := newTestEnv(t)
	env.file(t, "dir/a.txt", "hello\n")
	c := env.client(t)
	ctx := context.Background()

	st, err := c.Stat(ctx, StatParams{Path: "dir/a.txt"})
	require.NoError(t, err)
	assert.True(t, st.Exists)
	assert.Equal(t, provider.TypeFile, st.Type)
	require.NotNil(t, st.Size)
	assert.EqualValues(t, 6, *st.Size)
	assert.NotEmpty(t, st.Version)
	assert.Equal(t, "dir/a.txt", st.DisplayPath)

	dir, err := c.Stat(ctx, StatParams{Path: "dir"})
	require.NoError(t, err)
	assert.Equal(t, provider.TypeDirectory, dir.Type)
	assert.Nil(t, dir.Size)

	missing, err := c.Stat(ctx, StatParams{Path: "nope.txt"})
	require.NoError(t, err)
	assert.False(t, missing.Exists)
	assert.Equal(t, "nope.txt", missing.DisplayPath)

	// The stat observed nothing: a token-less edit is refused, one guarded
	// by the stat's version passes.
	_, err = c.Edit(ctx, EditParams{Path: "dir/a.txt", OldString: "hello", NewString: "bye"})
	assert.Equal(t, provider.CodeNotObserved, provider.CodeOf(err), "%v", err)
	_, err = c.Edit(ctx, EditParams{Path: "dir/a.txt", OldString: "hello", NewString: "bye", Expected: &VersionExpected{Version: st.Version}})
	require.NoError(t, err)
}

func TestList_NameOrder(t *testing.T) {
	env := newTestEnv(t)
	env.file(t, "b.txt", "bb")
	env.file(t, "a.txt", "a")
	env.file(t, "sub/c.txt", "c")
	res, err := env.client(t).List(context.Background(), ListParams{Path: "."})
	require.NoError(t, err)
	var names []string
	for _, e := range res.Entries {
		names = append(names, e.Name)
	}
	assert.Equal(t, []string{"a.txt", "b.txt", "sub"}, names)
	require.NotNil(t, res.Entries[1].Size)
	assert.EqualValues(t, 2, *res.Entries[1].Size)
	assert.Equal(t, provider.TypeDirectory, res.Entries[2].Type)
}

func TestRead_WindowNumbersAndExactTotal(t *testing.T) {
	env := newTestEnv(t)
	env.file(t, "f.txt", "one\ntwo\r\nthree\nfour\nfive\n")
	c := env.client(t)
	ctx := context.Background()
	two, three := 2, 2
	res, err := c.Read(ctx, ReadParams{Path: "f.txt", Offset: &two, Limit: &three})
	require.NoError(t, err)
	assert.Equal(t, []Line{{Number: 2, Text: "two"}, {Number: 3, Text: "three"}}, res.Lines)
	assert.Equal(t, 5, res.TotalLines)
	assert.Equal(t, 2, res.Offset)
	assert.False(t, res.TruncatedByBytes)
	st, err := c.Stat(ctx, StatParams{Path: "f.txt"})
	require.NoError(t, err)
	assert.Equal(t, st.Version, res.Version, "the read's version is the stat version")
}

func TestRead_ByteCapKeepsTotalExact(t *testing.T) {
	env := newTestEnv(t)
	env.file(t, "f.txt", strings.Repeat("0123456789\n", 100))
	var maxBytes int64 = 25 // two lines of 11 bytes fit, the third does not
	res, err := env.client(t).Read(context.Background(), ReadParams{Path: "f.txt", MaxBytes: &maxBytes})
	require.NoError(t, err)
	assert.Len(t, res.Lines, 2)
	assert.True(t, res.TruncatedByBytes)
	assert.Equal(t, 100, res.TotalLines)
}

func TestRead_MissingRecordsAbsentAndFails(t *testing.T) {
	env := newTestEnv(t)
	c := env.client(t)
	ctx := context.Background()
	_, err := c.Read(ctx, ReadParams{Path: "gone.txt"})
	requireFS(t, err, provider.CodeNotFound)
	// Absent authorizes a create, not an edit.
	_, err = c.Edit(ctx, EditParams{Path: "gone.txt", OldString: "a", NewString: "b"})
	requireFS(t, err, provider.CodeNotFound)
	out, err := c.Write(ctx, WriteParams{Path: "gone.txt", Content: "new\n"})
	require.NoError(t, err)
	assert.Equal(t, provider.OpCreate, out.Operation)
	assert.Nil(t, out.Before)
}

func TestWrite_GuardFollowsObservation(t *testing.T) {
	env := newTestEnv(t)
	env.file(t, "a.txt", "old\n")
	c := env.client(t)
	ctx := context.Background()

	_, err := c.Write(ctx, WriteParams{Path: "a.txt", Content: "new\n"})
	requireFS(t, err, provider.CodeNotObserved)

	_, err = c.Read(ctx, ReadParams{Path: "a.txt"})
	require.NoError(t, err)
	out, err := c.Write(ctx, WriteParams{Path: "a.txt", Content: "new\n"})
	require.NoError(t, err)
	assert.Equal(t, provider.OpUpdate, out.Operation)
	require.NotNil(t, out.Before)
	assert.Equal(t, "old\n", *out.Before)
	assert.Equal(t, "new\n", out.After)
	got, _ := env.content(t, "a.txt")
	assert.Equal(t, "new\n", got)
}

func TestWrite_ExplicitGuards(t *testing.T) {
	env := newTestEnv(t)
	env.file(t, "a.txt", "old\n")
	c := env.client(t)
	ctx := context.Background()

	_, err := c.Write(ctx, WriteParams{Path: "a.txt", Content: "x", Expected: &WriteExpected{Kind: provider.CreateIfAbsent}})
	requireFS(t, err, provider.CodeNotObserved)
	_, err = c.Write(ctx, WriteParams{Path: "a.txt", Content: "x", Expected: &WriteExpected{Kind: provider.ReplaceIfVersion, Version: "bogus"}})
	requireFS(t, err, provider.CodeStaleVersion)
	st, err := c.Stat(ctx, StatParams{Path: "a.txt", Session: mustSession(t, c)})
	require.NoError(t, err)
	_, err = c.Write(ctx, WriteParams{Path: "a.txt", Content: "guarded\n", Expected: &WriteExpected{Kind: provider.ReplaceIfVersion, Version: st.Version}})
	require.NoError(t, err)

	_, err = c.Write(ctx, WriteParams{Path: "a.txt", Content: "forced\n", Unconditional: true})
	require.NoError(t, err)
	got, _ := env.content(t, "a.txt")
	assert.Equal(t, "forced\n", got)
	log, err := c.Log(ctx, LogParams{Path: "a.txt", Limit: 1})
	require.NoError(t, err)
	require.Len(t, log.Entries, 1)
	assert.True(t, log.Entries[0].Unconditional, "an unconditional write is audited as such")

	_, err = c.Write(ctx, WriteParams{Path: "a.txt", Content: "x", Unconditional: true, Expected: &WriteExpected{Kind: provider.CreateIfAbsent}})
	var re *RPCError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, CodeInvalidParams, re.RPCCode)
	_, err = c.Write(ctx, WriteParams{Path: "a.txt", Content: "x", Expected: &WriteExpected{Kind: "sometimes"}})
	require.ErrorAs(t, err, &re)
	assert.Equal(t, CodeInvalidParams, re.RPCCode)
}

func mustSession(t *testing.T, c *Client) policy.SessionID {
	t.Helper()
	id, err := c.OpenSession(context.Background(), "")
	require.NoError(t, err)
	return id
}

func TestEdit_StaleNamesLastWriter(t *testing.T) {
	env := newTestEnv(t)
	env.file(t, "src/a.go", "package a\n")
	c := env.client(t)
	other := env.client(t)
	ctx := context.Background()
	mine := mustSession(t, c)
	theirs, err := other.OpenSession(ctx, "other-agent")
	require.NoError(t, err)

	_, err = c.Read(ctx, ReadParams{Path: "src/a.go", Session: mine})
	require.NoError(t, err)
	_, err = other.Read(ctx, ReadParams{Path: "src/a.go", Session: theirs})
	require.NoError(t, err)
	_, err = other.Edit(ctx, EditParams{Path: "src/a.go", OldString: "a", NewString: "b", Session: theirs, ReplaceAll: true})
	require.NoError(t, err)

	_, err = c.Edit(ctx, EditParams{Path: "src/a.go", OldString: "package", NewString: "pkg", Session: mine})
	re := requireFS(t, err, provider.CodeStaleVersion)
	assert.True(t, errors.Is(err, provider.ErrStaleVersion), "client errors unwrap to provider errors")
	assert.Equal(t, "src/a.go changed since you read it (by an edit from session "+string(theirs)+` ("other-agent") over the socket, just now); read it again, then redo your change`,
		re.Message, "the wording MCP uses too, with the session's name")
	assert.Equal(t, "src/a.go", re.Path)
}

func TestEdit_ExplicitVersionAndMatchErrors(t *testing.T) {
	env := newTestEnv(t)
	env.file(t, "a.txt", "x x\n")
	c := env.client(t)
	ctx := context.Background()
	st, err := c.Stat(ctx, StatParams{Path: "a.txt", Session: mustSession(t, c)})
	require.NoError(t, err)
	_, err = c.Edit(ctx, EditParams{Path: "a.txt", OldString: "x", NewString: "y", Expected: &VersionExpected{Version: st.Version}})
	requireFS(t, err, provider.CodeAmbiguousEdit)
	_, err = c.Edit(ctx, EditParams{Path: "a.txt", OldString: "zzz", NewString: "y", Expected: &VersionExpected{Version: st.Version}})
	requireFS(t, err, provider.CodeEditNotFound)
	out, err := c.Edit(ctx, EditParams{Path: "a.txt", OldString: "x", NewString: "y", ReplaceAll: true, Expected: &VersionExpected{Version: st.Version}})
	require.NoError(t, err)
	assert.Equal(t, "x x\n", out.Before)
	assert.Equal(t, "y y\n", out.After)
	_, err = c.Edit(ctx, EditParams{Path: "a.txt", OldString: "y", NewString: "z", Expected: &VersionExpected{Version: st.Version}})
	requireFS(t, err, provider.CodeStaleVersion)
}

func TestDelete_GuardedByObservation(t *testing.T) {
	env := newTestEnv(t)
	env.file(t, "a.txt", "bye\n")
	c := env.client(t)
	ctx := context.Background()
	_, err := c.Delete(ctx, DeleteParams{Path: "a.txt"})
	requireFS(t, err, provider.CodeNotObserved)
	_, err = c.Read(ctx, ReadParams{Path: "a.txt"})
	require.NoError(t, err)
	out, err := c.Delete(ctx, DeleteParams{Path: "a.txt"})
	require.NoError(t, err)
	require.NotNil(t, out.Before)
	assert.Equal(t, "bye\n", *out.Before)
	_, exists := env.content(t, "a.txt")
	assert.False(t, exists)
}

func TestMove_PublishesDestinationRemovesSource(t *testing.T) {
	env := newTestEnv(t)
	env.file(t, "a.txt", "moving\n")
	c := env.client(t)
	ctx := context.Background()
	_, err := c.Read(ctx, ReadParams{Path: "a.txt"})
	require.NoError(t, err)
	_, err = c.Move(ctx, MoveParams{From: "a.txt", To: "a.txt"})
	requireFS(t, err, provider.CodeSameTarget)
	out, err := c.Move(ctx, MoveParams{From: "a.txt", To: "b.txt"})
	require.NoError(t, err)
	assert.True(t, out.SourceDeleted)
	assert.Equal(t, "moving\n", out.Destination.After)
	got, ok := env.content(t, "b.txt")
	require.True(t, ok)
	assert.Equal(t, "moving\n", got)
	_, ok = env.content(t, "a.txt")
	assert.False(t, ok)
}

func TestCwd_ResolvesRelativePaths(t *testing.T) {
	env := newTestEnv(t)
	env.file(t, "pkg/sub/x.txt", "x\n")
	res, err := env.client(t).Read(context.Background(), ReadParams{Path: "x.txt", Cwd: "pkg/sub"})
	require.NoError(t, err)
	assert.Equal(t, "pkg/sub/x.txt", res.DisplayPath)
}

func TestLog_NewestFirst(t *testing.T) {
	env := newTestEnv(t)
	c := env.client(t)
	ctx := context.Background()
	_, err := c.Write(ctx, WriteParams{Path: "a.txt", Content: "1\n"})
	require.NoError(t, err)
	_, err = c.Edit(ctx, EditParams{Path: "a.txt", OldString: "1", NewString: "2"})
	require.NoError(t, err)
	_, err = c.Write(ctx, WriteParams{Path: "b.txt", Content: "b\n"})
	require.NoError(t, err)

	all, err := c.Log(ctx, LogParams{})
	require.NoError(t, err)
	require.Len(t, all.Entries, 3)
	assert.Equal(t, "b.txt", all.Entries[0].Path)
	only, err := c.Log(ctx, LogParams{Path: "a.txt"})
	require.NoError(t, err)
	require.Len(t, only.Entries, 2)
	assert.Equal(t, policy.OpEdit, only.Entries[0].Op)
	assert.Equal(t, policy.OpWrite, only.Entries[1].Op)
	assert.Equal(t, policy.ChannelSocket, only.Entries[0].Channel)
	assert.Greater(t, only.Entries[0].Seq, only.Entries[1].Seq)
}

func TestStatus_CountsRequestsAndErrors(t *testing.T) {
	env := newTestEnv(t)
	c := env.client(t)
	ctx := context.Background()
	_, err := c.Read(ctx, ReadParams{Path: "missing"})
	require.Error(t, err)
	id := mustSession(t, c)
	st, err := c.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, env.root, mustEval(t, st.Source))
	assert.Equal(t, "/mnt/test", st.Mount)
	assert.Equal(t, MethodCounters{Requests: 1, Errors: 1}, st.Counters[MethodRead])
	assert.Equal(t, MethodCounters{Requests: 1}, st.Counters[MethodSessionOpen])
	assert.GreaterOrEqual(t, st.Connections, 1)
	var ids []policy.SessionID
	for _, s := range st.Sessions {
		ids = append(ids, s.ID)
	}
	assert.Contains(t, ids, id)
}

func mustEval(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	require.NoError(t, err)
	return r
}

func TestServe_CloseEndsConnections(t *testing.T) {
	env := newTestEnv(t)
	c := env.client(t)
	_, err := c.Status(context.Background())
	require.NoError(t, err)
	require.NoError(t, env.srv.Close())
	_, err = c.Status(context.Background())
	require.ErrorIs(t, err, ErrClientClosed)
	_, err = os.Stat(env.sock)
	assert.True(t, os.IsNotExist(err), "Close removes the socket file")
}

// TestStatus_ReportsFuseRequestsAndCPU pins that daemon.status carries the
// mount's request counters when the daemon has them, and the daemon's CPU
// time.
func TestStatus_ReportsFuseRequestsAndCPU(t *testing.T) {
	counts := map[string]uint64{"LOOKUP": 3, "CREATE": 1}
	env := newTestEnv(t, func(c *testConfig) { c.FuseRequests = func() map[string]uint64 { return counts } })
	st, err := env.client(t).Status(context.Background())
	require.NoError(t, err)
	assert.Equal(t, counts, st.FuseRequests)
	assert.Greater(t, st.CPUSeconds, 0.0)

	none := newTestEnv(t)
	st, err = none.client(t).Status(context.Background())
	require.NoError(t, err)
	assert.Nil(t, st.FuseRequests, "no mount, no counters")
}
