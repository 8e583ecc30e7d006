package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBranchMount_ExecWorksInTheBranchAndTheMountSurvivesKill9: a branch
// created with --mount is a second FUSE mount; 'dshmount exec --branch'
// runs a command in it at the caller's relative directory, bound to a
// session of the branch; its writes stay in the branch (workspace and
// workspace mount untouched) until the commit. A daemon killed with
// SIGKILL mounts the branch again when it restarts, and the commit
// unmounts it.
func TestBranchMount_ExecWorksInTheBranchAndTheMountSurvivesKill9(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"a.txt": "a0\n", "sub/b.txt": "b0\n"}})
	bm := filepath.Join(t.TempDir(), "feat")
	require.NoError(t, os.Mkdir(bm, 0o755))
	t.Cleanup(func() {
		if mounted(bm) {
			_ = syscall.Unmount(bm, syscall.MNT_DETACH)
		}
	})
	out, errOut, code := d.dsh("branch", "create", "feat", "--mount", bm)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "created branch feat, mounted at "+bm+"\n", out)
	require.True(t, mounted(bm), "the branch is a mount")
	out, errOut, code = d.dsh("branch", "list")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "mounted at "+bm)

	// A command without a mount of its branch is refused with the way out.
	_, errOut, code = d.dsh("branch", "create", "bare")
	require.Equal(t, 0, code, errOut)
	_, errOut, code = d.dsh("exec", "--branch", "bare", "--", "true")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "dshmount branch mount bare DIR")

	// Run in the branch from the workspace mount's sub/: pwd is the
	// branch mount's sub/; an edit of a read file and a new file land in
	// the branch.
	cmd := exec.Command(dshBinary, "exec", "--branch", "feat", "--", "sh", "-c",
		"pwd; cat ../a.txt >/dev/null && echo a1 > ../a.txt && echo new > made.txt && cat b.txt")
	cmd.Dir = d.m("sub")
	cmd.Env = append(os.Environ(), "DSH_SOCKET="+d.Socket)
	out, errOut, code = runCaptured(t, cmd)
	require.Equal(t, 0, code, "stdout %s stderr %s\n%s", out, errOut, d.log())
	assert.Equal(t, filepath.Join(bm, "sub")+"\nb0\n", out)

	assertInBranchOnly := func() {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(bm, "sub", "made.txt"))
		require.NoError(t, err)
		assert.Equal(t, "new\n", string(b))
		b, err = os.ReadFile(filepath.Join(bm, "a.txt"))
		require.NoError(t, err)
		assert.Equal(t, "a1\n", string(b))
		for _, root := range []string{d.Src, d.Mnt} {
			b, err = os.ReadFile(filepath.Join(root, "a.txt"))
			require.NoError(t, err)
			assert.Equal(t, "a0\n", string(b), "%s untouched until the commit", root)
			_, err = os.Stat(filepath.Join(root, "sub", "made.txt"))
			assert.True(t, os.IsNotExist(err), "%s untouched until the commit", root)
		}
	}
	assertInBranchOnly()

	// Unmounted from outside: no longer listed; mounted again by name.
	require.NoError(t, syscall.Unmount(bm, 0))
	require.Eventually(t, func() bool {
		out, _, _ := d.dsh("branch", "list")
		return !strings.Contains(out, "mounted at")
	}, 10*time.Second, 20*time.Millisecond, "the daemon noticed")
	_, errOut, code = d.dsh("branch", "mount", "feat", bm)
	require.Equal(t, 0, code, errOut)
	assertInBranchOnly()

	// kill -9, restart on the same directories: the branch mount is back.
	killHard(t, d)
	d = startDaemon(t, daemonOptions{Dirs: d.dirs()})
	require.True(t, mounted(bm), "the branch mount came back\n%s", d.log())
	assertInBranchOnly()
	out, errOut, code = d.dsh("branch", "list")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "mounted at "+bm)

	// A clean stop unmounts the branch (before the workspace); the next
	// start mounts it again.
	d.stop()
	assert.False(t, mounted(bm), "stopped: the branch mount is gone")
	assert.Regexp(t, `(?s)msg=unmounted[^\n]*branch=feat.*msg=unmounted component=fuse mount=`+d.Mnt, d.log(),
		"the branch mount goes before the workspace mount")
	d = startDaemon(t, daemonOptions{Dirs: d.dirs()})
	require.True(t, mounted(bm), "the branch mount came back\n%s", d.log())
	assertInBranchOnly()

	out, errOut, code = d.dsh("branch", "commit", "feat")
	require.Equal(t, 0, code, "%s\n%s", errOut, d.log())
	assert.Contains(t, out, "committed branch feat: 2 files")
	assert.False(t, mounted(bm), "the commit unmounted the branch")
	b, err := os.ReadFile(filepath.Join(d.Src, "sub", "made.txt"))
	require.NoError(t, err)
	assert.Equal(t, "new\n", string(b))
	assert.Equal(t, "a1\n", d.sh("cat a.txt"))
	assert.False(t, strings.Contains(d.log(), "level=ERROR"), d.log())
}

