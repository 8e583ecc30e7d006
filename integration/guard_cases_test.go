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
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/provider"
)

// Regression tests of the guard's holes found on a live mount (issue:
// "The guard holds on every path"), each with the exact commands seen.

// TestGuardCases_MetadataGrantsNoObservation: touch, chmod, chown, utimes
// and setxattr on an unseen or stale file are allowed but grant nothing,
// so the write after them is still refused.
func TestGuardCases_MetadataGrantsNoObservation(t *testing.T) {
	metadata := map[string]string{
		"touch":    `touch f`,
		"chmod":    `chmod 644 f`,
		"chown":    `chown 0:0 f`,
		"utimes":   `touch -d '2001-01-01 00:00' f`,
		"setxattr": `python3 -c 'import os; os.setxattr("f", "user.k", b"v")'`,
	}
	for name, cmd := range metadata {
		t.Run(name+"/unseen", func(t *testing.T) {
			d := startDaemon(t, daemonOptions{Files: map[string]string{"f": "theirs\n"}})
			_, stderr, code := boundShell(t, d, cmd+`; echo EVIL > f`)
			assert.NotEqual(t, 0, code, "the write after %s must be refused", name)
			assert.Contains(t, stderr, "Permission denied")
			assertBacking(t, d, "f", "theirs\n")
		})
		t.Run(name+"/stale", func(t *testing.T) {
			d := startDaemon(t, daemonOptions{Files: map[string]string{"f": "one\n"}})
			g := startGuardOps(t, d)
			require.Equal(t, syscall.Errno(0), g.do("read", "f"))
			require.NoError(t, os.WriteFile(d.m("f"), []byte("person\n"), 0o644)) // a person writes
			switch name {
			case "touch", "utimes":
				assert.Equal(t, syscall.Errno(0), g.do("touch", "f"))
			case "chmod", "chown":
				assert.Equal(t, syscall.Errno(0), g.do("chmod", "f"))
			case "setxattr":
				assert.Equal(t, syscall.Errno(0), g.do("setxattr", "f"))
			}
			assert.Equal(t, syscall.ESTALE, g.do("write", "f"), "%s granted a fresh observation", name)
			assertBacking(t, d, "f", "person\n")
		})
	}
}

// TestGuardCases_RenameAwayIsGuarded: moving an unseen file away, writing
// the new name and moving it back replaced a file the session never saw.
func TestGuardCases_RenameAwayIsGuarded(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"e": "theirs\n"}})
	_, _, code := boundShell(t, d, `mv e e.tmp && echo EVIL > e.tmp && mv e.tmp e`)
	assert.NotEqual(t, 0, code)
	assertBacking(t, d, "e", "theirs\n")
	_, err := os.Stat(filepath.Join(d.Src, "e.tmp"))
	assert.True(t, os.IsNotExist(err), "the unseen file was not moved: %v", err)
}

// TestGuardCases_LinkGrantsNoObservation: a hard link of an unseen file
// does not let the session write it under either name.
func TestGuardCases_LinkGrantsNoObservation(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"g": "theirs\n"}})
	_, _, code := boundShell(t, d, `ln g g.lnk; echo EVIL > g`)
	assert.NotEqual(t, 0, code)
	_, _, code = boundShell(t, d, `ln g g2.lnk; echo EVIL > g2.lnk`)
	assert.NotEqual(t, 0, code)
	assertBacking(t, d, "g", "theirs\n")
}

