package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/policy"
)

// toolsEnv is the environment of the tools the test runs: git without the
// user's or the system's configuration, go without the network.
func toolsEnv(t *testing.T) []string {
	home := t.TempDir()
	return append(os.Environ(), "HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "LC_ALL=C",
		"GIT_AUTHOR_NAME=agent", "GIT_AUTHOR_EMAIL=agent@example.com",
		"GIT_COMMITTER_NAME=agent", "GIT_COMMITTER_EMAIL=agent@example.com",
		"GOTOOLCHAIN=local", "GOPROXY=off", "GOFLAGS=-mod=mod", "GOCACHE="+filepath.Join(home, "gocache"),
		"PYTHONDONTWRITEBYTECODE=", "EDITOR=true", "GIT_EDITOR=true")
}

// execIn runs script with sh in the mount under 'dshmount exec' with
// extra exec flags; it returns the combined output and the exit code.
func execIn(t *testing.T, d *daemon, env []string, flags []string, script string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := append(append([]string{"exec", "--socket", d.Socket}, flags...), "--", "sh", "-c", script)
	cmd := exec.CommandContext(ctx, dshBinary, args...)
	cmd.Env, cmd.Dir = env, d.Mnt
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	}
	require.NoError(t, err, "run %q", script)
	return string(out), 0
}

// refusalsOf returns the refusals the daemon logged for session since seq.
func refusalsOf(t *testing.T, d *daemon, session policy.SessionID, since uint64) []control.LogEntry {
	t.Helper()
	yes := true
	res, err := d.Client.Log(testCtx(t), control.LogParams{Session: session, Refused: &yes, Since: since, Limit: 1000})
	require.NoError(t, err)
	return res.Entries
}

