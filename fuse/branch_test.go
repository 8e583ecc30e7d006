package fuse

import (
	"io"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// Every kind of change through the branch mount stays in the branch (the
// workspace and its mount are untouched), shows through the mount and the
// branch's provider API alike, and a commit applies it to the workspace.
func TestBranchMount_ChangesStayInTheBranchUntilCommit(t *testing.T) {
	eachBranchMode(t, envOptions{}, func(t *testing.T, e *branchEnv) {
		e.put("a.txt", "alpha\n")
		e.put("dir/b.txt", "bravo\n")
		e.put("dir/gone.txt", "gone\n")
		e.put("old/x.txt", "x\n")
		e.put("keep.txt", "keep\n")
		e.put("mv.txt", "move me\n")
		before := map[string]string{}
		for _, rel := range []string{"a.txt", "dir/b.txt", "dir/gone.txt", "old/x.txt", "keep.txt", "mv.txt"} {
			before[rel] = read(t, e.b(rel))
		}

		// write over, append, truncate, create, mkdir, symlink, chmod,
		// unlink, rmdir, rename
		require.NoError(t, os.WriteFile(e.bm("a.txt"), []byte("ALPHA\n"), 0o644))
		f, err := os.OpenFile(e.bm("dir/b.txt"), os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteString("+more\n")
		require.NoError(t, err)
		require.NoError(t, f.Close())
		require.NoError(t, os.Truncate(e.bm("keep.txt"), 2))
		require.NoError(t, os.WriteFile(e.bm("n.txt"), []byte("new\n"), 0o640))
		require.NoError(t, os.Mkdir(e.bm("made"), 0o750))
		require.NoError(t, os.WriteFile(e.bm("made/m.txt"), []byte("in made\n"), 0o644))
		require.NoError(t, os.Symlink("a.txt", e.bm("link")))
		require.NoError(t, os.Chmod(e.bm("dir/b.txt"), 0o600))
		require.NoError(t, os.Remove(e.bm("dir/gone.txt")))
		require.NoError(t, os.Remove(e.bm("old/x.txt")))
		require.NoError(t, os.Remove(e.bm("old")))
		require.NoError(t, os.Rename(e.bm("mv.txt"), e.bm("dir/moved.txt")))

		// the branch mount sees it all
		assert.Equal(t, "ALPHA\n", read(t, e.bm("a.txt")))
		assert.Equal(t, "bravo\n+more\n", read(t, e.bm("dir/b.txt")))
		assert.Equal(t, "ke", read(t, e.bm("keep.txt")))
		assert.Equal(t, "new\n", read(t, e.bm("n.txt")))
		assert.Equal(t, "in made\n", read(t, e.bm("made/m.txt")))
		assert.Equal(t, "ALPHA\n", read(t, e.bm("link")))
		target, err := os.Readlink(e.bm("link"))
		require.NoError(t, err)
		assert.Equal(t, "a.txt", target)
		fi, err := os.Stat(e.bm("dir/b.txt"))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		fi, err = os.Stat(e.bm("n.txt"))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm())
		fi, err = os.Stat(e.bm("made"))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o750), fi.Mode().Perm())
		assert.Equal(t, "<absent>", read(t, e.bm("dir/gone.txt")))
		assert.NoDirExists(t, e.bm("old"))
		assert.Equal(t, "<absent>", read(t, e.bm("mv.txt")))
		assert.Equal(t, "move me\n", read(t, e.bm("dir/moved.txt")))
		assert.ElementsMatch(t, []string{"a.txt", "dir", "keep.txt", "n.txt", "made", "link"}, e.bnames("."))
		assert.ElementsMatch(t, []string{"b.txt", "moved.txt"}, e.bnames("dir"))

		// so does the branch's provider API
		assert.Equal(t, "ALPHA\n", e.bread("a.txt"))
		assert.Equal(t, "bravo\n+more\n", e.bread("dir/b.txt"))
		assert.Equal(t, "ke", e.bread("keep.txt"))
		assert.Equal(t, "new\n", e.bread("n.txt"))
		assert.Equal(t, "in made\n", e.bread("made/m.txt"))
		assert.Equal(t, "<absent>", e.bread("dir/gone.txt"))
		assert.Equal(t, "<absent>", e.bread("mv.txt"))
		assert.Equal(t, "move me\n", e.bread("dir/moved.txt"))
		assert.ElementsMatch(t, []string{"a.txt", "dir", "keep.txt", "n.txt", "made", "link"}, e.blist("."))
		assert.ElementsMatch(t, []string{"b.txt", "moved.txt"}, e.blist("dir"))

		// the workspace and its mount are untouched
		for rel, content := range before {
			assert.Equal(t, content, read(t, e.b(rel)), rel)
			assert.Equal(t, content, read(t, e.m(rel)), rel)
		}
		for _, rel := range []string{"n.txt", "made", "link", "dir/moved.txt"} {
			_, err := os.Lstat(e.b(rel))
			assert.ErrorIs(t, err, os.ErrNotExist, rel)
		}
		fi, err = os.Stat(e.b("dir/b.txt"))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())

		// the live base: a workspace change to a path the branch did not
		// touch shows in the branch
		e.put("dir/later.txt", "later\n")
		assert.Equal(t, "later\n", read(t, e.bm("dir/later.txt")))

		// commit applies it all
		e.commit()
		assert.Equal(t, "ALPHA\n", read(t, e.b("a.txt")))
		assert.Equal(t, "bravo\n+more\n", read(t, e.b("dir/b.txt")))
		assert.Equal(t, "ke", read(t, e.b("keep.txt")))
		assert.Equal(t, "new\n", read(t, e.b("n.txt")))
		assert.Equal(t, "in made\n", read(t, e.b("made/m.txt")))
		assert.Equal(t, "<absent>", read(t, e.b("dir/gone.txt")))
		assert.NoDirExists(t, e.b("old"))
		assert.Equal(t, "<absent>", read(t, e.b("mv.txt")))
		assert.Equal(t, "move me\n", read(t, e.b("dir/moved.txt")))
		assert.Equal(t, "later\n", read(t, e.b("dir/later.txt")))
		target, err = os.Readlink(e.b("link"))
		require.NoError(t, err)
		assert.Equal(t, "a.txt", target)
		fi, err = os.Stat(e.b("dir/b.txt"))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	})
}

