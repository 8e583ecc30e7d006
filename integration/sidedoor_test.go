package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
)

// The side doors of issue 26: each is what a bound process (under
// dshmount exec) tried beside the mount to change bytes its session never
// read, or a session's own work refused. Person = the unbound test process.

// TestSideDoor_UnconditionalOverTheInheritedSocket: the CLI a bound command
// runs reaches the socket through DSH_SOCKET; its --unconditional is
// refused like the mount's write.
func TestSideDoor_UnconditionalOverTheInheritedSocket(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"a": "person\n"}})
	_, stderr, code := boundShell(t, d, `echo X > a; echo X | `+dshBinary+` write a --unconditional`)
	assert.NotEqual(t, 0, code, "the unconditional write must be refused: %s", stderr)
	assert.Contains(t, stderr, "cannot skip the guard")
	assertBacking(t, d, "a", "person\n")
}

// TestSideDoor_MovingIntoAnotherSession: exec --session OTHER inside a bound
// tree runs as the tree's session, not OTHER (which read b).
func TestSideDoor_MovingIntoAnotherSession(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"b": "person\n"}})
	other, err := d.Client.OpenSession(testCtx(t), "other")
	require.NoError(t, err)
	_, err = d.Client.Read(testCtx(t), control.ReadParams{Path: "b", Session: other})
	require.NoError(t, err)
	_, stderr, code := boundShell(t, d, dshBinary+` exec --session `+string(other)+` -- sh -c 'echo R > b'`)
	assert.NotEqual(t, 0, code, "the nested exec runs as the bound session, which never read b: %s", stderr)
	assertBacking(t, d, "b", "person\n")
}

// TestSideDoor_DirectoryRenameReplacesUnreadFiles: renaming a directory
// away moves files the session never read out from under their names.
func TestSideDoor_DirectoryRenameReplacesUnreadFiles(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"d/in": "person\n"}})
	_, stderr, code := boundShell(t, d, `mv d d.old && mkdir d && echo NEW > d/in`)
	assert.NotEqual(t, 0, code, "the rename of d must be refused: %s", stderr)
	assertBacking(t, d, "d/in", "person\n")
	_, err := os.Lstat(filepath.Join(d.Src, "d.old"))
	assert.True(t, os.IsNotExist(err), "d was not moved: %v", err)

	// A directory whose files the session read (or made) moves.
	_, stderr, code = boundShell(t, d, `cat d/in >/dev/null && mv d d.old && mkdir -p e/f && echo x > e/f/g && mv e e2`)
	assert.Equal(t, 0, code, "read or own files move with their directory: %s", stderr)
	assertBacking(t, d, "d.old/in", "person\n")
	assertBacking(t, d, "e2/f/g", "x\n")
}

// TestSideDoor_PassthroughHolderDoesNotSwitchTheGuardOff: a person holding
// the file open (a passthrough handle) must not let a bound writer's
// handle bypass the guard: the person's change in between is not lost.
func TestSideDoor_PassthroughHolderDoesNotSwitchTheGuardOff(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"f": "first\n"}})
	holder, err := os.Open(d.m("f"))
	require.NoError(t, err)
	defer holder.Close()
	dir := t.TempDir()
	ready, goOn := filepath.Join(dir, "ready"), filepath.Join(dir, "go")
	type result struct {
		stderr string
		code   int
	}
	done := make(chan result, 1)
	go func() {
		_, stderr, code := boundShell(t, d, `set -e
cat f >/dev/null
exec 3<>f
touch `+ready+`
while [ ! -e `+goOn+` ]; do sleep 0.05; done
printf AGENT >&3
exec 3>&-`)
		done <- result{stderr, code}
	}()
	var r result
	ok := assert.Eventually(t, func() bool {
		select {
		case r = <-done: // the bound open was refused
			return true
		default:
		}
		_, err := os.Stat(ready)
		return err == nil
	}, 30*time.Second, 20*time.Millisecond)
	require.True(t, ok, "the bound shell neither opened f nor failed")
	if r.code == 0 && r.stderr == "" {
		require.NoError(t, os.WriteFile(d.m("f"), []byte("person\n"), 0o644), "the person changes f in place")
		require.NoError(t, os.WriteFile(goOn, nil, 0o644))
		r = <-done
	}
	assert.NotEqual(t, 0, r.code, "the bound write over the person's change must be refused: %s", r.stderr)
	want := "person\n"
	if _, err := os.Stat(ready); err != nil {
		want = "first\n" // refused at the open: the person never had to change it
	}
	assertBacking(t, d, "f", want)
}

