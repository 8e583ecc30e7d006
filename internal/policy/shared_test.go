package policy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy/kv"
	"github.com/dshmount/dshmount/internal/policy/kv/etcdkv"
	"github.com/dshmount/dshmount/internal/policy/kv/etcdkv/etcdtest"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/local"
)

// startEtcd runs an embedded etcd for one test.
func startEtcd(t testing.TB) *etcdtest.Server {
	t.Helper()
	srv, err := etcdtest.Start(t.TempDir(), etcdtest.Options{})
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	return srv
}

func openEtcdEngine(t testing.TB, srv *etcdtest.Server) *etcdkv.Store {
	t.Helper()
	e, err := etcdkv.Open(context.Background(), etcdkv.Config{Endpoints: []string{srv.Endpoint()}, Prefix: "/dsh/test/", OpTimeout: time.Second})
	require.NoError(t, err)
	return e
}

// openShared opens a store on srv (one daemon of several).
func openShared(t testing.TB, srv *etcdtest.Server, opts Options) *Store {
	t.Helper()
	s, err := Open(openEtcdEngine(t, srv), "etcd", opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// daemon is one daemon's guard over a workspace directory: its own store
// handle on the shared etcd and its own provider (own locks, own digests).
type daemon struct {
	store *Store
	fs    *local.FS
	e     *Engine
}

func newDaemon(t testing.TB, srv *etcdtest.Server, root string, opts Options) daemon {
	t.Helper()
	s := openShared(t, srv, opts.WithWorkspaceRoot(root))
	fs, err := local.New(root, local.Options{Digests: s})
	require.NoError(t, err)
	t.Cleanup(func() { _ = fs.Close() })
	return daemon{store: s, fs: fs, e: NewEngine(s, fs)}
}

func TestShared_KeysAreWorkspaceRelative(t *testing.T) {
	srv := startEtcd(t)
	a := openShared(t, srv, quietOptions().WithWorkspaceRoot("/hostA/ws"))
	b := openShared(t, srv, quietOptions().WithWorkspaceRoot("/hostB/ws"))
	sess, err := a.OpenSession("agent")
	require.NoError(t, err)
	require.NoError(t, a.Record(sess.ID, "/hostA/ws/src/x.go", Present("v1")))
	require.NoError(t, a.SetLastWrite("/hostA/ws/src/x.go", WriteRecord{Op: OpWrite, Version: "v1", Path: "src/x.go"}))
	require.NoError(t, a.AppendAudit(AuditEntry{Key: "/hostA/ws/src/x.go", Path: "src/x.go", Op: OpWrite, After: "v1"}))

	obs, ok := b.Observation(sess.ID, "/hostB/ws/src/x.go")
	require.True(t, ok, "the other host names the file by its own path")
	assert.Equal(t, Present("v1"), obs)
	lw, ok := b.LastWrite("/hostB/ws/src/x.go")
	require.True(t, ok)
	assert.Equal(t, provider.Version("v1"), lw.Version)
	entries, err := b.Audit(AuditQuery{Kind: AuditChanges})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, provider.Key("/hostB/ws/src/x.go"), entries[0].Key)

	raw := openEtcdEngine(t, srv)
	defer raw.Close()
	require.NoError(t, raw.Scan(context.Background(), kv.Range{}, func(p kv.Pair) error {
		assert.NotContains(t, string(p.Key)+string(p.Value), "/hostA", "no host path in the shared store")
		return nil
	}))
}

func TestShared_SessionOnAReadThroughAEditThroughB(t *testing.T) {
	srv := startEtcd(t)
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "f.txt"), []byte("one\n"), 0o644))
	a, b := newDaemon(t, srv, root, quietOptions()), newDaemon(t, srv, root, quietOptions())
	ctx := context.Background()
	sess, err := a.store.OpenSession("agent")
	require.NoError(t, err)
	actor := Actor{Session: sess.ID, Channel: ChannelSocket}

	_, ok := b.store.Session(sess.ID)
	require.True(t, ok, "a session opened on A is known on B at once")
	_, _, err = a.e.Read(ctx, actor, a.fs.TargetForRel("f.txt"))
	require.NoError(t, err)
	out, err := b.e.Edit(ctx, actor, b.fs.TargetForRel("f.txt"), provider.EditRequest{OldString: "one", NewString: "two"}, Guard{})
	require.NoError(t, err, "B guards with the observation A recorded")

	// A person changes the file behind both daemons: the session's token
	// (now the version B published) is stale on A, which rehashes.
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, os.WriteFile(filepath.Join(root, "f.txt"), []byte("person\n"), 0o644))
	_, err = a.e.Edit(ctx, actor, a.fs.TargetForRel("f.txt"), provider.EditRequest{OldString: "two", NewString: "three"}, Guard{})
	require.Equal(t, provider.CodeStaleVersion, provider.CodeOf(err), "got %v", err)

	// The claim recorded what B published.
	val, err := b.store.db.Get(ctx, versionKey("./f.txt"))
	require.NoError(t, err)
	assert.Contains(t, string(val), string(out.Version))
	assert.NotContains(t, string(val), "owner", "released")

	require.NoError(t, b.store.CloseSession(sess.ID))
	_, _, err = a.e.Read(ctx, actor, a.fs.TargetForRel("f.txt"))
	require.ErrorIs(t, err, ErrUnknownSession, "a session closed on B is closed on A")
	_, ok = a.store.Observation(sess.ID, a.fs.TargetForRel("f.txt").Key)
	assert.False(t, ok, "its observations are gone")
}

