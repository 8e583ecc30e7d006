package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMakeInstall_PutsTheBinaryUnderPREFIX runs the quick start's
// `make install` with PREFIX set: the binary lands in PREFIX/bin and runs.
func TestMakeInstall_PutsTheBinaryUnderPREFIX(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary with make")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	prefix := t.TempDir()
	cmd := exec.Command("make", "-C", filepath.Join("..", ".."), "install", "PREFIX="+prefix)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make install: %s", out)
	ver, err := exec.Command(filepath.Join(prefix, "bin", "dshmount"), "--version").CombinedOutput()
	require.NoError(t, err, "%s", ver)
	assert.True(t, strings.HasPrefix(string(ver), "dshmount "), "the installed binary runs: %s", ver)
}
