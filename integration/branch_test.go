package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/provider"
)

// TestBranch_WorkflowThroughTheDaemon: create a branch with the CLI, work
// in it over the socket, review it, have a person's save through the
// mount conflict with it, commit another one, and see the mount show the
// committed bytes at once.
func TestBranch_WorkflowThroughTheDaemon(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{
		"a.txt": "a0\n", "b.txt": "b0\n", "old.txt": "gone\n",
	}})
	ctx := testCtx(t)
	out, errOut, code := d.dsh("branch", "create", "feat")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "created branch feat")
	_, errOut, code = d.dsh("branch", "create", "feat")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "already exists")

	sess, err := d.Client.OpenSessionWith(ctx, control.SessionOpenParams{Name: "agent", Branch: "feat"})
	require.NoError(t, err)
	for _, p := range []string{"a.txt", "old.txt"} {
		_, err = d.Client.Read(ctx, control.ReadParams{Path: p, Session: sess})
		require.NoError(t, err)
	}
	_, err = d.Client.Edit(ctx, control.EditParams{Path: "a.txt", OldString: "a0", NewString: "a1", Session: sess})
	require.NoError(t, err)
	_, err = d.Client.Write(ctx, control.WriteParams{Path: "src/new.go", Content: "package x\n", Session: sess})
	require.NoError(t, err)
	_, err = d.Client.Delete(ctx, control.DeleteParams{Path: "old.txt", Session: sess})
	require.NoError(t, err)

	out, errOut, code = d.dsh("read", "--branch", "feat", "a.txt")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "a1")
	out, errOut, code = d.dsh("ls", "--branch", "feat", "src")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "new.go")

	// Isolation: the mount shows the workspace untouched.
	assert.Equal(t, "a0\n", d.sh("cat a.txt"))
	assert.Equal(t, "gone\n", d.sh("cat old.txt"))
	_, err = os.Stat(d.m("src/new.go"))
	assert.True(t, os.IsNotExist(err))

	out, errOut, code = d.dsh("branch", "list")
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `feat\s+3 changed`, out)
	out, errOut, code = d.dsh("branch", "diff", "feat", "--stat")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "modified  a.txt +1 -1\ndeleted   old.txt +0 -1\nadded     src/new.go +1 -0\n", out)
	diff, errOut, code := d.dsh("branch", "diff", "feat")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, diff, "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a0\n+a1\n")
	out, errOut, code = d.dsh("branch", "diff", "feat", "--patch")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "*** Begin Patch\n*** Update File: a.txt\n@@\n-a0\n+a1\n*** Delete File: old.txt\n*** Add File: src/new.go\n+package x\n*** End Patch\n", out)
	// The diff applies with git to a copy of the workspace.
	cp := t.TempDir()
	require.NoError(t, exec.Command("cp", "-a", d.Src+"/.", cp).Run())
	require.NoError(t, os.WriteFile(filepath.Join(t.TempDir(), "x"), nil, 0o644))
	apply := exec.Command("git", "apply", "-")
	apply.Dir, apply.Stdin = cp, strings.NewReader(diff)
	gout, err := apply.CombinedOutput()
	require.NoError(t, err, "%s", gout)
	got, _ := os.ReadFile(filepath.Join(cp, "src/new.go"))
	assert.Equal(t, "package x\n", string(got))

	// A person saves a.txt through the mount: the branch started from a0.
	d.sh("echo mine > a.txt")
	out, errOut, code = d.dsh("branch", "commit", "feat")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, errOut, "FS_STALE_VERSION")
	assert.Contains(t, errOut, "a.txt")
	_, err = d.Client.BranchCommit(ctx, control.BranchCommitParams{Name: "feat"})
	var re *control.RPCError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, []string{"a.txt"}, re.Conflicts)
	assert.Equal(t, "gone\n", d.sh("cat old.txt"), "nothing applied")

	// A second branch that changed only other paths commits.
	_, _, code = d.dsh("branch", "create", "fix")
	require.Equal(t, 0, code)
	_, err = d.Client.Write(ctx, control.WriteParams{Path: "b.txt", Content: "b1\n", Branch: "fix", Unconditional: true})
	require.NoError(t, err)
	assert.Equal(t, "b0\n", d.sh("cat b.txt")) // in the kernel's cache now
	out, errOut, code = d.dsh("branch", "commit", "fix")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "committed branch fix: 1 file\n")
	assert.Equal(t, "b1\n", d.sh("cat b.txt"), "the mount shows the commit at once")
	logOut, _, _ := d.dsh("log", "b.txt", "--json")
	assert.Contains(t, logOut, `"detail": "branch fix commit"`)
	logOut, _, _ = d.dsh("log", "b.txt")
	assert.Contains(t, logOut, "(in branch fix)", "the branch's own write is named as such")

	_, errOut, code = d.dsh("branch", "discard", "feat")
	require.Equal(t, 0, code, errOut)
	out, _, _ = d.dsh("branch", "list")
	assert.Empty(t, out)
	des, err := os.ReadDir(filepath.Join(d.State, "branches"))
	require.NoError(t, err)
	assert.Empty(t, des, "discard leaves no trace")
	// The staging directory never shows on the mount.
	names := d.sh("ls -a")
	assert.NotContains(t, names, ".dshmount-staging")
}