// TestSideDoor_OwnMetadataChangeKeepsTheObservation: the session's own
// lchown of its symlink moves the link's ctime; its rename over the link
// still passes (pjdfstest's chown and rename cases, bound).
func TestSideDoor_OwnMetadataChangeKeepsTheObservation(t *testing.T) {
	d := startDaemon(t, daemonOptions{Args: []string{"--allow-other"}})
	_, stderr, code := boundShell(t, d, `ln -s x l && chown -h 65534 l && : > s && mv -f s l
ln -s y m && chmod 0755 . && touch -h m && mv m n && rm n`)
	assert.Equal(t, 0, code, "the session's own metadata change is its own: %s", stderr)
	fi, err := os.Lstat(filepath.Join(d.Src, "l"))
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular(), "s replaced the link")
}

// TestSideDoor_BranchExecInsideABoundTreeIsAllowed: exec --branch B inside
// a bound tree binds to a branch session of the same owner (it cannot
// touch the workspace before a guarded commit), not to the tree's session.
func TestSideDoor_BranchExecInsideABoundTreeIsAllowed(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"a.txt": "a0\n"}})
	bm := filepath.Join(t.TempDir(), "feat")
	require.NoError(t, os.Mkdir(bm, 0o755))
	t.Cleanup(func() {
		if mounted(bm) {
			_ = syscall.Unmount(bm, syscall.MNT_DETACH)
		}
	})
	_, errOut, code := d.dsh("branch", "create", "feat", "--mount", bm)
	require.Equal(t, 0, code, errOut)
	_, stderr, code := boundShell(t, d, dshBinary+` exec --branch feat -- sh -c 'cat a.txt >/dev/null && echo a1 > a.txt'`)
	require.Equal(t, 0, code, "the branch exec inside a bound tree: %s", stderr)
	b, err := os.ReadFile(filepath.Join(bm, "a.txt"))
	require.NoError(t, err)
	assert.Equal(t, "a1\n", string(b), "the write landed in the branch")
	assertBacking(t, d, "a.txt", "a0\n")
}

// TestSideDoor_APersonsOpenRightAfterABoundReadIsNeverEIO: a bound reader's
// handle is cached, a person's is passthrough; the person's open that
// follows the reader's close at once must not race the bookkeeping of that
// close (the kernel answers EIO when a passthrough registration is dropped
// under it). Repeated, since the race window is microseconds.
func TestSideDoor_APersonsOpenRightAfterABoundReadIsNeverEIO(t *testing.T) {
	const rounds = 300
	d := startDaemon(t, daemonOptions{})
	g := startGuardOps(t, d)
	for i := range rounds {
		rel := fmt.Sprintf("f%03d", i%10)
		require.NoError(t, os.WriteFile(filepath.Join(d.Src, rel), []byte("ORIGINAL"), 0o644))
		require.Equal(t, syscall.Errno(0), g.do("read", rel))
		f, err := os.OpenFile(d.m(rel), os.O_WRONLY|os.O_TRUNC, 0)
		require.NoError(t, err, "round %d: the person's open after the bound read", i)
		_, err = f.WriteString("PERSON")
		require.NoError(t, err)
		require.NoError(t, f.Close())
		// The person's own reads, passthrough or cached, see what it wrote.
		got, err := os.ReadFile(d.m(rel))
		require.NoError(t, err, "round %d", i)
		require.Equal(t, "PERSON", string(got), "round %d", i)
	}
}
