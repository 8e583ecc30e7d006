package integration

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// boundShell runs script with sh in the mount, bound to a new strict
// session of d (read before every write: the tests that use it pin that).
func boundShell(t *testing.T, d *daemon, script string) (string, string, int) {
	t.Helper()
	sess, err := openStrict(testCtx(t), d, "bound-shell")
	require.NoError(t, err)
	env := "export HOME=" + t.TempDir() + " GIT_CONFIG_NOSYSTEM=1 LC_ALL=C; "
	return d.dsh("exec", "--socket", d.Socket, "--session", string(sess), "--", "sh", "-c", env+script)
}

// TestBoundSession_CreatedFileCanBeRemovedAtOnce pins that a bound session
// may remove what it has just created: its own create and write are its
// observation (it used to get ESTALE).
func TestBoundSession_CreatedFileCanBeRemovedAtOnce(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"keep.txt": "keep\n"}})
	for _, script := range []string{
		`echo x > f && rm f`,
		`echo x > f; echo y >> f; rm f`,
		`mkdir -p sub && echo x > sub/f && mv sub/f sub/g && rm sub/g && rmdir sub`,
	} {
		_, stderr, code := boundShell(t, d, script)
		assert.Equal(t, 0, code, "%s: %s", script, stderr)
	}
	entries, err := os.ReadDir(d.Src)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{"keep.txt"}, names, "nothing is left behind")
}

// TestBoundSession_GitRepositoryLifecycle pins that git's own file patterns
// (temporary objects linked to their final names, lock files renamed over,
// read-only objects) work for a bound session from init to rm -rf.
func TestBoundSession_GitRepositoryLifecycle(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"a.txt": "alpha\n", "dir/b.txt": "beta\n"}})
	script := `set -e
git init -q .
git add -A
git -c user.name=t -c user.email=t@example.com commit -q -m first
echo more >> a.txt
git add a.txt
git -c user.name=t -c user.email=t@example.com commit -q -m second
test "$(git rev-list --count HEAD)" = 2
rm -rf .git`
	_, stderr, code := boundShell(t, d, script)
	require.Equal(t, 0, code, "git through a bound session: %s", stderr)
	_, err := os.Stat(filepath.Join(d.Src, ".git"))
	assert.True(t, os.IsNotExist(err), "rm -rf .git leaves nothing behind: %v", err)
	assertBacking(t, d, "a.txt", "alpha\nmore\n")
}
