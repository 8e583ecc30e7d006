package control

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/policy/localstore"
	"github.com/dshmount/dshmount/internal/provider/local"
	"github.com/dshmount/dshmount/internal/service"
)

// fakeBinder records Bind calls.
type fakeBinder struct {
	mu    sync.Mutex
	calls []bindCall
	err   error
}

type bindCall struct {
	session policy.SessionID
	pid     int
}

func (b *fakeBinder) Bind(session policy.SessionID, pid int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return b.err
	}
	b.calls = append(b.calls, bindCall{session, pid})
	return nil
}

// SessionOf answers the session of the last Bind of pid.
func (b *fakeBinder) SessionOf(pid int) (policy.SessionID, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := len(b.calls) - 1; i >= 0; i-- {
		if b.calls[i].pid == pid {
			return b.calls[i].session, true
		}
	}
	return "", false
}

func (b *fakeBinder) recorded() []bindCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]bindCall(nil), b.calls...)
}

// testConfig is what a test tweaks before the env starts: the socket's
// Config and the service's.
type testConfig struct {
	Config
	Svc service.Config
}

// testEnv is a server over provider/local and a policy store in temp dirs.
type testEnv struct {
	root   string
	store  *policy.Store
	engine *policy.Engine
	srv    *Server
	svc    *service.Service
	hooks  *service.Hooks // the service's, set before the requests they hook
	// branches is the service's branch manager (nil: none).
	branches *branch.Manager
	sock     string
	binder   *fakeBinder
}

// newTestEnv starts a server; cfg tweaks the Config before NewServer.
func newTestEnv(tb testing.TB, tweak ...func(*testConfig)) *testEnv {
	tb.Helper()
	store, err := localstore.Open(tb.TempDir(), policy.DefaultOptions().WithLogger(quietLogger()))
	require.NoError(tb, err)
	return newTestEnvOn(tb, tb.TempDir(), store, tweak...)
}

// newTestEnvOn is newTestEnv on workspace root with store (closed at the
// end of the test).
func newTestEnvOn(tb testing.TB, root string, store *policy.Store, tweak ...func(*testConfig)) *testEnv {
	tb.Helper()
	lfs, err := local.New(root, local.Options{Digests: store})
	require.NoError(tb, err)
	engine := policy.NewEngine(store, lfs)
	// Unix socket paths are short: keep the directory near /tmp.
	sockDir, err := os.MkdirTemp("", "dshctl")
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	env := &testEnv{root: lfs.Root(), store: store, engine: engine, binder: &fakeBinder{},
		sock: filepath.Join(sockDir, "run", "control.sock")}
	cfg := testConfig{Config: Config{SocketPath: env.sock, Logger: quietLogger()},
		Svc: service.Config{Engine: engine, Binder: env.binder, Source: root, Mount: "/mnt/test", Logger: quietLogger(),
			Hooks: &service.Hooks{}}}
	for _, f := range tweak {
		f(&cfg)
	}
	svc, err := service.New(cfg.Svc)
	require.NoError(tb, err)
	cfg.Service = svc
	srv, err := NewServer(cfg.Config)
	require.NoError(tb, err)
	env.srv, env.svc, env.branches, env.engine, env.hooks = srv, svc, cfg.Svc.Branches, cfg.Svc.Engine, cfg.Svc.Hooks
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background()) }()
	tb.Cleanup(func() {
		require.NoError(tb, srv.Close())
		select {
		case err := <-served:
			require.NoError(tb, err)
		case <-time.After(10 * time.Second):
			tb.Error("Serve did not return after Close")
		}
		require.NoError(tb, store.Close())
	})
	return env
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// client dials the env's socket and closes the client at cleanup.
func (e *testEnv) client(tb testing.TB) *Client {
	tb.Helper()
	c, err := Dial(e.sock)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// file writes a file in the workspace behind the daemon's back.
func (e *testEnv) file(tb testing.TB, rel, content string) {
	tb.Helper()
	p := filepath.Join(e.root, rel)
	require.NoError(tb, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(tb, os.WriteFile(p, []byte(content), 0o644))
}

// content reads a workspace file ("" and false when missing).
func (e *testEnv) content(tb testing.TB, rel string) (string, bool) {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(e.root, rel))
	if os.IsNotExist(err) {
		return "", false
	}
	require.NoError(tb, err)
	return string(b), true
}

// rawConn speaks raw lines to the server.
type rawConn struct {
	c net.Conn
	r *bufio.Reader
}

func (e *testEnv) raw(tb testing.TB) *rawConn {
	tb.Helper()
	c, err := net.Dial("unix", e.sock)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = c.Close() })
	return &rawConn{c: c, r: bufio.NewReaderSize(c, 1<<20)}
}

func (rc *rawConn) send(tb testing.TB, line string) {
	tb.Helper()
	_, err := rc.c.Write([]byte(line + "\n"))
	require.NoError(tb, err)
}

// rawResponse is a decoded response line.
type rawResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *ErrorObject    `json:"error"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

func (rc *rawConn) recv(tb testing.TB) rawResponse {
	tb.Helper()
	require.NoError(tb, rc.c.SetReadDeadline(time.Now().Add(10*time.Second)))
	line, err := rc.r.ReadBytes('\n')
	require.NoError(tb, err)
	var r rawResponse
	require.NoError(tb, json.Unmarshal(line, &r), "line: %s", line)
	require.Equal(tb, "2.0", r.JSONRPC)
	return r
}

// call sends one request and returns its response.
func (rc *rawConn) call(tb testing.TB, line string) rawResponse {
	tb.Helper()
	rc.send(tb, line)
	return rc.recv(tb)
}