// TestGuardCases_OnlyAByteChangeMakesATokenStale: after an agent's read,
// a touch, a same-mode chmod, sed -i without a match (identical bytes
// through a temp file), an identical rewrite and a git checkout that
// restores the same content all leave its token fresh; a real byte change
// still makes it stale.
func TestGuardCases_OnlyAByteChangeMakesATokenStale(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"f.txt": "alpha\nbeta\n"}})
	ctx := testCtx(t)
	d.sh(`git init -q . && git add f.txt && git -c user.name=t -c user.email=t@example.com commit -q -m init`)
	sess, err := d.Client.OpenSession(ctx, "agent")
	require.NoError(t, err)
	edit := func(old, new string) error {
		_, err := d.Client.Edit(ctx, control.EditParams{Path: "f.txt", OldString: old, NewString: new, Session: sess})
		return err
	}
	_, err = d.Client.Read(ctx, control.ReadParams{Path: "f.txt", Session: sess})
	require.NoError(t, err)

	for name, script := range map[string]string{
		"touch":              `touch f.txt`,
		"same-mode chmod":    `chmod 644 f.txt`,
		"sed -i no match":    `sed -i 's/nomatch/x/' f.txt`,
		"identical rewrite":  `printf 'alpha\nbeta\n' > f.txt`,
		"git checkout round": `printf 'changed\n' > f.txt && git checkout -q -- f.txt`,
		"xattr":              `python3 -c 'import os; os.setxattr("f.txt", "user.k", b"v")'`,
	} {
		d.sh(script)
		assertBacking(t, d, "f.txt", "alpha\nbeta\n")
		v, err := d.Client.Stat(ctx, control.StatParams{Path: "f.txt", Session: sess})
		require.NoError(t, err, name)
		require.NotNil(t, v)
		require.NoError(t, edit("beta", "beta"), "%s made the token stale", name)
	}
	// A bound process keeps working across the same patterns: two sed -i
	// runs in a row, a link, a chmod of the link and removal of the first
	// name (issue: "other names of a hard link go stale").
	_, stderr, code := boundShell(t, d, `set -e
cat f.txt >/dev/null
sed -i 's/alpha/ALPHA/' f.txt
sed -i 's/beta/BETA/' f.txt
echo c > c
ln c c2
chmod 600 c2
rm c
echo more >> c2
rm c2`)
	require.Equal(t, 0, code, stderr)
	assertBacking(t, d, "f.txt", "ALPHA\nBETA\n")

	// A real byte change is still stale for the agent.
	require.Error(t, edit("BETA", "x"))
	assert.ErrorIs(t, edit("BETA", "x"), provider.ErrStaleVersion)
}

// TestGuardCases_SecondMmapStoreIsNotLost: a second store into an already
// dirty mmap'd page changes bytes without moving the mtime; the guard
// hashes the bytes, so an agent write prepared before that store is
// refused instead of silently dropping it.
func TestGuardCases_SecondMmapStoreIsNotLost(t *testing.T) {
	// With passthrough the store lands in the backing file's pages; without
	// it, in the mount's own page cache, which the socket mutation writes
	// back before its guard hashes.
	for _, args := range [][]string{nil, {"--passthrough=false"}} {
		t.Run(fmt.Sprintf("args=%v", args), func(t *testing.T) { secondMmapStore(t, args) })
	}
}

// secondMmapStore is one run of TestGuardCases_SecondMmapStoreIsNotLost.
func secondMmapStore(t *testing.T, args []string) {
	d := startDaemon(t, daemonOptions{Args: args, Files: map[string]string{"m.bin": "0123456789abcdef"}})
	ctx := testCtx(t)
	f, err := os.OpenFile(d.m("m.bin"), os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, 16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	require.NoError(t, err)
	defer unix.Munmap(mem)
	copy(mem, "FIRST")
	require.NoError(t, unix.Msync(mem, unix.MS_SYNC))

	sess, err := d.Client.OpenSession(ctx, "agent")
	require.NoError(t, err)
	read, err := d.Client.Read(ctx, control.ReadParams{Path: "m.bin", Session: sess})
	require.NoError(t, err)
	copy(mem[8:], "SECOND") // no msync: the page stays dirty

	_, err = d.Client.Write(ctx, control.WriteParams{Path: "m.bin", Content: "agent", Session: sess})
	require.Error(t, err, "the agent read %q; the bytes changed since", read.Version)
	assert.ErrorIs(t, err, provider.ErrStaleVersion)
	require.NoError(t, unix.Msync(mem, unix.MS_SYNC))
	assertBacking(t, d, "m.bin", "FIRST567SECONDef")
}

// TestBoundSession_OwnUnflushedWritesNeverMakeItStale: writes a session
// makes through its own descriptors are its own, flushed or not.
func TestBoundSession_OwnUnflushedWritesNeverMakeItStale(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"seen": "0123456789"}})
	g := startGuardOps(t, d)
	require.Equal(t, syscall.Errno(0), g.do("read", "seen"))
	for _, seq := range [][]string{
		{"open seen", "pwrite seen", "ftruncate seen", "close seen"},
		{"open seen", "pwrite seen", "punch seen", "pwrite seen", "truncate seen", "close seen"},
		{"open seen", "copy seen", "mmap seen", "ftruncate seen", "pwrite seen", "close seen"},
		{"write new", "open new", "pwrite new", "ftruncate new", "link new new2", "chmod new2", "unlink new", "close new"},
		{"open new2", "pwrite new2", "unlink new2", "close new2"},
		{"open seen", "pwrite seen", "rename seen seen2", "pwrite seen", "close seen", "rename seen2 seen", "write seen"},
	} {
		for _, req := range seq {
			args := strings.Fields(req)
			require.Equal(t, syscall.Errno(0), g.do(args...), "%q in %q", req, seq)
		}
	}
	assertBacking(t, d, "seen", "BOUND")
}