// A copy-up keeps the inode number the branch mount showed, and a
// descriptor opened before it keeps working and reads the branch's bytes.
func TestBranchMount_CopyUpKeepsIdentityAndOpenDescriptors(t *testing.T) {
	eachBranchMode(t, envOptions{}, func(t *testing.T, e *branchEnv) {
		e.put("a.txt", "one\n")
		var before, after, ws unix.Stat_t
		require.NoError(t, unix.Lstat(e.bm("a.txt"), &before))
		reader, err := os.Open(e.bm("a.txt"))
		require.NoError(t, err)
		defer reader.Close()
		buf := make([]byte, 16)
		n, err := reader.ReadAt(buf, 0)
		require.ErrorIs(t, err, io.EOF)
		assert.Equal(t, "one\n", string(buf[:n]))

		require.NoError(t, os.WriteFile(e.bm("a.txt"), []byte("two two\n"), 0o644))
		require.NoError(t, unix.Lstat(e.bm("a.txt"), &after))
		assert.Equal(t, before.Ino, after.Ino, "the copy-up keeps the inode number")
		require.NoError(t, unix.Lstat(e.b("a.txt"), &ws))
		assert.Equal(t, "one\n", read(t, e.b("a.txt")))

		n, err = reader.ReadAt(buf, 0)
		require.ErrorIs(t, err, io.EOF)
		assert.Equal(t, "two two\n", string(buf[:n]), "a descriptor opened before the copy-up reads the branch's file")

		// renamed, it keeps the number too
		require.NoError(t, os.Rename(e.bm("a.txt"), e.bm("b.txt")))
		require.NoError(t, unix.Lstat(e.bm("b.txt"), &after))
		assert.Equal(t, before.Ino, after.Ino)
	})
}

// Directory listings merge the branch's entries over the workspace's and
// leave out what the branch deleted; names the workspace gains show.
func TestBranchMount_ReaddirMergesAndHidesWhiteouts(t *testing.T) {
	e := newBranchEnv(t, envOptions{})
	e.put("d/one", "1")
	e.put("d/two", "2")
	e.put("d/sub/three", "3")
	require.NoError(t, os.Remove(e.bm("d/one")))
	require.NoError(t, os.WriteFile(e.bm("d/four"), []byte("4"), 0o644))
	require.NoError(t, os.WriteFile(e.bm("d/two"), []byte("22"), 0o644))
	e.put("d/five", "5")
	assert.ElementsMatch(t, []string{"two", "sub", "four", "five"}, e.bnames("d"))
	assert.ElementsMatch(t, []string{"two", "sub", "four", "five"}, e.blist("d"))
	assert.ElementsMatch(t, []string{"one", "two", "sub", "five"}, e.names("d"))

	// a directory deleted and made again shows only its new entries
	require.NoError(t, os.Remove(e.bm("d/sub/three")))
	require.NoError(t, os.Remove(e.bm("d/sub")))
	require.NoError(t, os.Mkdir(e.bm("d/sub"), 0o755))
	require.NoError(t, os.WriteFile(e.bm("d/sub/six"), []byte("6"), 0o644))
	assert.Equal(t, []string{"six"}, e.bnames("d/sub"))

	// a file over a whiteout, an rmdir of a non-empty directory
	require.NoError(t, os.WriteFile(e.bm("d/one"), []byte("again"), 0o644))
	assert.Equal(t, "again", read(t, e.bm("d/one")))
	assert.ErrorIs(t, os.Remove(e.bm("d/sub")), syscall.ENOTEMPTY)
	// hard links and directory renames are refused (EXDEV: programs copy)
	assert.ErrorIs(t, os.Link(e.bm("d/one"), e.bm("d/hard")), syscall.EXDEV)
	assert.ErrorIs(t, os.Rename(e.bm("d/sub"), e.bm("d/sub2")), syscall.EXDEV)
}
