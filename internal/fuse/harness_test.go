package fuse

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/policy/localstore"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/local"
	"github.com/dshmount/dshmount/internal/viewrules"
)

// requireFuse skips when the machine cannot mount, and fails instead when
// DSH_REQUIRE_FUSE=1 (CI must not silently skip the mount tests).
func requireFuse(t testing.TB) {
	t.Helper()
	reason := ""
	if _, err := os.Stat("/dev/fuse"); err != nil {
		reason = "/dev/fuse is missing: " + err.Error()
	}
	if reason == "" {
		return
	}
	if os.Getenv("DSH_REQUIRE_FUSE") == "1" {
		t.Fatalf("DSH_REQUIRE_FUSE=1 but the mount tests cannot run: %s", reason)
	}
	t.Skipf("cannot mount: %s (set DSH_REQUIRE_FUSE=1 to make this a failure)", reason)
}

// testBindings binds this test process (all its threads) to one session
// while a session is set.
type testBindings struct {
	mu      sync.Mutex
	session policy.SessionID
}

func (b *testBindings) set(s policy.SessionID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.session = s
}

// SessionOf implements Bindings.
func (b *testBindings) SessionOf(pid int) (policy.SessionID, bool) {
	b.mu.Lock()
	s := b.session
	b.mu.Unlock()
	if s == "" || int(processOf(int32(pid))) != os.Getpid() {
		return "", false
	}
	return s, true
}

// env is one mounted workspace.
type env struct {
	t      testing.TB
	src    string
	mnt    string
	store  *policy.Store
	lfs    *local.FS
	engine *policy.Engine
	srv    *Server
	bind   *testBindings
	pt     bool // passthrough was asked for
}

// envOptions tweak newEnv.
type envOptions struct {
	passthrough bool
	rules       viewrules.Rules
	watched     func() bool // Config.Watched (nil: directory descriptors are not cached)
	dirFDs      int         // Config.DirFDs
	noTimeouts  bool        // the kernel caches no names or attributes: every lookup reaches the daemon
	// noBaseObserver: a branch mount (newBranchEnv) is not told of
	// workspace changes.
	noBaseObserver bool
	commits        CommitWaiter
	debugLog       slog.Handler // when set: every FUSE request is logged to it
}

// newEnv mounts a fresh workspace; everything is torn down with the test.
func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	requireFuse(t)
	dir := t.TempDir()
	e := &env{t: t, src: filepath.Join(dir, "src"), mnt: filepath.Join(dir, "mnt"), bind: &testBindings{}, pt: o.passthrough}
	require.NoError(t, os.Mkdir(e.src, 0o755))
	require.NoError(t, os.Mkdir(e.mnt, 0o755))
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		quiet = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	store, err := localstore.Open(filepath.Join(dir, "state"), policy.DefaultOptions().WithLogger(quiet))
	require.NoError(t, err)
	e.store = store
	e.lfs, err = local.New(e.src, local.Options{Digests: store, Aliases: []string{e.mnt}})
	require.NoError(t, err)
	view, err := viewrules.New(e.lfs, o.rules)
	require.NoError(t, err)
	e.engine = policy.NewEngine(store, view)
	cfg := Config{
		Local: e.lfs, View: view, Engine: e.engine, Bindings: e.bind, Logger: quiet,
		Passthrough: o.passthrough, Watched: o.watched, DirFDs: o.dirFDs, Commits: o.commits,
	}.withDebugLog(o.debugLog)
	if o.noTimeouts {
		cfg.EntryTimeout, cfg.AttrTimeout = -1, -1
	}
	e.srv, err = Mount(e.mnt, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		require.NoError(t, e.srv.Unmount(ctx))
		_ = e.lfs.Close()
		require.NoError(t, store.Close())
	})
	return e
}

// eachMode runs f with passthrough off and on.
func eachMode(t *testing.T, o envOptions, f func(t *testing.T, e *env)) {
	for _, pt := range []bool{false, true} {
		t.Run("passthrough="+strconv.FormatBool(pt), func(t *testing.T) {
			o := o
			o.passthrough = pt
			f(t, newEnv(t, o))
		})
	}
}

// m is the mount path of rel; b the backing path.
func (e *env) m(rel string) string { return filepath.Join(e.mnt, rel) }
func (e *env) b(rel string) string { return filepath.Join(e.src, rel) }

// put writes a backing file directly (out of band).
func (e *env) put(rel, content string) {
	e.t.Helper()
	require.NoError(e.t, os.MkdirAll(filepath.Dir(e.b(rel)), 0o755))
	require.NoError(e.t, os.WriteFile(e.b(rel), []byte(content), 0o644))
}

// version is the provider's version of rel (the token agents hold).
func (e *env) version(rel string) provider.Version {
	e.t.Helper()
	info, err := e.lfs.Stat(context.Background(), e.lfs.TargetForRel(rel))
	require.NoError(e.t, err)
	require.NotNil(e.t, info, "%s is absent", rel)
	return info.Version
}

// session opens a strict session (read before every write) and binds
// this test process to it.
func (e *env) session() policy.Actor {
	e.t.Helper()
	return e.bindSession(policy.SessionSpec{Name: "fuse-test", Strict: true})
}

// bindSession opens a session as spec says and binds this test process
// to it.
func (e *env) bindSession(spec policy.SessionSpec) policy.Actor {
	e.t.Helper()
	s, err := e.store.OpenSessionWith(spec)
	require.NoError(e.t, err)
	e.bind.set(s.ID)
	e.srv.ForgetCallers() // as the daemon does on a bind: threads answered unbound before ask again
	e.t.Cleanup(func() { e.bind.set("") })
	return policy.Actor{Session: s.ID, PID: int32(os.Getpid()), Channel: policy.ChannelSocket}
}

// audit returns the audit entries of rel, newest first.
func (e *env) audit(rel string) []policy.AuditEntry {
	e.t.Helper()
	entries, err := e.store.Audit(policy.AuditQuery{Path: rel})
	require.NoError(e.t, err)
	return entries
}

// ops lists the operations of entries.
func ops(entries []policy.AuditEntry) []string {
	var out []string
	for _, en := range entries {
		out = append(out, string(en.Op))
	}
	return out
}

// names lists a directory on the mount.
func (e *env) names(rel string) []string {
	e.t.Helper()
	entries, err := os.ReadDir(e.m(rel))
	require.NoError(e.t, err)
	var out []string
	for _, en := range entries {
		out = append(out, en.Name())
	}
	return out
}

// isMounted reports whether mp is in the mount table.
func isMounted(t testing.TB, mp string) bool {
	t.Helper()
	ok, err := isMountPoint(mp)
	require.NoError(t, err)
	return ok
}
