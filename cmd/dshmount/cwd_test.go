package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/registry"
)

// TestCLI_RelativePathsFollowTheShellInsideTheWorkspace runs the binary in
// a subdirectory of the workspace: its relative paths resolve there, and
// the registry the daemon writes names the socket, so no --socket or
// DSH_SOCKET is needed.
func TestCLI_RelativePathsFollowTheShellInsideTheWorkspace(t *testing.T) {
	env := newCLIEnv(t)
	src := filepath.Join(env.root, "src")
	require.NoError(t, os.MkdirAll(src, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(src, "main.go"), []byte("package main\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(env.root, "main.go"), []byte("package root\n"), 0o644))

	// With --socket: the daemon tells where its workspace is.
	code, out, stderr := runBinary(t, binRun{dir: src}, "read", "main.go", "--socket", env.sock)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, out, "package main")
	code, out, stderr = runBinary(t, binRun{dir: src}, "ls", "--socket", env.sock)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, out, "main.go")
	assert.NotContains(t, out, "src/")
	code, out, stderr = runBinary(t, binRun{dir: src}, "read", "main.go", "--cwd", "", "--socket", env.sock)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, out, "package root", "an explicit --cwd wins")
	code, out, stderr = runBinary(t, binRun{dir: t.TempDir()}, "read", "main.go", "--socket", env.sock)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, out, "package root", "outside the workspace paths start at its root")

	// Without --socket: the registry names the daemon of the directory.
	runDir := t.TempDir()
	remove, err := registry.Register(runDir, registry.Entry{PID: os.Getpid(), Source: env.root, Socket: env.sock})
	require.NoError(t, err)
	defer func() { require.NoError(t, remove()) }()
	reg := []string{envRunDir + "=" + runDir}
	code, out, stderr = runBinary(t, binRun{dir: src, env: reg}, "read", "main.go")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, out, "package main")
	code, out, stderr = runBinary(t, binRun{dir: src, env: reg, stdin: "x\n"}, "write", "new.txt")
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, "created new.txt, version ", strings.SplitAfter(out, "version ")[0])
	_, err = os.Stat(filepath.Join(src, "new.txt"))
	assert.NoError(t, err, "written where the shell is")

	code, _, stderr = runBinary(t, binRun{dir: t.TempDir(), env: reg}, "read", "main.go")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "no control socket; pass --socket PATH, set $DSH_SOCKET, or run it inside a mount or workspace of a running daemon")
}

// TestCLI_AWorkingDirectoryThatIsGoneIsAnErrorNotTheRoot: when getcwd
// fails (the directory the shell sits in was removed, or a mount dropped
// it), a relative path must not be resolved at the workspace root: the
// verb fails with FS_NOT_FOUND saying so, and nothing is written.
func TestCLI_AWorkingDirectoryThatIsGoneIsAnErrorNotTheRoot(t *testing.T) {
	env := newCLIEnv(t)
	gone := filepath.Join(env.root, "gone")
	require.NoError(t, os.Mkdir(gone, 0o755))
	code, out, stderr := runBinary(t, binRun{dir: gone, gone: true, stdin: "x\n"}, "write", "f", "--socket", env.sock, "--json")
	assert.Equal(t, exitUsage, code, stderr)
	assert.Contains(t, stderr, "the working directory cannot be found (getwd: no such file or directory)")
	assert.Contains(t, out, `"code": "FS_NOT_FOUND"`)
	_, err := os.Stat(filepath.Join(env.root, "f"))
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing written at the workspace root")

	// Without --socket the daemon cannot be found from the directory either.
	require.NoError(t, os.Mkdir(filepath.Join(env.root, "gone2"), 0o755))
	code, _, stderr = runBinary(t, binRun{dir: filepath.Join(env.root, "gone2"), gone: true}, "read", "f")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "the working directory cannot be found")
	assert.NotContains(t, stderr, "no control socket")

	// An explicit --cwd needs no working directory.
	require.NoError(t, os.Mkdir(filepath.Join(env.root, "gone3"), 0o755))
	code, _, stderr = runBinary(t, binRun{dir: filepath.Join(env.root, "gone3"), gone: true, stdin: "y\n"}, "write", "g", "--socket", env.sock, "--cwd", "")
	assert.Equal(t, exitOK, code, stderr)
}