// TestGuardCases_PythonAvailable makes the python3 dependency of the cases
// above explicit (installed by make deps).
func TestGuardCases_PythonAvailable(t *testing.T) {
	_, err := exec.LookPath("python3")
	require.NoError(t, err, "python3 is required (make deps installs it)")
}

// TestGuardCases_PersonAndBoundWriterHoldTheSameFile: the kernel keeps one
// I/O mode per inode, so a person's descriptor and a bound writer's
// descriptor of one file never get EIO, in either order, with passthrough on
// and off: a bound writer beside a person's passthrough descriptor gets
// EBUSY; the guard then judges the bound writer's changes.
func TestGuardCases_PersonAndBoundWriterHoldTheSameFile(t *testing.T) {
	for _, args := range [][]string{nil, {"--passthrough=false"}} {
		t.Run(fmt.Sprintf("args=%v", args), func(t *testing.T) {
			d := startDaemon(t, daemonOptions{Args: args, Files: map[string]string{
				"bound-first": "0123456789", "person-first": "0123456789"}})
			g := startGuardOps(t, d)

			// The bound writer opens first (direct I/O), then the person.
			require.Equal(t, syscall.Errno(0), g.do("read", "bound-first"))
			require.Equal(t, syscall.Errno(0), g.do("open", "bound-first"))
			person, err := os.OpenFile(d.m("bound-first"), os.O_RDWR, 0)
			require.NoError(t, err, "a person's open beside a bound writer's")
			require.Equal(t, syscall.Errno(0), g.do("pwrite", "bound-first"), "nobody else wrote yet")
			_, err = person.WriteAt([]byte("PERSON"), 0)
			require.NoError(t, err)
			require.NoError(t, person.Close())
			assert.Equal(t, syscall.ESTALE, g.do("pwrite", "bound-first"), "the person wrote since the session's own write")
			assert.Equal(t, syscall.Errno(0), g.do("close", "bound-first"))
			assertBacking(t, d, "bound-first", "PERSON6789")

			// The person opens first (passthrough where the mount allows it),
			// then the bound writer: beside a passthrough descriptor its
			// writes could not be guarded, so its open is refused (EBUSY)
			// until the person's is closed; without passthrough it opens.
			person, err = os.OpenFile(d.m("person-first"), os.O_RDWR, 0)
			require.NoError(t, err)
			require.Equal(t, syscall.Errno(0), g.do("read", "person-first"))
			if args == nil {
				assert.Equal(t, syscall.EBUSY, g.do("open", "person-first"), "a bound open beside a person's passthrough descriptor")
				require.NoError(t, person.Close())
				// The kernel releases the descriptor after close returns.
				require.Eventually(t, func() bool { return g.do("open", "person-first") == 0 }, 10*time.Second, 20*time.Millisecond,
					"the bound open once the person's descriptor is closed")
			} else {
				require.Equal(t, syscall.Errno(0), g.do("open", "person-first"), "a bound open beside a person's")
			}
			if args == nil {
				person, err = os.OpenFile(d.m("person-first"), os.O_RDWR, 0)
				require.NoError(t, err, "a person's open beside a bound writer's")
			}
			defer person.Close()
			require.Equal(t, syscall.Errno(0), g.do("pwrite", "person-first"))
			assert.Equal(t, syscall.Errno(0), g.do("close", "person-first"))
			assertBacking(t, d, "person-first", "BOUND56789")
			_, err = person.WriteAt([]byte("P"), 9)
			require.NoError(t, err, "the person's descriptor still writes")
			assertBacking(t, d, "person-first", "BOUND5678P")
		})
	}
}
