package branch

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

func TestMoveFile_KeepsTheSourceModeInTheBranchAndAtCommit(t *testing.T) {
	e := newEnv(t)
	e.put("run.sh", "#!/bin/sh\n")
	require.NoError(t, os.Chmod(filepath.Join(e.ws, "run.sh"), 0o750))
	e.put("ro.txt", "ro\n")
	require.NoError(t, os.Chmod(filepath.Join(e.ws, "ro.txt"), 0o600))
	b, err := e.m.Create("mv")
	require.NoError(t, err)
	ctx := context.Background()

	// A workspace file moved, and a branch file (copied up) moved.
	_, err = b.MoveFile(ctx, bt(t, b, "run.sh"), bt(t, b, "bin/run.sh"), provider.MoveOptions{})
	require.NoError(t, err)
	bwrite(t, b, "ro.txt", "ro2\n")
	_, err = b.MoveFile(ctx, bt(t, b, "ro.txt"), bt(t, b, "ro2.txt"), provider.MoveOptions{})
	require.NoError(t, err)

	mode := func(p string) os.FileMode {
		st, err := os.Stat(p)
		require.NoError(t, err)
		return st.Mode().Perm()
	}
	assert.Equal(t, os.FileMode(0o750), mode(b.ProcessPath(bt(t, b, "bin/run.sh"))), "in the branch")
	assert.Equal(t, os.FileMode(0o600), mode(b.ProcessPath(bt(t, b, "ro2.txt"))), "in the branch")

	_, err = e.m.Commit(ctx, "mv", false, nil, Hooks{})
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o750), mode(filepath.Join(e.ws, "bin/run.sh")), "in the workspace after the commit")
	assert.Equal(t, os.FileMode(0o600), mode(filepath.Join(e.ws, "ro2.txt")), "in the workspace after the commit")
}