// Two daemons, each with its own provider (own per-file locks), race
// read-then-edit sessions on one file: the claim makes each version have
// exactly one winner across both.
func TestShared_TwoDaemonsOneWinnerPerVersion(t *testing.T) {
	const perDaemon, rounds = 4, 6
	srv := startEtcd(t)
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "counter.txt"), []byte("start\n"), 0o644))
	ds := []daemon{newDaemon(t, srv, root, quietOptions()), newDaemon(t, srv, root, quietOptions())}
	ctx := context.Background()
	var (
		mu      sync.Mutex
		winners = map[provider.Version]int{}
		wg      sync.WaitGroup
	)
	for i := range 2 * perDaemon {
		d := ds[i%2]
		sess, err := d.store.OpenSession(fmt.Sprint("w", i))
		require.NoError(t, err)
		a := Actor{Session: sess.ID, Channel: ChannelSocket}
		wg.Go(func() {
			tg := d.fs.TargetForRel("counter.txt")
			for r := range rounds {
				text, info, err := d.e.Read(ctx, a, tg)
				if !assert.NoError(t, err) {
					return
				}
				_, err = d.e.Edit(ctx, a, tg, provider.EditRequest{OldString: text, NewString: fmt.Sprintf("%s %d %d\n", a.Session, i, r)}, Guard{})
				mu.Lock()
				if err == nil {
					winners[info.Version]++
				} else {
					assert.Equal(t, provider.CodeStaleVersion, provider.CodeOf(err), "loser: %v", err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.NotEmpty(t, winners)
	for v, n := range winners {
		assert.Equal(t, 1, n, "version %s replaced by %d edits", v, n)
	}
}

func TestShared_OneAuditSeqAcrossDaemons(t *testing.T) {
	srv := startEtcd(t)
	a, b := openShared(t, srv, quietOptions()), openShared(t, srv, quietOptions())
	const each = 20
	var wg sync.WaitGroup
	for _, s := range []*Store{a, b} {
		wg.Go(func() {
			for i := range each {
				assert.NoError(t, s.AppendAudit(AuditEntry{Path: fmt.Sprint("f", i), Op: OpWrite}))
			}
		})
	}
	wg.Wait()
	for _, s := range []*Store{a, b} {
		entries, err := s.Audit(AuditQuery{Limit: 1000, Kind: AuditChanges})
		require.NoError(t, err)
		require.Len(t, entries, 2*each, "each daemon's log has every daemon's entries")
		for i := 1; i < len(entries); i++ {
			require.Greater(t, entries[i-1].Seq, entries[i].Seq, "one strictly ordered seq, no duplicate")
		}
	}
}

func TestShared_StoreUnavailable_RefusesMutationsReadsGoOnRecovers(t *testing.T) {
	srv := startEtcd(t)
	root := t.TempDir()
	path := filepath.Join(root, "f.txt")
	require.NoError(t, os.WriteFile(path, []byte("one\n"), 0o644))
	d := newDaemon(t, srv, root, quietOptions())
	ctx := context.Background()
	sess, err := d.store.OpenSession("agent")
	require.NoError(t, err)
	a := Actor{Session: sess.ID, Channel: ChannelSocket}
	tg := d.fs.TargetForRel("f.txt")
	_, _, err = d.e.Read(ctx, a, tg)
	require.NoError(t, err)

	srv.Stop()
	text, _, err := d.e.Read(ctx, a, tg)
	require.NoError(t, err, "reads go on")
	assert.Equal(t, "one\n", text)
	for name, mutate := range map[string]func() error{
		"edit": func() error {
			_, err := d.e.Edit(ctx, a, tg, provider.EditRequest{OldString: "one", NewString: "two"}, Guard{})
			return err
		},
		"unconditional write": func() error {
			_, err := d.e.Write(ctx, a, tg, "x\n", Guard{Unconditional: true})
			return err
		},
		"sessionless create": func() error {
			_, err := d.e.Write(ctx, Actor{Channel: ChannelSocket}, d.fs.TargetForRel("new.txt"), "x\n", Guard{})
			return err
		},
	} {
		err := mutate()
		require.Equal(t, provider.CodeIOError, provider.CodeOf(err), "%s: %v", name, err)
		assert.Contains(t, err.Error(), "policy store unavailable", name)
	}
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "one\n", string(b), "nothing let through")
	assert.NoFileExists(t, filepath.Join(root, "new.txt"))

	_, err = d.e.Edit(ctx, a, tg, provider.EditRequest{OldString: "one", NewString: "two"}, Guard{})
	require.Equal(t, provider.CodeIOError, provider.CodeOf(err), "still down: %v", err)

	require.NoError(t, srv.Restart())
	require.Eventually(t, func() bool { return d.store.UseSession(a.Session) == nil }, 20*time.Second, 50*time.Millisecond)
	_, err = d.e.Edit(ctx, a, tg, provider.EditRequest{OldString: "one", NewString: "two"}, Guard{})
	require.NoError(t, err, "work resumes by itself")
}

func TestShared_ClaimWaitsThenExpiredClaimIsTakenOver(t *testing.T) {
	srv := startEtcd(t)
	clock := &manualClock{now: time.Unix(1_000_000, 0)}
	opts := quietOptions().WithNow(clock.Now).WithClaimTTL(time.Minute).WithClaimWait(time.Nanosecond).WithWorkspaceRoot("/ws")
	a, b := openShared(t, srv, opts), openShared(t, srv, opts)
	ctx := context.Background()

	held, err := a.Claim(ctx, "edit", "f", "/ws/f")
	require.NoError(t, err)
	require.NotNil(t, held)
	_, err = b.Claim(ctx, "edit", "f", "/ws/f")
	require.Equal(t, provider.CodeIOError, provider.CodeOf(err), "a held claim is not taken: %v", err)
	assert.Contains(t, err.Error(), "another daemon is changing this file")

	clock.Advance(2 * time.Minute) // A died holding it
	taken, err := b.Claim(ctx, "edit", "f", "/ws/f")
	require.NoError(t, err, "an expired claim is taken over")
	held.Release(map[provider.Key]provider.Version{"/ws/f": "from-a"})
	val, err := b.db.Get(ctx, versionKey("./f"))
	require.NoError(t, err)
	assert.NotContains(t, string(val), "from-a", "the late holder's release does not touch the new claim")
	taken.Release(map[provider.Key]provider.Version{"/ws/f": "from-b"})
	val, err = b.db.Get(ctx, versionKey("./f"))
	require.NoError(t, err)
	assert.Contains(t, string(val), "from-b")
	again, err := a.Claim(ctx, "edit", "f", "/ws/f")
	require.NoError(t, err, "released: free again")
	again.Release(nil)
}

func TestBadger_ClaimIsNoOp(t *testing.T) {
	s := openStore(t, t.TempDir(), quietOptions())
	c, err := s.Claim(context.Background(), "edit", "f", "/ws/f")
	require.NoError(t, err)
	assert.Nil(t, c, "one daemon: the provider's locks suffice")
	c.Release(nil)
}

func TestShared_LookupSessionWhileUnavailable(t *testing.T) {
	srv := startEtcd(t)
	a, b := openShared(t, srv, quietOptions()), openShared(t, srv, quietOptions())
	sess, err := a.OpenSession("agent")
	require.NoError(t, err)
	srv.Stop()
	got, ok, err := a.LookupSession(sess.ID)
	require.NoError(t, err, "a daemon's own copy answers")
	assert.True(t, ok)
	assert.Equal(t, sess.ID, got.ID)
	_, ok, err = b.LookupSession(sess.ID)
	assert.False(t, ok)
	require.Equal(t, provider.CodeIOError, provider.CodeOf(err), "a daemon without a copy cannot say: %v", err)
	assert.ErrorContains(t, err, "policy store unavailable")
	require.ErrorIs(t, a.UseSession(sess.ID), ErrStoreUnavailable, "using it needs the store")
	_, err = a.OpenSession("new")
	require.Equal(t, provider.CodeIOError, provider.CodeOf(err), "got %v", err)
}

// The change feed of a shared store carries every daemon's changes in seq
// order, and each Engine hears of the other daemons' changes as external
// ones (its mount drops the kernel's cache of them).
func TestShared_FeedCarriesEveryDaemonsChanges(t *testing.T) {
	srv := startEtcd(t)
	root := t.TempDir()
	a, b := newDaemon(t, srv, root, quietOptions()), newDaemon(t, srv, root, quietOptions())
	var mu sync.Mutex
	var heardOnB []Event
	b.e.AddObserver(func(_ context.Context, ev Event) error {
		mu.Lock()
		defer mu.Unlock()
		heardOnB = append(heardOnB, ev)
		return nil
	})
	sub, err := a.store.Subscribe(a.store.LastSeq(), 0)
	require.NoError(t, err)
	defer sub.Close()
	ctx := context.Background()
	const n = 6
	for i := range n {
		d := []daemon{a, b}[i%2]
		_, err := d.e.Write(ctx, Actor{Channel: ChannelSocket}, d.fs.TargetForRel(fmt.Sprint("f", i)), "x\n", Guard{})
		require.NoError(t, err)
	}
	var got []AuditEntry
	for len(got) < n {
		select {
		case it := <-sub.C:
			require.False(t, it.Lost)
			got = append(got, it.Entry)
		case <-time.After(10 * time.Second):
			t.Fatalf("feed delivered %d of %d changes", len(got), n)
		}
	}
	for i, e := range got {
		assert.Equal(t, fmt.Sprint("f", i), e.Path, "commit order")
		assert.Equal(t, filepath.Join(root, e.Path), string(e.Key), "this host's key")
		if i > 0 {
			assert.Greater(t, e.Seq, got[i-1].Seq)
		}
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(heardOnB) >= n
	}, 10*time.Second, 10*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	var external []string
	for _, ev := range heardOnB {
		if ev.Actor.Channel == ChannelExternal {
			external = append(external, ev.Target.DisplayPath)
		}
	}
	assert.Equal(t, []string{"f0", "f2", "f4"}, external, "B hears A's changes as external, its own as they were")
}

// A mutation of many files (a 200-file commit) claims them one
// compare-and-swap each, so no transaction comes near the server's default
// limit of 128 operations; releasing records every version.
func TestShared_Claim200FilesOnDefaultEtcd(t *testing.T) {
	srv := startEtcd(t) // etcd's default --max-txn-ops (128)
	s := openShared(t, srv, quietOptions().WithWorkspaceRoot("/ws"))
	keys := make([]provider.Key, 200)
	after := map[provider.Key]provider.Version{}
	for i := range keys {
		keys[i] = provider.Key(fmt.Sprintf("/ws/dir/f%03d", i))
		after[keys[i]] = provider.Version(fmt.Sprint("v", i))
	}
	c, err := s.Claim(context.Background(), "commit", "dir", keys...)
	require.NoError(t, err)
	other := openShared(t, srv, quietOptions().WithWorkspaceRoot("/ws").WithClaimWait(time.Nanosecond))
	_, err = other.Claim(context.Background(), "edit", "dir/f199", "/ws/dir/f199")
	require.Equal(t, provider.CodeIOError, provider.CodeOf(err), "the last of the 200 is held too: %v", err)
	c.Release(after)
	n := 0
	require.NoError(t, s.db.Scan(context.Background(), kv.Range{Prefix: []byte(prefixVersion)}, func(p kv.Pair) error {
		n++
		assert.NotContains(t, string(p.Value), "owner")
		return nil
	}))
	assert.Equal(t, 200, n)
	_, err = other.Claim(context.Background(), "edit", "dir/f199", "/ws/dir/f199")
	require.NoError(t, err)
}

// A release the engine could not take (it was down) is retried once it is
// back: the file is free again long before the claim would expire.
func TestShared_ReleaseRetriedAfterOutage(t *testing.T) {
	srv := startEtcd(t)
	opts := quietOptions().WithWorkspaceRoot("/ws").WithClaimTTL(time.Hour).WithClaimWait(time.Nanosecond)
	a, b := openShared(t, srv, opts), openShared(t, srv, opts)
	ctx := context.Background()
	c, err := a.Claim(ctx, "edit", "f", "/ws/f")
	require.NoError(t, err)
	srv.Stop()
	c.Release(map[provider.Key]provider.Version{"/ws/f": "v2"})
	require.NoError(t, srv.Restart())
	require.Eventually(t, func() bool {
		got, err := b.Claim(ctx, "edit", "f", "/ws/f")
		if err != nil {
			return false
		}
		got.Release(nil)
		return true
	}, 30*time.Second, 100*time.Millisecond)
	val, err := b.db.Get(ctx, versionKey("./f"))
	require.NoError(t, err)
	assert.Contains(t, string(val), `"version":"v2"`, "the retried release recorded the version")
}

func TestStoredKey_WorkspaceRelativeAndOtherNamespacesApart(t *testing.T) {
	s := &Store{opts: Options{WorkspaceRoot: "/hostA/ws"}}
	cases := []struct{ host, stored provider.Key }{
		{"/hostA/ws", "."},
		{"/hostA/ws/src/x.go", "./src/x.go"},
		{"/hostA/ws/branch/fix/b.txt", "./branch/fix/b.txt"}, // a workspace directory named branch
		{"branch/fix/b.txt", "branch/fix/b.txt"},             // a branch's key
		{"/hostA/wsother/x", "/hostA/wsother/x"},
		{"/elsewhere", "/elsewhere"},
	}
	for _, c := range cases {
		assert.Equal(t, c.stored, s.storedKey(c.host), string(c.host))
		assert.Equal(t, c.host, s.hostKey(c.stored), string(c.stored))
	}
	b := &Store{opts: Options{WorkspaceRoot: "/hostB/w"}}
	assert.Equal(t, provider.Key("/hostB/w/src/x.go"), b.hostKey(s.storedKey("/hostA/ws/src/x.go")), "another host's path")
}
