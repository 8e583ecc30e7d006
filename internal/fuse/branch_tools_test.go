package fuse

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// run runs name args in dir with a clean, fixed environment and fails the
// test on any error, showing its output.
func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	if !strings.Contains(name, "/") {
		if _, err := exec.LookPath(name); err != nil {
			t.Skipf("%s is not installed", name)
		}
	}
	home := t.TempDir()
	// The shell changes into dir and starts name: this process must not
	// touch its own mount between fork and exec. Go's fork keeps the
	// parent thread in a raw syscall until the child has exec'd; a child
	// that first chdirs into (or execs from) the mount waits for this
	// process's FUSE server, which a stop-the-world GC has frozen waiting
	// for that very thread: a deadlock.
	cmd := exec.Command("/bin/sh", append([]string{"-c", `cd "$0" && exec "$@"`, dir, name}, args...)...)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LC_ALL=C", "TMPDIR=" + home,
		"GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s in %s:\n%s", name, strings.Join(args, " "), dir, out)
	return string(out)
}

// An editor's save (vim itself, then its steps by hand: swap file, write
// a temporary, rename it over the file) works in a branch and stays there.
func TestBranchMount_EditorSave(t *testing.T) { eachBranchMode(t, envOptions{}, editorSave) }

func editorSave(t *testing.T, e *branchEnv) {
	e.put("src/a.txt", "one\ntwo\n")
	e.put("src/b.txt", "bee\n")

	run(t, e.bm("src"), "vim", "-u", "NONE", "-N", "-es",
		"-c", "set nobackup writebackup backupcopy=no", "-c", "%s/one/ONE/", "-c", "wq", "a.txt")
	assert.Equal(t, "ONE\ntwo\n", read(t, e.bm("src/a.txt")))
	assert.Equal(t, "ONE\ntwo\n", e.bread("src/a.txt"))
	assert.Equal(t, "one\ntwo\n", read(t, e.b("src/a.txt")))
	assert.ElementsMatch(t, []string{"a.txt", "b.txt"}, e.bnames("src"), "vim left nothing behind")

	swp := e.bm("src/.b.txt.swp")
	require.NoError(t, os.WriteFile(swp, []byte("swap"), 0o600))
	tmp := e.bm("src/.b.txt.tmp")
	require.NoError(t, os.WriteFile(tmp, []byte("BEE\n"), 0o644))
	f, err := os.Open(tmp)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	require.NoError(t, os.Rename(tmp, e.bm("src/b.txt")))
	require.NoError(t, os.Remove(swp))
	assert.Equal(t, "BEE\n", read(t, e.bm("src/b.txt")))
	assert.Equal(t, "bee\n", read(t, e.b("src/b.txt")))
	assert.ElementsMatch(t, []string{"a.txt", "b.txt"}, e.bnames("src"))

	e.commit()
	assert.Equal(t, "ONE\ntwo\n", read(t, e.b("src/a.txt")))
	assert.Equal(t, "BEE\n", read(t, e.b("src/b.txt")))
	assert.NoFileExists(t, e.b("src/.b.txt.swp"))
}

// git works in a branch: a new repository, and a commit in a repository
// the workspace holds (its index, refs and logs are copied up); the
// workspace's repository is untouched until the branch is committed.
func TestBranchMount_Git(t *testing.T) { eachBranchMode(t, envOptions{}, gitInBranch) }

