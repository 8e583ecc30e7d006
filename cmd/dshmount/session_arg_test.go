package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSession_NameOrIDInTheVerbsAndMCP: --session takes an id or a name in
// the client verbs and in mcp (through the built binary); a name several
// sessions share is refused, listing their ids; mcp joins a named session
// (its reads count for it, and it stays open) instead of opening another.
func TestSession_NameOrIDInTheVerbsAndMCP(t *testing.T) {
	env := newCLIEnv(t)
	require.NoError(t, os.WriteFile(filepath.Join(env.root, "f.txt"), []byte("one\n"), 0o644))
	open := func(name string) string {
		code, out, stderr := runBinary(t, binRun{}, "session", "open", "--name", name, "--socket", env.sock)
		require.Equal(t, exitOK, code, stderr)
		return strings.TrimSpace(out)
	}
	solo := open("solo")
	dup1, dup2 := open("dup"), open("dup")

	// By name: the read is solo's, so solo's token-less write passes.
	code, _, stderr := runBinary(t, binRun{}, "read", "f.txt", "--socket", env.sock, "--session", "solo")
	require.Equal(t, exitOK, code, stderr)
	code, _, stderr = runBinary(t, binRun{stdin: "two\n"}, "write", "f.txt", "--socket", env.sock, "--session", solo)
	require.Equal(t, exitOK, code, "the read by name was the session's: %s", stderr)

	// A shared name is ambiguous.
	code, _, stderr = runBinary(t, binRun{}, "read", "f.txt", "--socket", env.sock, "--session", "dup")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, `session name "dup" is ambiguous`)
	assert.Contains(t, stderr, dup1)
	assert.Contains(t, stderr, dup2)

	// mcp --session solo acts for solo: its read lets solo write again.
	requests := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read","arguments":{"path":"f.txt"}}}`,
	}, "\n") + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(env.root, "f.txt"), []byte("person\n"), 0o644))
	code, out, stderr := runBinary(t, binRun{stdin: requests}, "mcp", "--socket", env.sock, "--session", "solo")
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, out, "person", "the MCP read answered")
	code, _, stderr = runBinary(t, binRun{stdin: "three\n"}, "write", "f.txt", "--socket", env.sock, "--session", "solo")
	require.Equal(t, exitOK, code, "mcp read for solo, and solo is still open: %s", stderr)

	code, _, stderr = runBinary(t, binRun{stdin: requests}, "mcp", "--socket", env.sock, "--session", "dup")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "ambiguous")
}