// TestTools_RealToolsBoundToOneSession runs real tools on the mount, in a
// person's repository, bound to one session opened before they run (the
// README's agent flow), with no refusal at any step (before the rule, git
// commit failed on .git/COMMIT_EDITMSG, a redirect into an existing file
// with EACCES); then the negatives: a person's change after the
// session opened is never overwritten blindly, on the mount or in the
// workspace directory while the daemon was down; a one-off exec still
// reads before it writes; a hard link does not take a file out of the
// guard; a person's edit of a git hook is kept.
func TestTools_RealToolsBoundToOneSession(t *testing.T) {
	for _, tool := range []string{"git", "make", "go", "gofmt", "/usr/bin/python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	d := startDaemon(t, daemonOptions{Files: map[string]string{
		"a.txt": "alpha\n", "F": "f before\n", "G": "g before\n",
		"existing.txt": "old\n", "build.log": "line 1\n",
		"go.mod":   "module example.com/x\n\ngo 1.21\n",
		"main.go":  "package main\n\nfunc main() {  println(\"hi\") }\n",
		"Makefile": "out.txt: in.txt\n\tcat in.txt > out.txt\n\techo built >> out.txt\n",
		"in.txt":   "input\n", "out.txt": "stale output\n",
		"mod.py":     "X = 1\n",
		".gitignore": "ignored/\n", "ignored/P": "p before\n", "ignored/Q": "q before\n",
	}})
	ctx := testCtx(t)
	// A person's repository, committed before the agent's session opens
	// (files an hour old: git's index then vouches for them without
	// reading them again); out.txt older than in.txt for make.
	old := time.Now().Add(-time.Hour)
	require.NoError(t, filepath.WalkDir(d.Src, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, old, old)
	}))
	require.NoError(t, os.Chtimes(filepath.Join(d.Src, "out.txt"), old.Add(-time.Minute), old.Add(-time.Minute)))
	d.sh(`git init -q -b main . && git add -A && git -c user.name=p -c user.email=p@example.com commit -q -m person`)
	sess, err := d.Client.OpenSession(ctx, "agent")
	require.NoError(t, err)
	env := toolsEnv(t)
	as := []string{"--session", string(sess)}
	start := d.lastSeq(t)

	steps := []struct{ name, script string }{
		{"git init, add, commit twice", `git init -q . && echo new > new.txt && git add -A && git commit -q -m first &&
			echo more >> a.txt && git add a.txt && git commit -q -m second && test "$(git rev-list --count HEAD)" = 3`},
		{"commit --amend", `git commit -q --amend -m "second, amended"`},
		{"checkout -b, switch", `git checkout -q -b feature && echo feat > feat.txt && git add feat.txt && git commit -q -m feat &&
			git switch -q main`},
		{"fast-forward merge", `git checkout -q -b ff && echo ff > ff.txt && git add ff.txt && git commit -q -m ff &&
			git switch -q main && git merge -q --ff-only ff`},
		{"real merge", `echo m > m.txt && git add m.txt && git commit -q -m m && git merge -q --no-edit feature && test -f feat.txt`},
		{"rebase", `git checkout -q -b topic HEAD~1 && echo t > t.txt && git add t.txt && git commit -q -m t &&
			git rebase -q main && git switch -q main && git merge -q --ff-only topic`},
		{"stash and pop", `echo dirty >> a.txt && git stash -q && test "$(cat a.txt)" = "$(git show HEAD:a.txt)" && git stash pop -q &&
			grep -q dirty a.txt`},
		{"checkout -- file", `git checkout -- a.txt && ! grep -q dirty a.txt`},
		{"cherry-pick", `git checkout -q -b pick HEAD~1 && echo p > p.txt && git add p.txt && git commit -q -m p &&
			git switch -q main && git cherry-pick pick >/dev/null && test -f p.txt`},
		{"gc", `git gc -q`},
		{"make rewrites an existing output", `make -s && grep -q built out.txt`},
		{"go build -o twice", `go build -o bin/x . && go build -o bin/x . && ./bin/x`},
		{"redirects into files nobody changed", `echo new > existing.txt && echo "line 2" >> build.log &&
			test "$(cat existing.txt)" = new && test "$(wc -l < build.log)" = 2`},
		{"python writes __pycache__", `/usr/bin/python3 -c 'import sys; sys.dont_write_bytecode = False; import mod' && ls __pycache__ | grep -q mod`},
		{"gofmt -w", `gofmt -w main.go && grep -q '^func main() { println' main.go`},
		{"2,000 files written, rewritten, removed", `mkdir -p many && cd many &&
			i=0; while [ $i -lt 2000 ]; do echo $i > f$i; i=$((i+1)); done &&
			i=0; while [ $i -lt 2000 ]; do echo again > f$i; i=$((i+1)); done && cd .. && rm -rf many`},
		{"a watch-mode loop beside a build writing the same tree", `mkdir -p dist
			( i=0; while [ $i -lt 30 ]; do echo "watch $i" > dist/app.js; cp main.go dist/main.go.txt; i=$((i+1)); sleep 0.1; done ) &
			i=0; while [ $i -lt 30 ]; do echo "build $i" > dist/app.js; echo $i > dist/build.txt; i=$((i+1)); done; wait`},
	}
	if _, err := exec.LookPath("vim"); err == nil {
		steps = append(steps, struct{ name, script string }{"a vim save",
			`vim -Es -u NONE -i NONE -c 's/f before/f by vim/' -c wq F2 </dev/null; test "$(cat F2)" = "f by vim"`})
		require.NoError(t, os.WriteFile(filepath.Join(d.Src, "F2"), []byte("f before\n"), 0o644))
	} else {
		t.Log("vim is not installed: no vim save")
	}
	for _, s := range steps {
		out, code := execIn(t, d, env, as, "set -e; "+s.script)
		require.Equal(t, 0, code, "%s:\n%s", s.name, out)
	}
	require.Empty(t, refusalsOf(t, d, sess, start), "the tools were refused")

	// A person changes F on the mount after the session opened: the bound
	// blind write is refused, F keeps the person's bytes, and git, which
	// reads F, still commits it.
	d.sh(`echo "person's F" > F; echo "person's P" > ignored/P`)
	out, code := execIn(t, d, env, as, `echo x > F`)
	assert.NotEqual(t, 0, code, "the bound write over a person's change: %s", out)
	assertBacking(t, d, "F", "person's F\n")
	// ignored/P was never read by the session (git ignores it): the
	// baseline rule refuses, naming the change.
	out, code = execIn(t, d, env, as, `echo x > ignored/P`)
	assert.NotEqual(t, 0, code, "the bound write over a person's change: %s", out)
	assertBacking(t, d, "ignored/P", "person's P\n")
	assert.Contains(t, out, "FS_NOT_OBSERVED, changed after this session opened (write through the mount by an unbound process")
	out, code = execIn(t, d, env, as, `set -e; git commit -q -a -m "person's F" && git show HEAD:F | grep -q person`)
	require.Equal(t, 0, code, "git commit -a after a person's change: %s", out)

	// A one-off exec opens a session of its own: it still reads first.
	out, code = execIn(t, d, env, nil, `echo x > a.txt`)
	assert.NotEqual(t, 0, code, "a one-off exec's blind write: %s", out)
	assert.Contains(t, out, "FS_NOT_OBSERVED")

	// Another session's commit in the same repository meanwhile does not
	// break the agent's next commit.
	other, err := d.Client.OpenSession(testCtx(t), "other agent")
	require.NoError(t, err)
	out, code = execIn(t, d, env, []string{"--session", string(other)}, `set -e; echo o > other.txt; git add other.txt; git commit -q -m other`)
	require.Equal(t, 0, code, "the other session's commit: %s", out)
	out, code = execIn(t, d, env, as, `set -e; echo z > z.txt; git add z.txt; git commit -q -m agent; test "$(git log -1 --format=%s)" = agent`)
	require.Equal(t, 0, code, "the agent's commit after another's: %s", out)

	// A hard link into the git directory stays guarded.
	d.sh(`echo "person's G" > G`)
	out, code = execIn(t, d, env, as, `ln G .git/x && echo X > .git/x`)
	assert.NotEqual(t, 0, code, "a write through a hard link in .git: %s", out)
	assertBacking(t, d, "G", "person's G\n")

	// A person's edit of a hook is not overwritten blindly.
	d.sh(`printf '#!/bin/sh\necho person hook\n' > .git/hooks/pre-commit`)
	out, code = execIn(t, d, env, as, `echo 'echo agent hook' > .git/hooks/pre-commit`)
	assert.NotEqual(t, 0, code, "the bound write over a person's hook: %s", out)
	assertBacking(t, d, ".git/hooks/pre-commit", "#!/bin/sh\necho person hook\n")

	// F changed in the workspace directory while the daemon was stopped:
	// no record, its ctime says it changed after the session opened.
	dirs := d.dirs()
	d.stop()
	require.NoError(t, os.WriteFile(filepath.Join(dirs.Src, "existing.txt"), []byte("offline edit\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dirs.Src, "ignored/Q"), []byte("offline Q\n"), 0o644))
	d = startDaemon(t, daemonOptions{Dirs: dirs})
	out, code = execIn(t, d, env, as, `echo x > existing.txt`)
	assert.NotEqual(t, 0, code, "the bound write over an offline change: %s", out)
	assertBacking(t, d, "existing.txt", "offline edit\n")
	out, code = execIn(t, d, env, as, `echo x > ignored/Q`)
	assert.NotEqual(t, 0, code, "the bound write over an offline change: %s", out)
	assertBacking(t, d, "ignored/Q", "offline Q\n")
	assert.Contains(t, out, "not through the daemon")
	out, code = execIn(t, d, env, as, `set -e; git commit -q -a -m offline; git show HEAD:existing.txt | grep -q offline`)
	require.Equal(t, 0, code, "git commit -a after an offline change: %s", out)
	require.True(t, strings.Contains(d.sh(`git log --format=%s`), "offline"))
}

// TestTools_StrictSessionReadsFirst: a session opened with strict keeps
// read-before-write for its bound processes (EACCES on a file it never
// read), while git's own directory stays outside the guard.
func TestTools_StrictSessionReadsFirst(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"a.txt": "alpha\n"}})
	sess, err := d.Client.OpenSessionWith(testCtx(t), control.SessionOpenParams{Name: "strict", Strict: true})
	require.NoError(t, err)
	env := toolsEnv(t)
	as := []string{"--session", string(sess)}
	out, code := execIn(t, d, env, as, `echo x > a.txt`)
	assert.NotEqual(t, 0, code, "a strict session's blind write: %s", out)
	assertBacking(t, d, "a.txt", "alpha\n")
	out, code = execIn(t, d, env, as, `set -e; cat a.txt >/dev/null; echo x > a.txt`)
	require.Equal(t, 0, code, "after a read: %s", out)
	out, code = execIn(t, d, env, as, `set -e; git init -q .; git add -A; git commit -q -m one; git commit -q --amend -m two`)
	require.Equal(t, 0, code, "git under a strict session: %s", out)
}