func gitInBranch(t *testing.T, e *branchEnv) {
	// a fresh repository made in the branch
	require.NoError(t, os.MkdirAll(e.bm("fresh/pkg"), 0o755))
	require.NoError(t, os.WriteFile(e.bm("fresh/pkg/main.go"), []byte("package main\n"), 0o644))
	run(t, e.bm("fresh"), "git", "init", "-q")
	run(t, e.bm("fresh"), "git", "add", ".")
	run(t, e.bm("fresh"), "git", "commit", "-qm", "first")
	assert.Empty(t, run(t, e.bm("fresh"), "git", "status", "--porcelain"))
	run(t, e.bm("fresh"), "git", "fsck", "--strict")
	assert.NoDirExists(t, e.b("fresh"))

	// a repository the workspace holds
	e.put("repo/a.txt", "a\n")
	run(t, e.b("repo"), "git", "init", "-q")
	run(t, e.b("repo"), "git", "add", ".")
	run(t, e.b("repo"), "git", "commit", "-qm", "base")
	headBefore := run(t, e.b("repo"), "git", "rev-parse", "HEAD")

	require.NoError(t, os.WriteFile(e.bm("repo/a.txt"), []byte("a2\n"), 0o644))
	require.NoError(t, os.WriteFile(e.bm("repo/b.txt"), []byte("b\n"), 0o644))
	run(t, e.bm("repo"), "git", "add", "-A")
	run(t, e.bm("repo"), "git", "commit", "-qm", "in the branch")
	assert.Empty(t, run(t, e.bm("repo"), "git", "status", "--porcelain"))
	run(t, e.bm("repo"), "git", "fsck", "--strict")
	log := run(t, e.bm("repo"), "git", "log", "--format=%s")
	assert.Equal(t, "in the branch\nbase\n", log)
	assert.Equal(t, headBefore, run(t, e.b("repo"), "git", "rev-parse", "HEAD"), "the workspace's repository is untouched")
	assert.Empty(t, run(t, e.b("repo"), "git", "status", "--porcelain"))

	e.commit()
	assert.Equal(t, "in the branch\nbase\n", run(t, e.b("repo"), "git", "log", "--format=%s"))
	assert.Empty(t, run(t, e.b("repo"), "git", "status", "--porcelain"))
	run(t, e.b("repo"), "git", "fsck", "--strict")
	run(t, e.b("fresh"), "git", "fsck", "--strict")
}

// A make-style build (outputs written to temporaries renamed into place,
// a compiler's executable, a rebuild after a source changes) completes in
// a branch, and its outputs stay there.
func TestBranchMount_Build(t *testing.T) { eachBranchMode(t, envOptions{}, buildInBranch) }

func buildInBranch(t *testing.T, e *branchEnv) {
	e.put("proj/src/a.part", "alpha\n")
	e.put("proj/src/b.part", "bravo\n")
	e.put("proj/src/hello.c", "#include <stdio.h>\nint main(void){puts(\"hello\");return 0;}\n")
	e.put("proj/Makefile", strings.Join([]string{
		"all: out/joined.txt out/count.txt out/hello",
		"out:",
		"\tmkdir -p out",
		"out/joined.txt: src/a.part src/b.part | out",
		"\tcat src/a.part src/b.part > $@.tmp && mv $@.tmp $@",
		"out/count.txt: out/joined.txt",
		"\twc -l < out/joined.txt > $@.tmp && mv -f $@.tmp $@",
		"out/hello: src/hello.c | out",
		"\tcc -o $@ src/hello.c",
		"",
	}, "\n"))
	dir := e.bm("proj")
	run(t, dir, "make")
	assert.Equal(t, "alpha\nbravo\n", read(t, filepath.Join(dir, "out/joined.txt")))
	assert.Equal(t, "2\n", read(t, filepath.Join(dir, "out/count.txt")))
	assert.Equal(t, "hello\n", run(t, dir, "./out/hello"))
	run(t, dir, "make", "-q") // up to date
	assert.NoDirExists(t, e.b("proj/out"))

	require.NoError(t, os.WriteFile(filepath.Join(dir, "src/b.part"), []byte("bravo\ncharlie\n"), 0o644))
	run(t, dir, "make")
	assert.Equal(t, "3\n", read(t, filepath.Join(dir, "out/count.txt")))
	run(t, dir, "make", "-q")
	run(t, dir, "touch", "src/a.part") // times of a workspace file: copied up
	out := run(t, dir, "make")
	assert.Contains(t, out, "cat src/a.part")
	assert.ElementsMatch(t, []string{"count.txt", "hello", "joined.txt"}, e.bnames("proj/out"))
	assert.Equal(t, "bravo\n", read(t, e.b("proj/src/b.part")))

	e.commit()
	assert.Equal(t, "3\n", read(t, e.b("proj/out/count.txt")))
	assert.Equal(t, "hello\n", run(t, e.b("proj"), "./out/hello"))
}
