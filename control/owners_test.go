package control

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

// otherUID is the uid the tests pretend a peer has.
const otherUID = 65534

// peerQueue hands each new connection the next queued uid (the real
// credentials when the queue is empty): a test dials one connection at a
// time and waits for an answer on it before dialing the next.
type peerQueue struct {
	mu   sync.Mutex
	uids []uint32
}

func (q *peerQueue) push(uid uint32) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.uids = append(q.uids, uid)
}

func (q *peerQueue) cred(nc *net.UnixConn) (*unix.Ucred, error) {
	cred, err := peerCred(nc)
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.uids) > 0 {
		cred.Uid, cred.Gid = q.uids[0], q.uids[0]
		q.uids = q.uids[1:]
	}
	return cred, nil
}

// withPeers allows otherUID and lets the test choose each connection's uid.
func withPeers(q *peerQueue) func(*testConfig) {
	return func(cfg *testConfig) {
		cfg.AllowUIDs = append(cfg.AllowUIDs, otherUID)
		// The temp directory holding run/ must be searchable by the peer.
		if err := os.Chmod(filepath.Dir(filepath.Dir(cfg.SocketPath)), 0o711); err != nil {
			panic(err)
		}
		cfg.hooks.peerCred = q.cred
		cfg.hooks.peerCreds = func(_ *net.UnixConn, cred *unix.Ucred) (*creds, error) {
			return &creds{uid: cred.Uid, gid: cred.Gid}, nil // a pretend peer has no supplementary groups
		}
	}
}

// clientAs dials a connection the server sees as uid.
func (e *testEnv) clientAs(tb testing.TB, q *peerQueue, uid uint32) *Client {
	tb.Helper()
	q.push(uid)
	c := e.client(tb)
	_, err := c.Status(context.Background()) // served, so the uid is taken
	require.NoError(tb, err)
	return c
}

// requireDenied checks an FS_PERMISSION_DENIED answer.
func requireDenied(tb testing.TB, err error, msgAndArgs ...any) {
	tb.Helper()
	require.Error(tb, err, msgAndArgs...)
	assert.Equal(tb, provider.CodePermissionDenied, provider.CodeOf(err), "%v", err)
}

func TestSessions_AnotherUIDCannotUseCloseBindOrListASession(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the fake peer uid needs a root daemon")
	}
	q := &peerQueue{}
	env := newTestEnv(t, withPeers(q))
	require.NoError(t, os.Chmod(env.root, 0o755), "the peer may enter the workspace")
	env.file(t, "f.txt", "hello\n")
	ctx := context.Background()
	owner := env.client(t)
	sess, err := owner.OpenSession(ctx, "mine")
	require.NoError(t, err)
	_, err = owner.Read(ctx, ReadParams{Path: "f.txt", Session: sess})
	require.NoError(t, err)

	other := env.clientAs(t, q, otherUID)
	_, err = other.Read(ctx, ReadParams{Path: "f.txt", Session: sess})
	requireDenied(t, err, "reading with another uid's session")
	_, err = other.Write(ctx, WriteParams{Path: "f.txt", Content: "EVIL\n", Session: sess})
	requireDenied(t, err, "writing with another uid's session")
	_, err = other.Stat(ctx, StatParams{Path: "f.txt", Session: sess})
	requireDenied(t, err, "stat with another uid's session")
	_, err = other.Move(ctx, MoveParams{From: "f.txt", To: "g.txt", Session: sess})
	requireDenied(t, err, "moving with another uid's session")
	_, err = other.Patch(ctx, PatchParams{Patch: "*** Begin Patch\n*** Delete File: f.txt\n*** End Patch\n", Session: sess})
	requireDenied(t, err, "patching with another uid's session")
	requireDenied(t, other.BindSession(ctx, sess, os.Getpid()), "binding to another uid's session")
	requireDenied(t, other.CloseSession(ctx, sess), "closing another uid's session")
	assert.Empty(t, env.binder.recorded(), "nothing was bound")
	got, _ := env.content(t, "f.txt")
	assert.Equal(t, "hello\n", got)
	_, ok := env.store.Session(sess)
	assert.True(t, ok, "the session is still open")

	st, err := other.Status(ctx)
	require.NoError(t, err)
	for _, s := range st.Sessions {
		assert.NotEqual(t, sess, s.ID, "another uid's session is not listed")
	}
	own, err := other.OpenSession(ctx, "theirs")
	require.NoError(t, err)
	st, err = other.Status(ctx)
	require.NoError(t, err)
	require.Len(t, st.Sessions, 1, "the peer lists its own session only")
	assert.Equal(t, own, st.Sessions[0].ID)
	assert.Equal(t, uint32(otherUID), st.Sessions[0].Owner)

	st, err = owner.Status(ctx)
	require.NoError(t, err)
	ids := map[policy.SessionID]uint32{}
	for _, s := range st.Sessions {
		ids[s.ID] = s.Owner
	}
	assert.Equal(t, uint32(0), ids[sess], "root lists its session")
	assert.Equal(t, uint32(otherUID), ids[own], "root lists every session")
	require.NoError(t, owner.CloseSession(ctx, own), "root may close any session")
	require.NoError(t, owner.CloseSession(ctx, sess))
}

func TestSessionBind_OnlyTheCallersOwnProcesses(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a process of another uid needs root")
	}
	q := &peerQueue{}
	env := newTestEnv(t, withPeers(q))
	ctx := context.Background()
	other := env.clientAs(t, q, otherUID)
	sess, err := other.OpenSession(ctx, "theirs")
	require.NoError(t, err)

	requireDenied(t, other.BindSession(ctx, sess, 1), "pid 1 is root's")
	requireDenied(t, other.BindSession(ctx, sess, os.Getpid()), "the test process is root's")
	assert.Empty(t, env.binder.recorded())

	child := exec.Command("sleep", "60")
	child.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: otherUID, Gid: otherUID}}
	require.NoError(t, child.Start())
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	require.NoError(t, other.BindSession(ctx, sess, child.Process.Pid), "its own process binds")
	assert.Equal(t, []bindCall{{sess, child.Process.Pid}}, env.binder.recorded())

	root := env.client(t)
	require.NoError(t, root.BindSession(ctx, sess, 1), "root binds any process to any session")
}