// TestTools_ExecStrictBindsStrictly: 'exec --strict --session S' binds its
// command strictly in a session S that is not strict (and under
// $DSH_SESSION): its blind write of a file nobody changed is refused
// (EACCES) and the file keeps its bytes, while the same write bound
// without --strict passes (S's baseline); after a read it may write, and
// git's directory stays outside the guard.
func TestTools_ExecStrictBindsStrictly(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	// Written through the mount (recorded at once) before the session opens.
	d.sh(`echo "f before" > F; echo "g before" > G; echo "h before" > H`)
	sess, err := d.Client.OpenSession(testCtx(t), "agent")
	require.NoError(t, err)
	env := toolsEnv(t)
	start := d.lastSeq(t)

	out, code := execIn(t, d, env, []string{"--strict", "--session", string(sess)}, `echo x > F`)
	assert.NotEqual(t, 0, code, "a strict binding's blind write: %s", out)
	assert.Contains(t, out, "Permission denied", "EACCES on the mount")
	assert.Contains(t, out, "FS_NOT_OBSERVED")
	assertBacking(t, d, "F", "f before\n")
	out, code = execIn(t, d, append(env, "DSH_SESSION="+string(sess)), []string{"--strict"}, `echo x > G`)
	assert.NotEqual(t, 0, code, "a strict binding under $DSH_SESSION: %s", out)
	assertBacking(t, d, "G", "g before\n")
	require.Len(t, refusalsOf(t, d, sess, start), 2, "both refusals are the session's")

	out, code = execIn(t, d, env, []string{"--session", string(sess)}, `echo x > F`)
	require.Equal(t, 0, code, "the same write bound without --strict: %s", out)
	assertBacking(t, d, "F", "x\n")
	out, code = execIn(t, d, env, []string{"--strict", "--session", string(sess)},
		`set -e; cat H >/dev/null; echo y > H; git init -q .; git add -A; git commit -q -m one; git commit -q --amend -m two`)
	require.Equal(t, 0, code, "a strict binding after a read, and git: %s", out)
	assertBacking(t, d, "H", "y\n")
}

