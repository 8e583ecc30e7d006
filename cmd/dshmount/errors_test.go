package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/provider"
)

// openSession opens a named session with the built binary.
func (e *cliEnv) openSession(t *testing.T, name string) string {
	t.Helper()
	code, out, stderr := runBinary(t, binRun{}, "session", "open", "--name", name, "--socket", e.sock)
	require.Equal(t, exitOK, code, stderr)
	return strings.TrimSpace(out)
}

func TestCLI_EditNeedsNewAndEmptyNewDeletes(t *testing.T) {
	env := newCLIEnv(t)
	require.NoError(t, os.WriteFile(filepath.Join(env.root, "a.txt"), []byte("keep drop keep\n"), 0o644))
	s := env.openSession(t, "editor")
	code, _, stderr := runBinary(t, binRun{}, "read", "a.txt", "--socket", env.sock, "--session", s)
	require.Equal(t, exitOK, code, stderr)

	code, _, stderr = runBinary(t, binRun{}, "edit", "a.txt", "--old", "drop ", "--socket", env.sock, "--session", s)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "--new is required")
	b, err := os.ReadFile(filepath.Join(env.root, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, "keep drop keep\n", string(b), "without --new nothing is changed")

	code, out, stderr := runBinary(t, binRun{}, "edit", "a.txt", "--old", "drop ", "--new", "", "--socket", env.sock, "--session", s)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, out, "edited a.txt")
	b, err = os.ReadFile(filepath.Join(env.root, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, "keep keep\n", string(b), "an explicit --new '' deletes")
}

func TestCLI_ErrorsNameThePathAndPrintJSON(t *testing.T) {
	env := newCLIEnv(t)
	require.NoError(t, os.WriteFile(filepath.Join(env.root, "a.txt"), []byte("a\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(env.root, "b.txt"), []byte("b\n"), 0o644))

	code, out, stderr := runBinary(t, binRun{}, "read", "missing.txt", "--json", "--socket", env.sock)
	assert.Equal(t, exitFS, code)
	assert.Equal(t, "FS_NOT_FOUND: missing.txt: no such file; check the path, or write it to create it\n", stderr)
	var f map[string]string
	require.NoError(t, json.Unmarshal([]byte(out), &f), out)
	assert.Equal(t, map[string]string{"code": "FS_NOT_FOUND", "path": "missing.txt",
		"message": "no such file; check the path, or write it to create it"}, f)

	code, out, stderr = runBinary(t, binRun{}, "rm", "a.txt", "--socket", env.sock)
	assert.Equal(t, exitFS, code)
	assert.Empty(t, out)
	assert.True(t, strings.HasPrefix(stderr, "FS_NOT_OBSERVED: a.txt: "), stderr)

	s := env.openSession(t, "mover")
	code, _, stderr = runBinary(t, binRun{}, "read", "a.txt", "--socket", env.sock, "--session", s)
	require.Equal(t, exitOK, code, stderr)
	code, _, stderr = runBinary(t, binRun{}, "mv", "a.txt", "b.txt", "--create", "--socket", env.sock, "--session", s)
	assert.Equal(t, exitFS, code)
	assert.Contains(t, stderr, "the destination b.txt already exists")
	assert.NotContains(t, stderr, "read it first")

	code, _, stderr = runBinary(t, binRun{}, "mv", "a.txt", "c.txt", "--version", "c1-0000", "--socket", env.sock, "--session", s)
	assert.Equal(t, exitFS, code)
	assert.True(t, strings.HasPrefix(stderr, "FS_STALE_VERSION: source a.txt: "), stderr)

	code, _, stderr = runBinary(t, binRun{}, "write", "b.txt", "--create", "--socket", env.sock, "--session", s)
	assert.Equal(t, exitFS, code)
	assert.Contains(t, stderr, "b.txt already exists, and the write was guarded to create it")

	code, out, stderr = runBinary(t, binRun{}, "stat", "a.txt", "--session", "s-ghost", "--json", "--socket", env.sock)
	assert.Equal(t, exitUsage, code)
	assert.True(t, strings.HasPrefix(stderr, "FS_INVALID_ARGUMENT: unknown session s-ghost"), stderr)
	assert.NotContains(t, stderr, "session.open", "no RPC method names")
	f = nil
	require.NoError(t, json.Unmarshal([]byte(out), &f), out)
	assert.Equal(t, "FS_INVALID_ARGUMENT", f["code"])
	assert.Contains(t, f["message"], "unknown session s-ghost")

	code, out, stderr = runBinary(t, binRun{}, "status", "--json", "--socket", filepath.Join(t.TempDir(), "none.sock"))
	assert.Equal(t, exitUsage, code, stderr)
	f = nil
	require.NoError(t, json.Unmarshal([]byte(out), &f), out)
	assert.Equal(t, "FS_IO_ERROR", f["code"])
}

func TestDescribeFailure_MvNamesTheSide(t *testing.T) {
	err := &control.RPCError{RPCCode: control.CodeFilesystem, Code: provider.CodeNotRegularFile, Path: "src/b", Message: "not a regular file"}
	f, code, line := describeFailure("mv", []string{"a.txt", "b"}, "src", err)
	assert.Equal(t, exitFS, code)
	assert.Equal(t, "FS_NOT_REGULAR_FILE: destination src/b: not a regular file", line)
	assert.Equal(t, failure{Code: provider.CodeNotRegularFile, Message: "not a regular file", Path: "src/b"}, f)

	_, _, line = describeFailure("mv", []string{"/mnt/ws/src/b", "/mnt/ws/c"}, "", err)
	assert.Equal(t, "FS_NOT_REGULAR_FILE: source src/b: not a regular file", line, "absolute paths on the mount")
	_, _, line = describeFailure("mv", []string{"/mnt/ws/a", "/mnt/ws/src/b"}, "", err)
	assert.Equal(t, "FS_NOT_REGULAR_FILE: destination src/b: not a regular file", line)
}
