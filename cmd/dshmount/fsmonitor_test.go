package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/dshmount/dshmount/control/registry"
)

// runHook runs `dshmount fsmonitor ARGS` in-process.
func runHook(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), append([]string{"fsmonitor"}, args...), stdio{in: strings.NewReader(""), out: &out, err: &errOut})
	return code, out.String(), errOut.String()
}

func TestFsmonitor_OnlyProtocolVersion2(t *testing.T) {
	code, out, stderr := runHook("1", "1700000000000000000")
	assert.Equal(t, exitFS, code, "git falls back to a full scan on a non-zero exit")
	assert.Empty(t, out)
	assert.Contains(t, stderr, `hook protocol version "1" is not supported`)
	assert.Contains(t, stderr, "core.fsmonitorHookVersion")
}

func TestFsmonitor_OutsideAnyDaemonIsAClearFailure(t *testing.T) {
	t.Setenv(registry.EnvRunDir, t.TempDir()) // no daemon registered
	t.Setenv(envSocket, "")
	t.Chdir(t.TempDir())
	code, out, stderr := runHook("2", "")
	assert.Equal(t, exitFS, code)
	assert.Empty(t, out, "nothing on stdout: git must not read a token")
	assert.Contains(t, stderr, "is not inside the mount or workspace of a running dshmount daemon")
}

func TestFsmonitor_UsageNeedsVersionAndToken(t *testing.T) {
	code, out, stderr := runHook("2")
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, out)
	assert.Contains(t, stderr, "Usage: dshmount fsmonitor")
}

func TestFsmonitor_LooksInTheUsersRegistryThenRoots(t *testing.T) {
	t.Setenv(registry.EnvRunDir, "")
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1000")
	dirs, refused := hookRegistryDirs() // missing directories are fine (nothing to trust in them)
	assert.Empty(t, refused)
	assert.Equal(t, []string{"/run/user/1000/dshmount", "/run/dshmount"}, dirs,
		"git runs the hook as the user; the daemon often runs as root")
	t.Setenv(registry.EnvRunDir, "/somewhere")
	dirs, _ = hookRegistryDirs()
	assert.Equal(t, []string{"/somewhere"}, dirs, "DSH_RUN_DIR alone when set")
}
