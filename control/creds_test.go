package control

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

// peerWorkspace is a workspace a root daemon serves to a peer of otherUID:
// the root directory is searchable, secret.txt is root's 0600, private/ is
// root's 0700, shared/ is open to all.
func peerWorkspace(t *testing.T) (*testEnv, *peerQueue) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("serving another uid's permissions needs a root daemon")
	}
	q := &peerQueue{}
	env := newTestEnv(t, withPeers(q))
	require.NoError(t, os.Chmod(env.root, 0o755))
	env.file(t, "open.txt", "everyone reads\n")
	env.file(t, "secret.txt", "root only\n")
	require.NoError(t, os.Chmod(filepath.Join(env.root, "secret.txt"), 0o600))
	env.file(t, "private/x.txt", "hidden\n")
	require.NoError(t, os.Chmod(filepath.Join(env.root, "private"), 0o700))
	require.NoError(t, os.Mkdir(filepath.Join(env.root, "shared"), 0o777))
	require.NoError(t, os.Chmod(filepath.Join(env.root, "shared"), 0o777))
	return env, q
}

func TestPeer_RequestsRunWithThePeersPermissions(t *testing.T) {
	env, q := peerWorkspace(t)
	ctx := context.Background()
	peer := env.clientAs(t, q, otherUID)

	_, err := peer.Read(ctx, ReadParams{Path: "open.txt"})
	require.NoError(t, err, "a world-readable file reads")
	_, err = peer.Read(ctx, ReadParams{Path: "secret.txt"})
	requireDenied(t, err, "a 0600 root file the mount refuses the peer")
	_, err = peer.List(ctx, ListParams{Path: "private"})
	requireDenied(t, err, "listing a 0700 root directory")
	_, err = peer.Read(ctx, ReadParams{Path: "private/x.txt"})
	requireDenied(t, err, "reading through a 0700 root directory")
	_, err = peer.Write(ctx, WriteParams{Path: "secret.txt", Content: "EVIL\n", Unconditional: true})
	requireDenied(t, err, "replacing a root file in a directory the peer cannot write")
	_, err = peer.Write(ctx, WriteParams{Path: "new.txt", Content: "x\n"})
	requireDenied(t, err, "creating in a directory the peer cannot write")
	_, err = peer.Delete(ctx, DeleteParams{Path: "open.txt", Unconditional: true})
	requireDenied(t, err, "deleting from a directory the peer cannot write")
	_, err = peer.Move(ctx, MoveParams{From: "open.txt", To: "shared/stolen.txt", Unconditional: true})
	requireDenied(t, err, "moving out of a directory the peer cannot write")
	got, _ := env.content(t, "secret.txt")
	assert.Equal(t, "root only\n", got)
	_, ok := env.content(t, "open.txt")
	assert.True(t, ok)

	_, err = peer.Write(ctx, WriteParams{Path: "shared/mine.txt", Content: "peer's\n"})
	require.NoError(t, err, "creating in a directory open to all")
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(filepath.Join(env.root, "shared/mine.txt"), &st))
	assert.Equal(t, uint32(otherUID), st.Uid, "a file the peer creates is the peer's")
	_, err = peer.Edit(ctx, EditParams{Path: "shared/mine.txt", OldString: "peer's", NewString: "edited"})
	require.NoError(t, err, "the peer edits its own file")
	require.NoError(t, syscall.Stat(filepath.Join(env.root, "shared/mine.txt"), &st))
	assert.Equal(t, uint32(otherUID), st.Uid, "an edit keeps the peer's ownership")

	root := env.client(t)
	r, err := root.Read(ctx, ReadParams{Path: "secret.txt"})
	require.NoError(t, err, "root's requests still run as root")
	assert.Equal(t, "root only", r.Lines[0].Text)
}

