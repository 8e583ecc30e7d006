package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
)

// git's core.fsmonitor hook served by the daemon (dshmount fsmonitor):
// after every kind of change — through the socket, the mount, or directly
// in the workspace directory — `git status` with the hook and the
// untracked cache must say exactly what a full scan says ("Matrix" of
// git's t7527). The full scan runs on a copy of the index, so it never
// drops the hook's token from the real one.

// gitRepo is a git worktree on a daemon's mount or workspace directory whose
// core.fsmonitor is dshmount fsmonitor.
type gitRepo struct {
	t       *testing.T
	dir     string // the worktree, where git runs
	env     []string
	answers string // the log of the hook's answers
}

// gitIn runs git in dir with env and returns its stdout, failing the test
// on a non-zero exit.
func gitIn(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "LC_ALL=C", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t"), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "git %v in %s:\n%s%s", args, dir, stdout.String(), stderr.String())
	return stdout.String()
}

// newGitRepo makes a repository in dir with a few commits and two branches,
// and sets core.fsmonitor to the dshmount binary through a wrapper that
// logs every answer.
func newGitRepo(t *testing.T, dir string, files map[string]string) *gitRepo {
	t.Helper()
	home := t.TempDir()
	r := &gitRepo{t: t, dir: dir, env: []string{"HOME=" + home}, answers: filepath.Join(home, "answers")}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	gitIn(t, dir, r.env, "init", "-q", "-b", "main")
	for rel, content := range files {
		p := filepath.Join(dir, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	gitIn(t, dir, r.env, "add", ".")
	gitIn(t, dir, r.env, "commit", "-qm", "initial")
	gitIn(t, dir, r.env, "branch", "other")
	hook := filepath.Join(home, "fsmonitor-hook")
	script := fmt.Sprintf("#!/bin/sh\n%q fsmonitor \"$@\" >%q.out || exit $?\n{ printf '%%s ' \"$2\"; tr '\\0' ' ' <%q.out; echo; } >>%q\ncat %q.out\n",
		dshBinary, r.answers, r.answers, r.answers, r.answers)
	require.NoError(t, os.WriteFile(hook, []byte(script), 0o755))
	gitIn(t, dir, r.env, "config", "core.fsmonitor", hook)
	gitIn(t, dir, r.env, "config", "core.untrackedCache", "true")
	return r
}

// git runs git in the worktree.
func (r *gitRepo) git(args ...string) string {
	r.t.Helper()
	return gitIn(r.t, r.dir, r.env, args...)
}

// fullScan is `git status --porcelain` without the hook, on a copy of the
// index (a status without the hook would drop the hook's token).
func (r *gitRepo) fullScan() string {
	r.t.Helper()
	gitDir := strings.TrimSpace(r.git("rev-parse", "--absolute-git-dir"))
	b, err := os.ReadFile(filepath.Join(gitDir, "index"))
	require.NoError(r.t, err)
	idx := filepath.Join(r.t.TempDir(), "index")
	require.NoError(r.t, os.WriteFile(idx, b, 0o644))
	env := append(append([]string{}, r.env...), "GIT_INDEX_FILE="+idx)
	return gitIn(r.t, r.dir, env, "-c", "core.fsmonitor=", "status", "--porcelain")
}

// status is `git status --porcelain` with the hook.
func (r *gitRepo) status() string {
	r.t.Helper()
	return r.git("status", "--porcelain")
}

// lastAnswer is the hook's last answer: "TOKEN-IN TOKEN-OUT PATH...".
func (r *gitRepo) lastAnswer() string {
	b, err := os.ReadFile(r.answers)
	require.NoError(r.t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// prime runs status until the index holds a token of the daemon and the
// hook answered with a list (not "/").
func (r *gitRepo) prime() {
	r.t.Helper()
	for range 3 {
		r.status()
	}
	require.NotContains(r.t, r.lastAnswer(), " /", "the hook answers a list once git has its token")
}

// check compares status with the hook to a full scan and requires want
// (porcelain lines) to be in it; the hook must have answered with a list,
// else the comparison proves nothing.
func (r *gitRepo) check(step string, want ...string) {
	r.t.Helper()
	got := r.status()
	answer := r.lastAnswer()
	assert.Equal(r.t, r.fullScan(), got, "%s: status with the hook differs from a full scan; the hook answered %q", step, answer)
	for _, w := range want {
		assert.Contains(r.t, got, w+"\n", "%s", step)
	}
	fields := strings.Fields(answer)
	assert.False(r.t, len(fields) > 2 && fields[2] == "/", "%s: the hook answered everything (%q), so the list was not tested", step, answer)
	r.t.Logf("%s: hook answered %q", step, answer)
}

// fsmonitorDaemon starts a watching daemon registered in a private run
// directory (the hook finds it there).
func fsmonitorDaemon(t *testing.T, dirs *daemonDirs) *daemon {
	t.Helper()
	return startDaemon(t, daemonOptions{Args: []string{"--watch"}, Dirs: dirs})
}

func TestFsmonitor_StatusWithTheHookMatchesAFullScan(t *testing.T) {
	t.Setenv("DSH_RUN_DIR", t.TempDir())
	d := fsmonitorDaemon(t, nil)
	files := map[string]string{
		"socket.txt": "s\n", "mount.txt": "m\n", "held.txt": "h\n", "external.txt": "e\n", "renamed.txt": "r\n", "deleted.txt": "d\n",
		"script.sh": "echo\n", "file-then-dir": "f\n", "dir/kept.txt": "k\n", "dir/sub/deep.txt": "deep\n",
	}
	r := newGitRepo(t, d.m("repo"), files)
	require.NoError(t, os.Symlink("socket.txt", d.m("repo/link")))
	r.git("add", "link")
	r.git("commit", "-qm", "link")
	r.git("checkout", "-q", "other")
	require.NoError(t, os.WriteFile(d.m("repo/branch-only.txt"), []byte("b\n"), 0o644))
	require.NoError(t, os.WriteFile(d.m("repo/dir/kept.txt"), []byte("changed on other\n"), 0o644))
	r.git("add", ".")
	r.git("commit", "-qm", "other")
	r.git("checkout", "-q", "main")
	r.prime()
	src := func(rel string) string { return filepath.Join(d.Src, "repo", rel) }
	ctx := testCtx(t)

	_, err := d.Client.Write(ctx, control.WriteParams{Path: "repo/socket.txt", Content: "through the socket\n", Unconditional: true})
	require.NoError(t, err)
	r.check("socket edit", " M socket.txt")

	require.NoError(t, os.WriteFile(d.m("repo/mount.txt"), []byte("through the mount\n"), 0o644))
	r.check("mount write", " M mount.txt")

	// Written through the mount and still open (whether the mount has
	// recorded the write yet or fs.changes lists it as in progress).
	held, err := os.OpenFile(d.m("repo/held.txt"), os.O_WRONLY|os.O_TRUNC, 0)
	require.NoError(t, err)
	_, err = held.WriteString("being written, not closed yet\n")
	require.NoError(t, err)
	r.check("a file held open for writing through the mount", " M held.txt")
	require.NoError(t, held.Close())
	r.check("the held file closed", " M held.txt")

	require.NoError(t, os.WriteFile(src("external.txt"), []byte("in the workspace directory\n"), 0o644))
	r.check("external write", " M external.txt")

	require.NoError(t, os.MkdirAll(src("new/deeper"), 0o755))
	require.NoError(t, os.WriteFile(src("new/deeper/n.txt"), []byte("n\n"), 0o644))
	r.check("external create in a new directory", "?? new/")

	require.NoError(t, os.MkdirAll(d.m("repo/mnew"), 0o755))
	require.NoError(t, os.WriteFile(d.m("repo/mnew/m.txt"), []byte("m\n"), 0o644))
	r.check("mount create in a new directory", "?? mnew/")

	// Renames into another directory: only the destination's name tells
	// git which directory's untracked entries changed.
	require.NoError(t, os.Rename(d.m("repo/renamed.txt"), d.m("repo/dir/sub/renamed-to.txt")))
	r.check("mount rename", " D renamed.txt", "?? dir/sub/renamed-to.txt")

	require.NoError(t, os.Rename(src("dir/sub/renamed-to.txt"), src("dir/renamed-again.txt")))
	r.check("external rename", "?? dir/renamed-again.txt")

	require.NoError(t, os.Remove(src("deleted.txt")))
	r.check("external delete", " D deleted.txt")

	require.NoError(t, os.Chmod(src("script.sh"), 0o755))
	r.check("external chmod +x", " M script.sh")

	require.NoError(t, os.Remove(src("link")))
	require.NoError(t, os.Symlink("mount.txt", src("link")))
	r.check("external symlink retargeted", " M link")

	require.NoError(t, os.Remove(src("file-then-dir")))
	require.NoError(t, os.Mkdir(src("file-then-dir"), 0o755))
	require.NoError(t, os.WriteFile(src("file-then-dir/inside.txt"), []byte("i\n"), 0o644))
	r.check("external file replaced by a directory", " D file-then-dir")

	// git checkout of the other branch in the workspace directory (its
	// own hook runs there too): tracked files change under the mount.
	ws := &gitRepo{t: t, dir: src(""), env: r.env, answers: r.answers}
	ws.git("add", "-A")
	ws.git("commit", "-qm", "work in progress")
	r.check("git commit in the workspace directory")
	ws.git("checkout", "-q", "other")
	r.check("git checkout in the workspace directory")
	assert.FileExists(t, d.m("repo/branch-only.txt"))
	ws.git("checkout", "-q", "main")
	r.check("git checkout back in the workspace directory")
	assert.NoFileExists(t, d.m("repo/branch-only.txt"))
	assert.FileExists(t, d.m("repo/file-then-dir/inside.txt"))
	assertNoDataRace(t, d)
}

func TestFsmonitor_ServesAWorktreeOnTheWorkspaceDirectory(t *testing.T) {
	t.Setenv("DSH_RUN_DIR", t.TempDir())
	d := fsmonitorDaemon(t, nil)
	r := newGitRepo(t, d.Src, map[string]string{"a.txt": "a\n", "dir/b.txt": "b\n"})
	r.prime()
	require.NoError(t, os.WriteFile(d.m("a.txt"), []byte("through the mount\n"), 0o644))
	r.check("mount write, status in the workspace directory", " M a.txt")
	require.NoError(t, os.WriteFile(filepath.Join(d.Src, "dir", "c.txt"), []byte("c\n"), 0o644))
	r.check("external create", "?? dir/c.txt")
	_, err := d.Client.Delete(testCtx(t), control.DeleteParams{Path: "dir/b.txt", Unconditional: true})
	require.NoError(t, err)
	r.check("socket delete", " D dir/b.txt")
}

func TestFsmonitor_ADaemonRestartMeansEverything(t *testing.T) {
	t.Setenv("DSH_RUN_DIR", t.TempDir())
	d := fsmonitorDaemon(t, nil)
	r := newGitRepo(t, d.m("repo"), map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	r.prime()
	dirs := d.dirs()
	d.stop()
	// Changed while no daemon watched: no daemon can vouch for it.
	require.NoError(t, os.WriteFile(filepath.Join(dirs.Src, "repo", "a.txt"), []byte("while down\n"), 0o644))
	fsmonitorDaemon(t, dirs) // a new run: stopped at cleanup
	got := r.status()
	assert.Contains(t, got, " M a.txt\n")
	assert.Equal(t, r.fullScan(), got)
	assert.Contains(t, r.lastAnswer(), " /", "a token of the earlier run is answered with everything")
	require.NoError(t, os.WriteFile(filepath.Join(dirs.Src, "repo", "b.txt"), []byte("after\n"), 0o644))
	r.check("external write after the restart", " M a.txt", " M b.txt")
}

// hook runs `dshmount fsmonitor ARGS` in dir and returns stdout, stderr
// and the exit code.
func hook(t *testing.T, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(dshBinary, append([]string{"fsmonitor"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	return runCaptured(t, cmd)
}

func TestFsmonitor_HookAnswersEverythingForTokensItCannotVouchFor(t *testing.T) {
	t.Setenv("DSH_RUN_DIR", t.TempDir())
	d := fsmonitorDaemon(t, nil)
	require.NoError(t, os.MkdirAll(d.m("repo/.git"), 0o755))
	out, stderr, code := hook(t, d.m("repo"), nil, "2", "")
	require.Equal(t, 0, code, stderr)
	tok, rest, ok := strings.Cut(out, "\x00")
	require.True(t, ok, "%q", out)
	assert.Equal(t, "/\x00", rest, "an empty token")
	_, _, ok = control.ParseChangesToken(tok)
	assert.True(t, ok, "%q", tok)

	run := strings.Split(tok, ":")[1]
	for name, old := range map[string]string{
		"foreign":            "builtin:abc:12",
		"another run":        "dsh:0123456789abcdef:" + strings.Split(tok, ":")[2],
		"from the future":    "dsh:" + run + ":999999999",
		"a watchman clock":   "c:1700000000:1:2:3",
		"a v1 timestamp":     "1700000000000000000",
		"older than the run": "dsh:" + run + ":0",
	} {
		out, stderr, code := hook(t, d.m("repo"), nil, "2", old)
		require.Equal(t, 0, code, "%s: %s", name, stderr)
		_, rest, _ := strings.Cut(out, "\x00")
		assert.Equal(t, "/\x00", rest, name)
	}

	out, _, code = hook(t, d.m("repo"), nil, "2", tok)
	require.Equal(t, 0, code)
	_, rest, _ = strings.Cut(out, "\x00")
	assert.Equal(t, "", rest, "nothing changed since a fresh token")

	// DSH_SOCKET finds the daemon without the registry.
	out, stderr, code = hook(t, d.m("repo"), []string{"DSH_SOCKET=" + d.Socket, "DSH_RUN_DIR=" + t.TempDir()}, "2", tok)
	require.Equal(t, 0, code, stderr)
	assert.True(t, strings.HasPrefix(out, "dsh:"), "%q", out)
}

// Outside every daemon's mount the hook answers "everything changed"
// quietly (git then scans, and prints no hook error on every command); an
// unknown hook version or a missing token is still an error.
func TestFsmonitor_HookOutsideAMountAnswersEverythingQuietlyAndFailsForOtherVersions(t *testing.T) {
	t.Setenv("DSH_RUN_DIR", t.TempDir())
	d := fsmonitorDaemon(t, nil)
	out, stderr, code := hook(t, t.TempDir(), nil, "2", "")
	assert.Equal(t, 0, code, stderr)
	_, rest, _ := strings.Cut(out, "\x00")
	assert.Equal(t, "/\x00", rest, "everything changed")
	assert.Empty(t, stderr, "quiet")

	out, stderr, code = hook(t, d.Mnt, nil, "1", "1700000000000000000")
	assert.NotEqual(t, 0, code)
	assert.Empty(t, out)
	assert.Contains(t, stderr, "version")

	_, _, code = hook(t, d.Mnt, nil, "2")
	assert.NotEqual(t, 0, code, "a missing token is a usage error")
}

func TestFsmonitor_TheHookWorksForAnotherUIDTheSocketAdmits(t *testing.T) {
	runDir := publicRunDir(t) // the daemon registers there
	d := ownerDaemon(t, "--watch")
	for _, dir := range []string{"repo", "repo/.git"} { // through the mount: no out-of-band change to wait for
		require.NoError(t, os.Mkdir(d.m(dir), 0o755))
		require.NoError(t, os.Chown(d.m(dir), 65534, 65534))
	}
	asNobody := func(token string) (string, string, int) {
		return nobodyDshmount(t, d.m("repo"), []string{"DSH_RUN_DIR=" + runDir}, "fsmonitor", "2", token)
	}
	out, stderr, code := asNobody("")
	require.Equal(t, 0, code, "uid 65534 finds root's daemon and is served: %s", stderr)
	tok, rest, _ := strings.Cut(out, "\x00")
	assert.Equal(t, "/\x00", rest)
	require.NoError(t, os.WriteFile(filepath.Join(d.Src, "repo", "changed.txt"), []byte("x\n"), 0o644))
	out, stderr, code = asNobody(tok)
	require.Equal(t, 0, code, stderr)
	_, rest, _ = strings.Cut(out, "\x00")
	assert.Equal(t, "changed.txt\x00", rest, "the cookie the daemon made as uid 65534 in its .git is not listed")
}

func TestFsmonitor_HiddenPathsMeanEverythingOnTheWorkspaceDirectoryOnly(t *testing.T) {
	t.Setenv("DSH_RUN_DIR", t.TempDir())
	d := startDaemon(t, daemonOptions{Args: []string{"--watch", "--hide", "secret"}})
	require.NoError(t, os.MkdirAll(d.m("repo/.git"), 0o755))
	out, stderr, code := hook(t, d.m("repo"), nil, "2", "")
	require.Equal(t, 0, code, stderr)
	tok, _, _ := strings.Cut(out, "\x00")

	out, stderr, code = hook(t, d.m("repo"), nil, "2", tok)
	require.Equal(t, 0, code, stderr)
	_, rest, _ := strings.Cut(out, "\x00")
	assert.Equal(t, "", rest, "on the mount hidden paths do not exist: a list (empty)")

	out, stderr, code = hook(t, filepath.Join(d.Src, "repo"), nil, "2", tok)
	require.Equal(t, 0, code, stderr)
	_, rest, _ = strings.Cut(out, "\x00")
	assert.Equal(t, "/\x00", rest, "in the workspace directory a hidden path's changes are not recorded")
}

func TestFsmonitor_ADirectoryRenamedAwayAndBack(t *testing.T) {
	t.Setenv("DSH_RUN_DIR", t.TempDir())
	d := fsmonitorDaemon(t, nil)
	r := newGitRepo(t, d.m("repo"), map[string]string{"t/a.txt": "a\n", "other.txt": "o\n"})
	src := func(rel string) string { return filepath.Join(d.Src, "repo", rel) }
	require.NoError(t, os.WriteFile(src("t/new.txt"), []byte("untracked\n"), 0o644))
	r.prime()
	r.check("untracked file in t", "?? t/new.txt")

	// The moved tree's files are not listed one by one: "t/" and "t2/"
	// make git look again below both names.
	require.NoError(t, os.Rename(src("t"), src("t2")))
	r.check("t renamed to t2", " D t/a.txt", "?? t2/")
	require.NoError(t, os.WriteFile(src("t2/later.txt"), []byte("added while away\n"), 0o644))
	r.check("a file added in t2", "?? t2/")
	require.NoError(t, os.Rename(src("t2"), src("t")))
	r.check("t2 renamed back to t", "?? t/later.txt", "?? t/new.txt")
	require.NoError(t, os.Rename(d.m("repo/t"), d.m("repo/t3")))
	r.check("t renamed to t3 through the mount", " D t/a.txt", "?? t3/")
}