// TestBranch_Kill9DuringCommitIsAllOrNothing kills the daemon (SIGKILL)
// at various moments of a 200-file branch commit and of a 200-file atomic
// patch, restarts it on the same directories, and checks that the
// workspace holds entirely the old or entirely the new content, and that
// the branches survived the restart.
func TestBranch_Kill9DuringCommitIsAllOrNothing(t *testing.T) {
	files := map[string]string{}
	for i := range 200 {
		files[fmt.Sprintf("f%03d.txt", i)] = "old\n"
	}
	d := startDaemon(t, daemonOptions{Files: files})
	dirs := d.dirs()
	t.Cleanup(func() {
		if mounted(dirs.Mnt) {
			_ = syscall.Unmount(dirs.Mnt, syscall.MNT_DETACH)
		}
	})
	phases := []string{"journal", "staging", "first applied", "half applied", "last applied", "done"}
	for round, phase := range phases {
		for _, atomicPatch := range []bool{false, true} {
			ctx := testCtx(t)
			want := fmt.Sprintf("r%d-%v\n", round, atomicPatch)
			var sb strings.Builder
			sb.WriteString("*** Begin Patch\n")
			name := fmt.Sprintf("big%d", round)
			if !atomicPatch {
				_, err := d.Client.BranchCreate(ctx, control.BranchCreateParams{Name: name})
				require.NoError(t, err)
				_, err = d.Client.BranchCreate(ctx, control.BranchCreateParams{Name: name + "-kept"})
				require.NoError(t, err)
				_, err = d.Client.Write(ctx, control.WriteParams{Path: "kept.txt", Content: "kept\n", Branch: name + "-kept"})
				require.NoError(t, err)
			}
			old := currentContent(t, d)
			for i := range 200 {
				p := fmt.Sprintf("f%03d.txt", i)
				if atomicPatch {
					fmt.Fprintf(&sb, "*** Update File: %s\n@@\n-%s+%s", p, old, want)
					continue
				}
				_, err := d.Client.Write(ctx, control.WriteParams{Path: p, Content: want, Branch: name, Unconditional: true})
				require.NoError(t, err)
			}
			sb.WriteString("*** End Patch\n")

			next := startDaemon(t, daemonOptions{Dirs: dirs, Gated: true})
			var wg sync.WaitGroup
			returned := make(chan struct{})
			wg.Go(func() {
				defer close(returned)
				if atomicPatch {
					_, _ = d.Client.Patch(ctx, control.PatchParams{Patch: sb.String(), Atomic: true, Unconditional: true})
				} else {
					_, _ = d.Client.BranchCommit(ctx, control.BranchCommitParams{Name: name})
				}
			})
			waitForPhase(t, d, phase, want, returned)
			killHard(t, d)
			wg.Wait()
			next.release()
			d = next

			got := currentContent(t, d)
			if got != old && got != want {
				t.Fatalf("round %d (atomic patch %v, killed at %s): the workspace is mixed after the restart", round, atomicPatch, phase)
			}
			t.Logf("round %d (atomic patch %v, killed at %s): all %s", round, atomicPatch, phase, map[bool]string{true: "after", false: "before"}[got == want])
			assert.Equal(t, got, d.sh("cat f000.txt"), "the mount agrees")
			if !atomicPatch {
				r, err := d.Client.Read(ctx, control.ReadParams{Path: "kept.txt", Branch: name + "-kept"})
				require.NoError(t, err, "the other branch survived the kill")
				assert.Equal(t, "kept", r.Lines[0].Text)
				_, err = d.Client.Stat(ctx, control.StatParams{Path: "f000.txt", Branch: name})
				if got == want {
					assert.Equal(t, provider.CodeNotFound, provider.CodeOf(err), "a committed branch is gone")
				} else {
					require.NoError(t, err, "an undone commit keeps its branch")
				}
			}
			_, err := os.Stat(filepath.Join(d.Src, ".dshmount-staging"))
			assert.True(t, os.IsNotExist(err), "no staging left")
		}
	}
}

// currentContent returns the content shared by all f*.txt of the
// workspace, failing when they differ.
func currentContent(t *testing.T, d *daemon) string {
	t.Helper()
	first := ""
	for i := range 200 {
		b, err := os.ReadFile(filepath.Join(d.Src, fmt.Sprintf("f%03d.txt", i)))
		require.NoError(t, err)
		if i == 0 {
			first = string(b)
			continue
		}
		if string(b) != first {
			t.Fatalf("f%03d.txt holds %q but f000.txt %q: a mixed workspace", i, b, first)
		}
	}
	return first
}

// waitForPhase spins until the commit running in the daemon reaches phase
// (seen from the disk), or returns.
func waitForPhase(t *testing.T, d *daemon, phase, want string, returned <-chan struct{}) {
	t.Helper()
	reached := func() bool {
		switch phase {
		case "journal":
			des, _ := os.ReadDir(filepath.Join(d.State, "branches.journal"))
			for _, de := range des {
				if strings.HasSuffix(de.Name(), ".json") {
					return true
				}
			}
		case "staging":
			des, _ := os.ReadDir(filepath.Join(d.Src, ".dshmount-staging"))
			for _, de := range des {
				staged, _ := os.ReadDir(filepath.Join(d.Src, ".dshmount-staging", de.Name()))
				if len(staged) >= 150 {
					return true
				}
			}
		case "first applied", "half applied", "last applied":
			f := map[string]string{"first applied": "f000.txt", "half applied": "f100.txt", "last applied": "f199.txt"}[phase]
			b, _ := os.ReadFile(filepath.Join(d.Src, f))
			return string(b) == want
		}
		return false
	}
	deadline := time.Now().Add(time.Minute)
	for !reached() {
		select {
		case <-returned:
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the commit did not reach %s in a minute", phase)
		}
	}
}