// TestTools_UnguardedGlob: serve --unguarded takes a tree out of the guard
// for bound processes, even a strict session's; the change is recorded.
func TestTools_UnguardedGlob(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"node_modules/x.js": "x\n", "a.txt": "alpha\n"},
		Args: []string{"--unguarded", "node_modules/**"}})
	d.sh(`echo person > node_modules/x.js`)
	out, code := execIn(t, d, toolsEnv(t), nil, `set -e; echo agent > node_modules/x.js; rm node_modules/x.js`)
	require.Equal(t, 0, code, "a one-off exec under --unguarded: %s", out)
	out, code = execIn(t, d, toolsEnv(t), nil, `echo agent > a.txt`)
	assert.NotEqual(t, 0, code, "outside the glob the guard holds: %s", out)
	res, err := d.Client.Log(testCtx(t), control.LogParams{Path: "node_modules/x.js"})
	require.NoError(t, err)
	require.NotEmpty(t, res.Entries)
	assert.Equal(t, policy.OpUnlink, res.Entries[0].Op, "the change is recorded")
}

// openStrict opens a strict session on d: processes bound to it read
// before every write (the tests that pin read-before-write on the mount).
func openStrict(ctx context.Context, d *daemon, name string) (policy.SessionID, error) {
	return d.Client.OpenSessionWith(ctx, control.SessionOpenParams{Name: name, Strict: true})
}

