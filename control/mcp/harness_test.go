package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dshmount/dshmount/internal/seen"
	"github.com/dshmount/dshmount/internal/service"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/control/mcp"
	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/policy/localstore"
	"github.com/dshmount/dshmount/internal/provider/local"
)

// testDaemon is a real control server over provider/local and policy, with
// no FUSE mount.
type testDaemon struct {
	root   string
	socket string
	// admin is a control client of its own, used to make changes "from
	// another agent" and to inspect daemon.status.
	admin *control.Client
	// branch, when set, is the branch connect's agents act in.
	branch string
	// cwd, when set, is the directory connect's agents were started in
	// (Config.Cwd).
	cwd string
}

// quietLogger discards logs.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startDaemon serves a control socket over a fresh workspace.
func startDaemon(t *testing.T) *testDaemon {
	t.Helper()
	root := t.TempDir()
	store, err := localstore.Open(t.TempDir(), policy.DefaultOptions().WithLogger(quietLogger()))
	require.NoError(t, err)
	fs, err := local.New(root, local.Options{Digests: store})
	require.NoError(t, err)
	engine := policy.NewEngine(store, fs)
	// Unix socket paths are short; t.TempDir() paths can exceed the limit.
	sockDir, err := os.MkdirTemp("", "dshmcp")
	require.NoError(t, err)
	socket := filepath.Join(sockDir, "control.sock")
	branches, err := branch.Open(t.TempDir(), fs, branch.Options{Logger: quietLogger(), Upper: openBranchUpper})
	require.NoError(t, err)
	t.Cleanup(func() { _ = branches.Close() })
	cache, err := seen.Open(filepath.Join(t.TempDir(), "seen"), seen.DefaultMaxBytes)
	require.NoError(t, err)
	svc, err := service.New(service.Config{Engine: engine, Source: root, Logger: quietLogger(), Branches: branches, Journal: branches.Journal(), SeenBytes: cache})
	require.NoError(t, err)
	srv, err := control.NewServer(control.Config{SocketPath: socket, Service: svc, Logger: quietLogger()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	admin, err := control.Dial(socket)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = admin.Close()
		cancel()
		<-served
		_ = srv.Close()
		require.NoError(t, store.Close())
		_ = os.RemoveAll(sockDir)
	})
	return &testDaemon{root: fs.Root(), socket: socket, admin: admin}
}

// writeFile writes a backing file directly, bypassing dshmount.
func (d *testDaemon) writeFile(t *testing.T, rel, content string) {
	t.Helper()
	p := filepath.Join(d.root, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

// readFile reads a backing file directly.
func (d *testDaemon) readFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.root, filepath.FromSlash(rel)))
	require.NoError(t, err)
	return string(b)
}

// exists reports whether a backing file exists.
func (d *testDaemon) exists(rel string) bool {
	_, err := os.Lstat(filepath.Join(d.root, filepath.FromSlash(rel)))
	return err == nil
}

// sessionIDs lists the sessions daemon.status reports.
func (d *testDaemon) sessionIDs(t *testing.T) []policy.SessionID {
	t.Helper()
	st, err := d.admin.Status(context.Background())
	require.NoError(t, err)
	ids := make([]policy.SessionID, 0, len(st.Sessions))
	for _, s := range st.Sessions {
		ids = append(ids, s.ID)
	}
	return ids
}

// agent is one MCP client connected in-process to an MCP server that talks
// to the daemon.
type agent struct {
	cs      *sdk.ClientSession
	session policy.SessionID
	done    chan error // Run's result once the client disconnects
}

// connect starts an MCP server for one agent over in-memory transports.
func (d *testDaemon) connect(t *testing.T, name string) *agent {
	t.Helper()
	return d.connectVia(t, name, func(c *control.Client) mcp.Daemon { return c })
}

// connectVia is connect with the control client wrapped, to substitute
// daemon answers that a test cannot provoke from outside.
func (d *testDaemon) connectVia(t *testing.T, name string, wrap func(*control.Client) mcp.Daemon) *agent {
	t.Helper()
	ctx := context.Background()
	client, err := control.Dial(d.socket)
	require.NoError(t, err)
	conn, err := mcp.Open(ctx, mcp.Config{Daemon: wrap(client), SessionName: name, Logger: quietLogger(), Branch: d.branch, Cwd: d.cwd})
	require.NoError(t, err)
	serverT, clientT := sdk.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() {
		err := conn.Serve(ctx, serverT)
		done <- errors.Join(err, conn.Close(), client.Close())
	}()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test-" + name, Version: "1"}, nil).Connect(ctx, clientT, nil)
	require.NoError(t, err)
	a := &agent{cs: cs, session: conn.Session(), done: done}
	t.Cleanup(func() { a.disconnect(t) })
	return a
}

// disconnect closes the MCP client and waits for the server to finish.
func (a *agent) disconnect(t *testing.T) {
	t.Helper()
	if a.cs == nil {
		return
	}
	_ = a.cs.Close()
	a.cs = nil
	select {
	case err := <-a.done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the MCP server did not stop after the client disconnected")
	}
}

// call invokes a tool and fails the test on a protocol error (tool errors
// are results, not protocol errors).
func (a *agent) call(t *testing.T, tool string, args any) *sdk.CallToolResult {
	t.Helper()
	res, err := a.cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err, "tools/call %s must not be a protocol error", tool)
	return res
}

// ok invokes a tool that must succeed and returns its text.
func (a *agent) ok(t *testing.T, tool string, args any) string {
	t.Helper()
	res := a.call(t, tool, args)
	require.False(t, res.IsError, "%s failed: %s", tool, textOf(res))
	return textOf(res)
}

// fail invokes a tool that must fail and returns its text.
func (a *agent) fail(t *testing.T, tool string, args any) string {
	t.Helper()
	res := a.call(t, tool, args)
	require.True(t, res.IsError, "%s should have failed, got: %s", tool, textOf(res))
	return textOf(res)
}

// textOf joins the text blocks of a result.
func textOf(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// structured decodes a result's structured content into v.
func structured(t *testing.T, res *sdk.CallToolResult, v any) {
	t.Helper()
	require.NotNil(t, res.StructuredContent, "result has no structured content")
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, v))
}

// openBranchUpper opens a branch's upper directory as cmd/dshmount serve
// does.
func openBranchUpper(dir string) (branch.Upper, error) {
	return local.New(dir, local.Options{Durability: local.DurabilityNone})
}
