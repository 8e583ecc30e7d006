package fuse

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/viewrules"
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
		require.NoError(t, os.Chmod(e.bm("made"), 0o710))

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
		assert.Equal(t, os.FileMode(0o710), fi.Mode().Perm())
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
		fi, err = os.Stat(e.b("made"))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o710), fi.Mode().Perm(), "the mode set on the branch's directory")
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
		e.relookup("a.txt")
		require.NoError(t, unix.Lstat(e.bm("a.txt"), &after))
		assert.Equal(t, before.Ino, after.Ino, "the copy-up keeps the inode number")
		require.NoError(t, unix.Lstat(e.b("a.txt"), &ws))
		assert.Equal(t, "one\n", read(t, e.b("a.txt")))

		n, err = reader.ReadAt(buf, 0)
		require.ErrorIs(t, err, io.EOF)
		assert.Equal(t, "two two\n", string(buf[:n]), "a descriptor opened before the copy-up reads the branch's file")

		// renamed, it keeps the number too
		require.NoError(t, os.Rename(e.bm("a.txt"), e.bm("b.txt")))
		e.relookup("b.txt")
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
	// hard links and renames of the workspace's directories are refused
	// (EXDEV: programs copy); a directory the branch made moves
	assert.ErrorIs(t, os.Link(e.bm("d/one"), e.bm("d/hard")), syscall.EXDEV)
	assert.ErrorIs(t, os.Rename(e.bm("d"), e.bm("d2")), syscall.EXDEV)
	require.NoError(t, os.Mkdir(e.bm("d/sub/deeper"), 0o700))
	require.NoError(t, os.WriteFile(e.bm("d/sub/deeper/seven"), []byte("7"), 0o644))
	require.NoError(t, os.Rename(e.bm("d/sub"), e.bm("moved")))
	assert.ElementsMatch(t, []string{"deeper", "six"}, e.bnames("moved"))
	assert.Equal(t, "7", read(t, e.bm("moved/deeper/seven")))
	assert.ElementsMatch(t, []string{"one", "two", "four", "five"}, e.bnames("d"))
	assert.ElementsMatch(t, []string{"one", "two", "four", "five"}, e.blist("d"))
	assert.Equal(t, "7", e.bread("moved/deeper/seven"))

	e.commit()
	assert.ElementsMatch(t, []string{"one", "two", "four", "five"}, e.names("d"))
	assert.Equal(t, "7", read(t, e.b("moved/deeper/seven")))
	assert.Equal(t, "6", read(t, e.b("moved/six")))
	fi, err := os.Stat(e.b("moved/deeper"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	assert.NoDirExists(t, e.b("d/sub"))
}

// A bound session in the branch mount is guarded exactly as in the
// workspace mount, with observations per (branch, path): unseen is EACCES,
// a change by someone else since it read (in the branch, or in the
// workspace for a file the branch has not copied up) is ESTALE.
func TestBranchMount_BoundSessionGuards(t *testing.T) {
	eachBranchMode(t, envOptions{}, func(t *testing.T, e *branchEnv) {
		e.put("a.txt", "one\n")
		e.put("b.txt", "bee\n")
		e.session()

		// read in the workspace mount only: the branch's file is unseen
		_, err := os.ReadFile(e.m("a.txt"))
		require.NoError(t, err)
		require.ErrorIs(t, os.WriteFile(e.bm("a.txt"), []byte("two\n"), 0o644), syscall.EACCES)
		require.ErrorIs(t, os.Remove(e.bm("a.txt")), syscall.EACCES)
		require.ErrorIs(t, os.Truncate(e.bm("a.txt"), 0), syscall.EACCES)
		assert.Equal(t, "one\n", e.bread("a.txt"))

		// read in the branch, then write: allowed, and again (its own)
		assert.Equal(t, "one\n", read(t, e.bm("a.txt")))
		require.NoError(t, os.WriteFile(e.bm("a.txt"), []byte("two\n"), 0o644))
		require.NoError(t, os.WriteFile(e.bm("a.txt"), []byte("three\n"), 0o644))
		assert.Equal(t, "three\n", e.bread("a.txt"))
		assert.Equal(t, "one\n", read(t, e.b("a.txt")))
		// an observation in the branch grants nothing in the workspace
		assert.Equal(t, "bee\n", read(t, e.bm("b.txt")))
		require.ErrorIs(t, os.WriteFile(e.m("b.txt"), []byte("ws\n"), 0o644), syscall.EACCES)

		// someone changes the branch's file (its provider API): stale
		_, err = e.br.WriteText(context.Background(), e.br.TargetForRel("a.txt"), "theirs\n", nil)
		require.NoError(t, err)
		require.ErrorIs(t, os.WriteFile(e.bm("a.txt"), []byte("mine\n"), 0o644), syscall.ESTALE)
		require.ErrorIs(t, os.Rename(e.bm("b.txt"), e.bm("a.txt")), syscall.ESTALE)
		assert.Equal(t, "theirs\n", e.bread("a.txt"))
		assert.Equal(t, "theirs\n", read(t, e.bm("a.txt")))
		require.NoError(t, os.WriteFile(e.bm("a.txt"), []byte("mine\n"), 0o644))

		// the live base: the workspace changes a file the branch has not
		// copied up after the session read it in the branch: stale
		assert.Equal(t, "bee\n", read(t, e.bm("b.txt")))
		e.put("b.txt", "BEE\n")
		require.ErrorIs(t, os.WriteFile(e.bm("b.txt"), []byte("mine\n"), 0o644), syscall.ESTALE)
		require.ErrorIs(t, os.Remove(e.bm("b.txt")), syscall.ESTALE)
		assert.Equal(t, "BEE\n", e.bread("b.txt"))

		// the records are the branch's: an audit entry under its key
		entries, err := e.store.Audit(policy.AuditQuery{Path: "a.txt"})
		require.NoError(t, err)
		var keys []string
		for _, en := range entries {
			keys = append(keys, string(en.Key))
		}
		assert.Contains(t, keys, "branch/work/a.txt")
	})
}

// Hide and read-only rules apply in the branch mount as in the
// workspace's.
func TestBranchMount_HideAndReadOnlyRules(t *testing.T) {
	e := newBranchEnv(t, envOptions{rules: viewrules.Rules{ReadOnly: []string{"docs", "lib/vendored"}, Hide: []string{"conf/secret", "*.key"}}})
	e.put("docs/guide.md", "guide")
	e.put("free.txt", "free")
	e.put("lib/vendored/x.go", "package x")
	e.put("conf/secret/key", "k")
	e.put("conf/app.conf", "c")
	e.put("sub/id.key", "secret")

	// hidden names do not exist, cannot be made
	assert.Equal(t, []string{"app.conf"}, e.bnames("conf"))
	assert.Empty(t, e.bnames("sub"))
	for _, p := range []string{"conf/secret", "conf/secret/key", "sub/id.key"} {
		_, err := os.Lstat(e.bm(p))
		assert.ErrorIs(t, err, os.ErrNotExist, p)
	}
	assert.ErrorIs(t, os.WriteFile(e.bm("sub/new.key"), []byte("x"), 0o600), syscall.EACCES)
	assert.ErrorIs(t, os.Rename(e.bm("free.txt"), e.bm("sub/free.key")), syscall.EACCES)
	assert.ErrorIs(t, os.Rename(e.bm("conf"), e.bm("conf2")), syscall.EACCES)

	// read-only paths read, and refuse every change
	assert.Equal(t, "guide", read(t, e.bm("docs/guide.md")))
	mutations := map[string]func() error{
		"write":       func() error { return os.WriteFile(e.bm("docs/guide.md"), []byte("x"), 0o644) },
		"create":      func() error { return os.WriteFile(e.bm("docs/new.md"), []byte("x"), 0o644) },
		"truncate":    func() error { return os.Truncate(e.bm("docs/guide.md"), 0) },
		"chmod":       func() error { return os.Chmod(e.bm("docs/guide.md"), 0o600) },
		"unlink":      func() error { return os.Remove(e.bm("docs/guide.md")) },
		"rename out":  func() error { return os.Rename(e.bm("docs/guide.md"), e.bm("guide.md")) },
		"rename in":   func() error { return os.Rename(e.bm("free.txt"), e.bm("docs/free.txt")) },
		"mkdir":       func() error { return os.Mkdir(e.bm("docs/sub"), 0o755) },
		"symlink":     func() error { return os.Symlink("x", e.bm("docs/l")) },
		"move parent": func() error { return os.Rename(e.bm("lib"), e.bm("lib2")) },
		"setxattr":    func() error { return unix.Setxattr(e.bm("docs/guide.md"), "user.x", []byte("1"), 0) },
		"rmdir":       func() error { return os.Remove(e.bm("docs")) },
		"open rdwr":   func() error { f, err := os.OpenFile(e.bm("docs/guide.md"), os.O_RDWR, 0); f.Close(); return err },
		"utimens now": func() error { return unix.UtimesNanoAt(unix.AT_FDCWD, e.bm("docs/guide.md"), nil, 0) },
	}
	for name, mutate := range mutations {
		t.Run(name, func(t *testing.T) {
			assert.ErrorIs(t, mutate(), syscall.EROFS)
		})
	}
	assert.Equal(t, 0, e.br.Changed(), "nothing reached the branch")
	assert.Equal(t, "guide", e.bread("docs/guide.md"))
}

// A workspace change to a path the branch has not changed (through the
// workspace's mount or the socket) reaches the branch mount's kernel
// caches at once when its BaseObserver is on the workspace's engine.
func TestBranchMount_SeesWorkspaceChangesAtOnce(t *testing.T) {
	for _, observed := range []bool{true, false} {
		t.Run(fmt.Sprintf("observed=%v", observed), func(t *testing.T) {
			e := newBranchEnv(t, envOptions{noBaseObserver: !observed})
			e.put("c.txt", "c\n")
			e.put("d.txt", "d\n")
			for _, rel := range []string{"c.txt", "d.txt"} { // cached now
				fi, err := os.Stat(e.bm(rel))
				require.NoError(t, err)
				assert.EqualValues(t, 2, fi.Size())
			}

			require.NoError(t, os.WriteFile(e.m("c.txt"), []byte("c, longer\n"), 0o644))
			_, err := e.engine.Write(context.Background(), policy.Actor{Channel: policy.ChannelSocket},
				e.lfs.TargetForRel("d.txt"), "d, longer\n", policy.Guard{Unconditional: true})
			require.NoError(t, err)
			for _, rel := range []string{"c.txt", "d.txt"} {
				fi, err := os.Stat(e.bm(rel))
				require.NoError(t, err)
				if observed {
					assert.EqualValues(t, 10, fi.Size(), rel)
					assert.Equal(t, rel[:1]+", longer\n", read(t, e.bm(rel)))
				} else { // the kernel's cached attributes stand until their timeout
					assert.EqualValues(t, 2, fi.Size(), rel)
				}
			}
		})
	}
}

// A workspace file with two names (a hard link) is two files in a branch:
// a change under one name is a copy-up of that name only, and the other
// still shows the workspace's bytes (one kernel inode for both names would
// show the change under both).
func TestBranchMount_CopyUpOfAHardLinkedFile(t *testing.T) {
	e := newBranchEnv(t, envOptions{})
	e.put("a.txt", "one\n")
	require.NoError(t, os.Link(e.b("a.txt"), e.b("c.txt")))
	var a, c, again unix.Stat_t
	require.NoError(t, unix.Lstat(e.bm("a.txt"), &a))
	require.NoError(t, unix.Lstat(e.bm("c.txt"), &c))
	assert.NotEqual(t, a.Ino, c.Ino)
	assert.Equal(t, "one\n", read(t, e.bm("c.txt")))

	require.NoError(t, os.WriteFile(e.bm("a.txt"), []byte("two two\n"), 0o644))
	e.relookup("a.txt")
	e.relookup("c.txt")
	require.NoError(t, unix.Lstat(e.bm("a.txt"), &again))
	assert.Equal(t, a.Ino, again.Ino, "the copy-up keeps the number")
	assert.Equal(t, "two two\n", read(t, e.bm("a.txt")))
	assert.Equal(t, "one\n", read(t, e.bm("c.txt")))
	assert.Equal(t, "one\n", read(t, e.b("c.txt")))
}

// Concurrent programs in one branch mount (creates, copy-ups, renames,
// unlinks in shared directories) leave the mount, the branch's provider
// API and, after the commit, the workspace in one agreed state.
func TestBranchMount_ConcurrentChanges(t *testing.T) {
	e := newBranchEnv(t, envOptions{})
	const workers, files = 6, 12
	for i := range files {
		e.put(fmt.Sprintf("shared/base%d", i), "base\n")
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers*files*4)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range files {
				name := e.bm(fmt.Sprintf("shared/w%d-%d", w, i))
				if err := os.WriteFile(name+".tmp", []byte(fmt.Sprintf("%d/%d\n", w, i)), 0o644); err != nil {
					errs <- err
					continue
				}
				if err := os.Rename(name+".tmp", name); err != nil {
					errs <- err
				}
				if i%3 == 0 {
					if err := os.Remove(name); err != nil {
						errs <- err
					}
				}
				if i%files == w { // each worker rewrites one workspace file
					if err := os.WriteFile(e.bm(fmt.Sprintf("shared/base%d", i)), []byte(fmt.Sprintf("by %d\n", w)), 0o644); err != nil {
						errs <- err
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	want := map[string]string{}
	for i := range files {
		want[fmt.Sprintf("base%d", i)] = "base\n"
		if i < workers {
			want[fmt.Sprintf("base%d", i)] = fmt.Sprintf("by %d\n", i)
		}
	}
	for w := range workers {
		for i := range files {
			if i%3 != 0 {
				want[fmt.Sprintf("w%d-%d", w, i)] = fmt.Sprintf("%d/%d\n", w, i)
			}
		}
	}
	var names []string
	for n := range want {
		names = append(names, n)
	}
	assert.ElementsMatch(t, names, e.bnames("shared"))
	assert.ElementsMatch(t, names, e.blist("shared"))
	for n, content := range want {
		assert.Equal(t, content, read(t, e.bm("shared/"+n)), n)
	}
	e.commit()
	for n, content := range want {
		assert.Equal(t, content, read(t, e.b("shared/"+n)), n)
	}
	assert.ElementsMatch(t, names, e.names("shared"))
}
