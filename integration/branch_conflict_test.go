package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loginGo is the workspace file both sides change.
const loginGo = "package auth\n\nfunc a() {}\nfunc b() {}\nfunc c() {}\nfunc d() {}\nfunc e() {}\nfunc f() {}\nfunc login() bool { return !ok }\n"

// TestBranch_ConflictRecipeRedoesOnlyTheBranchsChange follows the README's
// conflict recipe on a running daemon: a branch changes a file in its
// mount (an editor's save), someone changes another line of the same file
// in the workspace mount, the commit is refused with the conflict; the
// branch's diff is its own change only (no undo of the other one), and
// re-applied in a fresh branch it lands on top of the other change: the
// commit keeps both. A change overlapping the other one is refused with
// FS_PATCH_MISMATCH and nothing is lost.
func TestBranch_ConflictRecipeRedoesOnlyTheBranchsChange(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"auth/login.go": loginGo}})
	bm := filepath.Join(t.TempDir(), "fix")
	require.NoError(t, os.Mkdir(bm, 0o755))
	t.Cleanup(func() {
		if mounted(bm) {
			_ = syscall.Unmount(bm, syscall.MNT_DETACH)
		}
	})
	inBranch := func(script string) {
		t.Helper()
		cmd := exec.Command("sh", "-c", script)
		cmd.Dir = bm
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: %s", script, out)
	}
	dsh := func(args ...string) string {
		t.Helper()
		out, errOut, code := d.dsh(args...)
		require.Equal(t, 0, code, "dshmount %v: %s\n%s", args, errOut, d.log())
		return out
	}
	// redo is the recipe after a refused commit: the patch, a fresh
	// branch, a session that reads the file there, the patch applied.
	redo := func(name string) (patch, errOut string, code int) {
		t.Helper()
		patch = dsh("branch", "diff", name, "--patch")
		pf := filepath.Join(t.TempDir(), "fix.patch")
		require.NoError(t, os.WriteFile(pf, []byte(patch), 0o644))
		dsh("branch", "discard", name)
		dsh("branch", "create", name)
		sess := strings.TrimSpace(dsh("session", "open", "--name", "redo"))
		_, errOut, code = d.dsh("patch", "--branch", name, "--session", sess, "-f", pf)
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "FS_NOT_OBSERVED", "the session must read the file in the branch first")
		dsh("read", "--branch", name, "--session", sess, "auth/login.go")
		_, errOut, code = d.dsh("patch", "--branch", name, "--session", sess, "-f", pf)
		return patch, errOut, code
	}

	dsh("branch", "create", "fix", "--mount", bm)
	inBranch("sed -i 's/return !ok/return ok/' auth/login.go")
	d.sh("sed -i 's/^package auth$/package auth \\/\\/ theirs/' auth/login.go")

	_, errOut, code := d.dsh("branch", "commit", "fix")
	require.Equal(t, 1, code)
	assert.Contains(t, errOut, "FS_STALE_VERSION")
	assert.Contains(t, errOut, "auth/login.go")
	assert.Equal(t, "modified  auth/login.go +1 -1 (conflict: the workspace changed it)\n", dsh("branch", "diff", "fix", "--stat"))

	patch, errOut, code := redo("fix")
	assert.Equal(t, "*** Begin Patch\n*** Update File: auth/login.go\n@@\n func d() {}\n func e() {}\n func f() {}\n"+
		"-func login() bool { return !ok }\n+func login() bool { return ok }\n*** End Patch\n", patch,
		"the branch's own change, not an undo of the workspace's")
	require.Equal(t, 0, code, errOut)
	dsh("branch", "commit", "fix")
	both := strings.NewReplacer("package auth\n", "package auth // theirs\n", "return !ok", "return ok").Replace(loginGo)
	assert.Equal(t, both, d.sh("cat auth/login.go"), "the commit keeps both changes")

	// An overlapping change: the same line on both sides.
	dsh("branch", "create", "over", "--mount", bm)
	inBranch("sed -i 's/return ok/return ok \\&\\& valid/' auth/login.go")
	d.sh("sed -i 's/return ok/return ok || admin/' auth/login.go")
	_, errOut, code = d.dsh("branch", "commit", "over")
	require.Equal(t, 1, code)
	assert.Contains(t, errOut, "FS_STALE_VERSION")
	patch, errOut, code = redo("over")
	assert.Contains(t, patch, "+func login() bool { return ok && valid }\n")
	assert.NotContains(t, patch, "admin")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "FS_PATCH_MISMATCH")
	theirs := strings.Replace(both, "return ok", "return ok || admin", 1)
	assert.Equal(t, theirs, d.sh("cat auth/login.go"), "nothing lost")
	assert.Empty(t, dsh("branch", "diff", "over"), "nothing applied in the fresh branch")
}
