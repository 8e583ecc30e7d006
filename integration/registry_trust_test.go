package integration

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// evilSocket listens on a Unix socket others may connect to and counts the
// connections it gets (answering none).
func evilSocket(t *testing.T, dir string) (string, *atomic.Int32) {
	t.Helper()
	p := filepath.Join(dir, "evil.sock")
	ln, err := net.Listen("unix", p)
	require.NoError(t, err)
	require.NoError(t, os.Chmod(p, 0o777))
	t.Cleanup(func() { _ = ln.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			_ = c.Close()
		}
	}()
	return p, &n
}

// TestRegistryTrust_APlantedRegistryIsNotFollowed is item 5 of issue 28:
// with XDG_RUNTIME_DIR unset, uid 65534's dshmount looks in
// $TMPDIR/dshmount-65534. Another user (uid 65533) planted that directory
// with an entry naming its socket: dshmount read refuses it, saying why,
// and never connects. An entry in the caller's own directory whose socket
// is served by another process than the entry's daemon is not followed
// either.
func TestRegistryTrust_APlantedRegistryIsNotFollowed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("planting another uid's files needs root")
	}
	base, err := os.MkdirTemp("", "dsh-trust-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	require.NoError(t, os.Chmod(base, 0o755))
	tmp, ws, mnt := filepath.Join(base, "tmp"), filepath.Join(base, "ws"), filepath.Join(base, "mnt")
	for _, d := range []string{tmp, ws, mnt} {
		require.NoError(t, os.Mkdir(d, 0o777))
		require.NoError(t, os.Chmod(d, 0o1777))
	}
	sock, conns := evilSocket(t, base)
	runDir := filepath.Join(tmp, "dshmount-65534")
	plant := func(owner int, pid int) {
		require.NoError(t, os.MkdirAll(runDir, 0o755))
		require.NoError(t, os.Chown(runDir, owner, owner))
		entry := filepath.Join(runDir, "planted.json")
		require.NoError(t, os.WriteFile(entry, []byte(fmt.Sprintf(`{"pid":%d,"mount":%q,"source":%q,"socket":%q}`, pid, mnt, ws, sock)), 0o644))
		require.NoError(t, os.Chown(entry, owner, owner))
	}
	env := []string{"TMPDIR=" + tmp}

	plant(65533, 1)
	out, stderr, code := nobodyDshmount(t, mnt, env, "read", "f.txt")
	assert.NotEqual(t, 0, code, "stdout %s", out)
	assert.Contains(t, stderr, "the run directory "+runDir+" belongs to uid 65533, not to you (uid 65534) or root")
	assert.Equal(t, int32(0), conns.Load(), "the planted socket got no connection")

	// The caller's own directory and entry, but the socket is not served
	// by the entry's daemon (pid 1, uid 65534): not followed.
	plant(65534, 1)
	require.NoError(t, os.Chmod(runDir, 0o700))
	out, stderr, code = nobodyDshmount(t, mnt, env, "read", "f.txt")
	assert.NotEqual(t, 0, code, "stdout %s", out)
	assert.Contains(t, stderr, "not by the daemon the entry names (pid 1 uid 65534)")
	assert.LessOrEqual(t, conns.Load(), int32(1), "only the credential check connected, and sent nothing")
}
