package control

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

// boundPeer binds the test process to a new session of env (through a
// connection that is then closed) and returns the session, another session
// that read main.go, a client connected after the bind (a bound peer) and
// one connected before it (a person's).
func boundPeer(t *testing.T, env *testEnv) (own, other policy.SessionID, bound, person *Client) {
	t.Helper()
	ctx := context.Background()
	env.file(t, "main.go", "person's bytes\n")
	admin := env.client(t)
	own, err := admin.OpenSession(ctx, "agent")
	require.NoError(t, err)
	other, err = admin.OpenSession(ctx, "other")
	require.NoError(t, err)
	_, err = admin.Read(ctx, ReadParams{Path: "main.go", Session: other})
	require.NoError(t, err)
	binder, err := Dial(env.sock)
	require.NoError(t, err)
	require.NoError(t, binder.BindSession(ctx, own, os.Getpid()))
	require.NoError(t, binder.Close())
	return own, other, env.client(t), admin
}

// TestBoundPeer_NamingAnotherSessionRunsAsItsOwn pins case 2 of the side
// doors: a bound process that names another session (which read the file)
// still asks as its own, which never read it.
func TestBoundPeer_NamingAnotherSessionRunsAsItsOwn(t *testing.T) {
	env := newTestEnv(t)
	own, other, bound, _ := boundPeer(t, env)
	ctx := context.Background()
	_, err := bound.Write(ctx, WriteParams{Path: "main.go", Content: "agent\n", Session: other})
	require.Error(t, err, "the bound process's own session never read main.go")
	assert.Equal(t, provider.CodeNotObserved, provider.CodeOf(err), "%v", err)
	got, _ := env.content(t, "main.go")
	assert.Equal(t, "person's bytes\n", got)

	// Its reads are its own session's too: after one, it may write.
	_, err = bound.Read(ctx, ReadParams{Path: "main.go", Session: other})
	require.NoError(t, err)
	_, err = bound.Write(ctx, WriteParams{Path: "main.go", Content: "agent\n", Session: other})
	require.NoError(t, err)
	res, err := bound.Log(ctx, LogParams{Limit: 1})
	require.NoError(t, err)
	require.NotEmpty(t, res.Entries)
	assert.Equal(t, own, res.Entries[0].Session, "the change is credited to the bound session")
}

// TestBoundPeer_CannotSkipTheGuard pins case 1: an unconditional change from
// a bound peer is FS_PERMISSION_DENIED; an unbound caller keeps it.
func TestBoundPeer_CannotSkipTheGuard(t *testing.T) {
	env := newTestEnv(t)
	own, _, bound, person := boundPeer(t, env)
	ctx := context.Background()
	_, err := bound.Write(ctx, WriteParams{Path: "main.go", Content: "X\n", Unconditional: true})
	require.Error(t, err)
	assert.Equal(t, provider.CodePermissionDenied, provider.CodeOf(err), "%v", err)
	assert.Contains(t, err.Error(), "a process bound to session "+string(own)+" cannot skip the guard")
	_, err = bound.Delete(ctx, DeleteParams{Path: "main.go", Unconditional: true})
	assert.Equal(t, provider.CodePermissionDenied, provider.CodeOf(err), "delete: %v", err)
	got, _ := env.content(t, "main.go")
	assert.Equal(t, "person's bytes\n", got)

	refused := true
	res, err := person.Log(ctx, LogParams{Refused: &refused, Session: own})
	require.NoError(t, err)
	assert.NotEmpty(t, res.Entries, "the refusal is audited")

	// A person's connection (made before the bind) is unbound: it keeps it.
	_, err = person.Write(ctx, WriteParams{Path: "main.go", Content: "person\n", Unconditional: true})
	require.NoError(t, err)
}

// TestBoundPeer_CannotBindToAnotherSession pins that a bound process binds
// itself (or any process) only to its own session, whatever it names.
func TestBoundPeer_CannotBindToAnotherSession(t *testing.T) {
	env := newTestEnv(t)
	own, other, bound, _ := boundPeer(t, env)
	got, err := bound.Bind(context.Background(), other, os.Getpid())
	require.NoError(t, err)
	assert.Equal(t, own, got, "the bind runs as the bound session")
	calls := env.binder.recorded()
	require.NotEmpty(t, calls)
	assert.Equal(t, own, calls[len(calls)-1].session, "bound to its own session, not to %s", other)
}

// TestStat_GrantsNoObservation pins case 3: fs.stat records nothing, so a
// token-less write after it is refused; its version stays a valid
// explicit guard.
func TestStat_GrantsNoObservation(t *testing.T) {
	env := newTestEnv(t)
	env.file(t, "main.go", "person's bytes\n")
	c := env.client(t)
	ctx := context.Background()
	st, err := c.Stat(ctx, StatParams{Path: "main.go"})
	require.NoError(t, err)
	_, err = c.Write(ctx, WriteParams{Path: "main.go", Content: "X\n"})
	require.Error(t, err, "a stat is not a read")
	assert.Equal(t, provider.CodeNotObserved, provider.CodeOf(err), "%v", err)
	_, err = c.Write(ctx, WriteParams{Path: "main.go", Content: "X\n",
		Expected: &WriteExpected{Kind: provider.ReplaceIfVersion, Version: st.Version}})
	require.NoError(t, err, "the stat's version is a valid explicit token")
}