// lastSeq is the seq of the newest audit entry.
func (d *daemon) lastSeq(t *testing.T) uint64 {
	res, err := d.Client.Log(testCtx(t), control.LogParams{Limit: 1})
	require.NoError(t, err)
	if len(res.Entries) == 0 {
		return 0
	}
	return res.Entries[0].Seq
}

// TestTools_SeparateGitDir: the git directory a ".git" file points to
// (git init --separate-git-dir) is git's own like a ".git" directory. A
// person's repository made that way, committed to after the agent's
// session opened, takes the bound agent's commits with no refusal (its
// COMMIT_EDITMSG, which a person wrote after the session opened, is
// rewritten blind), also after a daemon restart (the gitdir is learned
// again when the .git file is looked up); its hooks/ keep the worktree's
// rule: a person's hook is not overwritten blindly.
func TestTools_SeparateGitDir(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	d := startDaemon(t, daemonOptions{})
	person := `git -c user.name=p -c user.email=p@example.com commit -q`
	d.sh(`set -e; git init -q -b main --separate-git-dir=.repo.git work; cd work; echo a > a; git add .; ` + person + ` -m person1`)
	sess, err := d.Client.OpenSession(testCtx(t), "agent")
	require.NoError(t, err)
	env := toolsEnv(t)
	as := []string{"--session", string(sess)}
	start := d.lastSeq(t)
	d.sh(`set -e; cd work; echo p >> a; git add .; ` + person + ` -m person2`)

	commits := `set -e; cd work; echo x > c; git add .; git commit -q -m agent1; echo y > b; git add .; git commit -q -m agent2`
	out, code := execIn(t, d, env, as, commits)
	require.Equal(t, 0, code, "bound commits in a separate git dir: %s", out)
	require.Empty(t, refusalsOf(t, d, sess, start), "the bound commits were refused")

	dirs := d.dirs()
	d.stop()
	d = startDaemon(t, daemonOptions{Dirs: dirs})
	start = d.lastSeq(t)
	d.sh(`set -e; cd work; echo q >> a; git add .; ` + person + ` -m person3`)
	out, code = execIn(t, d, env, as, `set -e; cd work; echo z >> b; git add .; git commit -q -m agent3; test "$(git rev-list --count HEAD)" = 6`)
	require.Equal(t, 0, code, "bound commit after a restart: %s", out)
	require.Empty(t, refusalsOf(t, d, sess, start), "the bound commit after a restart was refused")

	d.sh(`printf '#!/bin/sh\necho person hook\n' > .repo.git/hooks/pre-commit`)
	out, code = execIn(t, d, env, as, `echo 'echo agent hook' > .repo.git/hooks/pre-commit`)
	assert.NotEqual(t, 0, code, "the bound write over a person's hook: %s", out)
	assertBacking(t, d, ".repo.git/hooks/pre-commit", "#!/bin/sh\necho person hook\n")
}