// TestBranchMount_FollowsTheWorkspaceWhereItChangedNothing: a branch mount
// caches entries and bytes for an hour like the workspace mount, so every
// change of the workspace — through its mount, the socket, out of band,
// and the branch's own commit with --keep — must drop the branch mount's
// caches of the paths the branch did not change; the paths it changed keep
// its own bytes.
//
// It runs with the watcher (the default) and without it but with hour-long
// cache timeouts: then only the daemon's own records can drop the branch
// mount's caches.
func TestBranchMount_FollowsTheWorkspaceWhereItChangedNothing(t *testing.T) {
	t.Run("watched", func(t *testing.T) { followsTheWorkspace(t, true) })
	t.Run("unwatched", func(t *testing.T) {
		followsTheWorkspace(t, false, "--watch=false", "--attr-timeout", "1h", "--entry-timeout", "1h")
	})
}

func followsTheWorkspace(t *testing.T, watched bool, args ...string) {
	d := startDaemon(t, daemonOptions{Args: args, Files: map[string]string{"a.txt": "a0\n", "c.txt": "c0\n", "own.txt": "o0\n"}})
	bm := filepath.Join(t.TempDir(), "feat")
	require.NoError(t, os.Mkdir(bm, 0o755))
	t.Cleanup(func() {
		if mounted(bm) {
			_ = syscall.Unmount(bm, syscall.MNT_DETACH)
		}
	})
	_, errOut, code := d.dsh("branch", "create", "feat", "--mount", bm)
	require.Equal(t, 0, code, errOut)
	read := func(rel string) string { // the bytes and the size stat reports
		b, err := os.ReadFile(filepath.Join(bm, rel))
		require.NoError(t, err)
		st, err := os.Stat(filepath.Join(bm, rel))
		require.NoError(t, err)
		if st.Size() != int64(len(b)) {
			return fmt.Sprintf("%q with a stale size %d", b, st.Size())
		}
		return string(b)
	}
	shows := func(rel, want, how string) {
		t.Helper()
		require.Eventually(t, func() bool { return read(rel) == want }, 5*time.Second, 10*time.Millisecond,
			"after %s the branch mount shows %q, want %q\n%s", how, read(rel), want, d.log())
	}
	require.NoError(t, os.WriteFile(filepath.Join(bm, "own.txt"), []byte("mine\n"), 0o644))
	assert.Equal(t, "c0\n", read("c.txt"), "cached now")

	d.sh("printf 'c1 longer\\n' > c.txt")
	shows("c.txt", "c1 longer\n", "a write through the workspace mount")
	_, errOut, code = runCaptured(t, func() *exec.Cmd {
		cmd := exec.Command(dshBinary, "write", "--unconditional", "c.txt")
		cmd.Env = append(os.Environ(), "DSH_SOCKET="+d.Socket)
		cmd.Stdin = strings.NewReader("c2 from the socket\n")
		return cmd
	}())
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "c2 from the socket\n", read("c.txt"),
		"a socket write has dropped the branch mount's cache before it answers (the watcher would be later)")
	if watched {
		require.NoError(t, os.WriteFile(filepath.Join(d.Src, "c.txt"), []byte("c3 out of band\n"), 0o644))
		shows("c.txt", "c3 out of band\n", "a write in the workspace directory")
	}
	d.sh("echo o-workspace > own.txt")
	assert.Equal(t, "mine\n", read("own.txt"), "a path the branch changed keeps the branch's bytes")

	// Commit with --keep: the branch goes on empty, and its mount shows the
	// workspace's new bytes, then follows the workspace again.
	require.NoError(t, os.WriteFile(filepath.Join(bm, "a.txt"), []byte("a1 from the branch\n"), 0o644))
	d.sh("echo o0 > own.txt") // back to the branch's base, so the commit does not conflict
	out, errOut, code := d.dsh("branch", "commit", "feat", "--keep")
	require.Equal(t, 0, code, "%s %s\n%s", out, errOut, d.log())
	require.True(t, mounted(bm), "kept: still mounted")
	assert.Equal(t, "a1 from the branch\n", d.sh("cat a.txt"))
	assert.Equal(t, "a1 from the branch\n", read("a.txt"))
	d.sh("echo a2 > a.txt")
	shows("a.txt", "a2\n", "a workspace write after the kept commit")
	d.sh("echo o2 > own.txt")
	shows("own.txt", "o2\n", "a workspace write of a path the kept branch no longer holds")
}