// TestPeer_CredentialsStayOnTheirThread runs a peer's refused reads and
// root's reads of the same file at once: no root request ever sees the
// peer's credentials, and no peer request root's.
func TestPeer_CredentialsStayOnTheirThread(t *testing.T) {
	env, q := peerWorkspace(t)
	ctx := context.Background()
	peer := env.clientAs(t, q, otherUID)
	root := env.client(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var wrong []string
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		if len(wrong) < 5 {
			wrong = append(wrong, s)
		}
	}
	for g := 0; g < 8; g++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				_, err := peer.Read(ctx, ReadParams{Path: "secret.txt"})
				if provider.CodeOf(err) != provider.CodePermissionDenied {
					note("peer read: " + errString(err))
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if _, err := root.Read(ctx, ReadParams{Path: "secret.txt"}); err != nil {
					note("root read: " + err.Error())
				}
			}
		}()
	}
	wg.Wait()
	assert.Empty(t, wrong, "the first wrong outcomes")
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func TestAllowUID_SocketOpenedToTheAllowedUIDOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("--allow-uid needs a root daemon")
	}
	sockDir, err := os.MkdirTemp("", "dshallow")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	env := newTestEnv(t)
	cfg := Config{SocketPath: filepath.Join(sockDir, "run", "c.sock"), Service: env.svc, AllowUIDs: []uint32{otherUID}, Logger: quietLogger()}

	_, err = NewServer(cfg)
	require.Error(t, err, "a directory above the socket that the uid cannot search is refused at start")
	assert.Contains(t, err.Error(), "--allow-uid 65534")
	assert.Contains(t, err.Error(), sockDir, "the message names the blocking directory")

	require.NoError(t, os.Chmod(sockDir, 0o711))
	srv, err := NewServer(cfg)
	require.NoError(t, err, "with the path searchable the server starts")
	t.Cleanup(func() { _ = srv.Close() })
	fi, err := os.Stat(cfg.SocketPath)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o666), fi.Mode().Perm(), "the socket accepts the allowed uid's connect")
	di, err := os.Stat(filepath.Dir(cfg.SocketPath))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o711), di.Mode().Perm(), "the daemon's socket directory is searchable, not listable")
}

// BenchmarkStat_PeerCredentials measures fs.stat round trips of root (the
// daemon's own credentials) and of another uid (its own thread and
// credentials per request).
func BenchmarkStat_PeerCredentials(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("serving another uid's permissions needs a root daemon")
	}
	for _, uid := range []uint32{0, otherUID} {
		b.Run(fmt.Sprintf("uid=%d", uid), func(b *testing.B) {
			q := &peerQueue{}
			env := newTestEnv(b, withPeers(q))
			require.NoError(b, os.Chmod(env.root, 0o755))
			env.file(b, "f.txt", "x\n")
			c := env.clientAs(b, q, uid)
			ctx := context.Background()
			for b.Loop() {
				if _, err := c.Stat(ctx, StatParams{Path: "f.txt"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestPeer_LogShowsOnlyItsOwnEntries: the audit log names other users'
// paths, sessions and processes; a peer of another uid sees only what it
// did itself, root everything.
func TestPeer_LogShowsOnlyItsOwnEntries(t *testing.T) {
	env, q := peerWorkspace(t)
	ctx := context.Background()
	peer := env.clientAs(t, q, otherUID)
	root := env.client(t)
	_, err := root.Write(ctx, WriteParams{Path: "shared/root.txt", Content: "root's\n"})
	require.NoError(t, err)
	_, err = peer.Write(ctx, WriteParams{Path: "shared/peer.txt", Content: "peer's\n"})
	require.NoError(t, err)

	mine, err := peer.Log(ctx, LogParams{})
	require.NoError(t, err)
	require.NotEmpty(t, mine.Entries)
	for _, e := range mine.Entries {
		assert.Equal(t, uint32(otherUID), e.UID, "the peer sees %s by uid %d", e.Path, e.UID)
	}
	all, err := root.Log(ctx, LogParams{})
	require.NoError(t, err)
	var paths []string
	for _, e := range all.Entries {
		paths = append(paths, e.Path)
	}
	assert.Contains(t, paths, "shared/root.txt")
	assert.Contains(t, paths, "shared/peer.txt")
}
