package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control/mcp"
)

// lockedBuffer is a bytes.Buffer safe for the exec copier and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// buildDshmount builds the real binary into a temporary directory.
func buildDshmount(t *testing.T, goBuildFlags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "dshmount")
	args := append(append([]string{"build"}, goBuildFlags...), "-o", bin, "github.com/dshmount/dshmount/cmd/dshmount")
	out, err := exec.Command("go", args...).CombinedOutput()
	require.NoError(t, err, "go build ./cmd/dshmount: %s", out)
	help, _ := exec.Command(bin, "mcp", "--help").CombinedOutput()
	require.Contains(t, string(help), "Usage: dshmount mcp",
		"the binary has no 'mcp' verb: add mcpCommand() to clientCommands() in cmd/dshmount/client_cmds.go")
	return bin
}

func TestStdio_RealBinaryServesToolsAndClosesItsSessionWhenStdinCloses(t *testing.T) {
	d := startDaemon(t)
	d.writeFile(t, "src/main.go", "package main\n\nfunc main() {}\n")
	bin := buildDshmount(t)
	before := d.sessionIDs(t)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.Command(bin, "mcp", "--socket", d.socket, "--session", "stdio-agent")
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "stdio-test", Version: "1"}, nil).
		Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err, "stderr: %s", stderr.String())
	closed := false
	defer func() {
		if !closed {
			_ = cs.Close()
		}
	}()

	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		assert.NotNil(t, tool.InputSchema, tool.Name)
	}
	assert.ElementsMatch(t, mcp.ToolNames, names)

	assert.Contains(t, sessionNames(t, d), "stdio-agent", "the connection opened its named session")

	call := func(tool string, args map[string]any) *sdk.CallToolResult {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
		require.NoError(t, err, "stderr: %s", stderr.String())
		return res
	}
	res := call(mcp.ToolEdit, map[string]any{"path": "src/main.go", "old_string": "main() {}", "new_string": "main() { run() }"})
	require.True(t, res.IsError)
	assert.True(t, strings.HasPrefix(textOf(res), "FS_NOT_OBSERVED: "), textOf(res))

	res = call(mcp.ToolRead, map[string]any{"path": "src/main.go"})
	require.False(t, res.IsError, textOf(res))
	assert.Contains(t, textOf(res), "     3\tfunc main() {}\n(lines 1-3 of 3 in src/main.go; totalLines: 3)")

	res = call(mcp.ToolEdit, map[string]any{"path": "src/main.go", "old_string": "main() {}", "new_string": "main() { run() }"})
	require.False(t, res.IsError, textOf(res))
	assert.Equal(t, "package main\n\nfunc main() { run() }\n", d.readFile(t, "src/main.go"))

	d.writeFile(t, "src/main.go", "package main\n\nfunc main() { other() }\n")
	res = call(mcp.ToolEdit, map[string]any{"path": "src/main.go", "old_string": "run()", "new_string": "start()"})
	require.True(t, res.IsError)
	assert.True(t, strings.HasPrefix(textOf(res), "FS_STALE_VERSION: src/main.go changed since you read it"), textOf(res))

	res = call(mcp.ToolRead, map[string]any{"path": 42})
	require.True(t, res.IsError)
	assert.True(t, strings.HasPrefix(textOf(res), "FS_INVALID_ARGUMENT: "), textOf(res))
	res = call(mcp.ToolStat, map[string]any{"path": "src"})
	require.False(t, res.IsError, "the server keeps serving after bad arguments: %s", textOf(res))

	// Closing the client closes the binary's stdin; it must close its
	// session and exit cleanly.
	require.NoError(t, cs.Close())
	closed = true
	require.NotNil(t, cmd.ProcessState, "the process was waited for")
	assert.Equal(t, 0, cmd.ProcessState.ExitCode(), "stderr: %s", stderr.String())
	assert.NotContains(t, sessionNames(t, d), "stdio-agent", "the session closed with stdin")
	assert.Eventually(t, func() bool { return assert.ObjectsAreEqual(before, d.sessionIDs(t)) },
		10*time.Second, 10*time.Millisecond, "no session is left behind")
}

// sessionNames lists the names of the daemon's open sessions.
func sessionNames(t *testing.T, d *testDaemon) []string {
	t.Helper()
	st, err := d.admin.Status(context.Background())
	require.NoError(t, err)
	var names []string
	for _, s := range st.Sessions {
		names = append(names, s.Name)
	}
	return names
}

// TestStdio_ClosedStdinAnswersEveryRequestReadBeforeEOF pipes requests
// followed at once by EOF into the real binary: each one read before EOF
// must be carried out and answered before the process exits. The
// initialize answer names the version the build was stamped with.
func TestStdio_ClosedStdinAnswersEveryRequestReadBeforeEOF(t *testing.T) {
	d := startDaemon(t)
	bin := buildDshmount(t, "-ldflags", "-X main.stampedVersion=v0.9.1-test")
	before := d.sessionIDs(t)
	input := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pipe","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write","arguments":{"path":"piped.txt","content":"hello\n"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"stat","arguments":{"path":"piped.txt"}}}`,
	}, "\n") + "\n"
	for run := range 5 {
		_ = os.Remove(filepath.Join(d.root, "piped.txt"))
		cmd := exec.Command(bin, "mcp", "--socket", d.socket)
		cmd.Stdin = strings.NewReader(input)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), "run %d: stderr: %s", run, stderr.String())
		ids := map[float64]bool{}
		for line := range strings.SplitSeq(strings.TrimSpace(stdout.String()), "\n") {
			var msg struct {
				ID     float64         `json:"id"`
				Error  json.RawMessage `json:"error"`
				Result struct {
					ServerInfo *sdk.Implementation `json:"serverInfo"`
				} `json:"result"`
			}
			require.NoError(t, json.Unmarshal([]byte(line), &msg), "run %d: %q", run, line)
			assert.Nil(t, msg.Error, "run %d: %s", run, line)
			ids[msg.ID] = true
			if msg.ID == 1 {
				require.NotNil(t, msg.Result.ServerInfo, line)
				assert.Equal(t, "v0.9.1-test", msg.Result.ServerInfo.Version)
			}
		}
		assert.Equal(t, map[float64]bool{1: true, 2: true, 3: true}, ids, "run %d: every request is answered: %s", run, stdout.String())
		assert.Equal(t, "hello\n", d.readFile(t, "piped.txt"), "run %d: the write was carried out", run)
	}
	// The daemon closes a client's session when it sees the connection end,
	// which may come just after the client process exited.
	assert.Eventually(t, func() bool { return slices.Equal(before, d.sessionIDs(t)) }, 10*time.Second, 10*time.Millisecond,
		"each run closed the session it opened")
}
