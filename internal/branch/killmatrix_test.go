package branch

import (
	"github.com/dshmount/dshmount/internal/records"

	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/version"
)

// downChange is what a person does in the workspace directory while the
// killed daemon is down.
type downChange struct {
	name    string
	path    string // the file written ("" for none)
	content string
}

// downChanges are the second dimension of the kill -9 matrix.
var downChanges = []downChange{
	{name: "none"},
	{name: "written", path: "src/f050.txt", content: "edited while down\n"}, // a file the commit writes
	{name: "deleted", path: "src/f160.txt", content: "edited while down\n"}, // a file the commit deletes
	{name: "newindir", path: "gen/extra.txt", content: "new while down\n"},  // in a directory the commit makes
}

// settlesForward reports whether a commit killed at hook step at, with c
// made while the daemon was down, is finished by the next start (else it
// is undone): staging is undone; applied is finished, c on top of it;
// applying is finished unless c changed a path the commit changes.
func settlesForward(at int, c downChange) bool {
	switch {
	case at <= lastStaging:
		return false
	case at >= appliedMarked:
		return true
	}
	return c.name == "none" || c.name == "newindir"
}

// killRun is one killed child: the copy of the template's directories it
// ran on, what it printed and how it ended.
type killRun struct {
	how       string // "commit" or "atomic"
	at        int
	ws, state string
	out       []byte
	err       error
}

// killRunners bounds the children running at once (most of their time is
// spent in fsync).
const killRunners = 8

// TestCommit_KilledByKill9IsAllOrNothing runs bigBranch's 200-file commit,
// and the same changes as one atomic change set (what fs.patch {atomic}
// does), in child processes that kill themselves with SIGKILL at each
// crash point; each killed state is copied once per downChange, made in
// the workspace while the daemon is down; then it is opened again here. Every cell ends either
// with the commit complete (the change on top) or with the workspace as
// before it and the branch byte for byte as before (its upper files,
// records, base copies and mount record); and the commit is recorded
// exactly once, by the run or by the start (Recovered), saying which.
func TestCommit_KilledByKill9IsAllOrNothing(t *testing.T) {
	if os.Getenv("DSH_BRANCH_KILL_AT") != "" {
		t.Skip("helper")
	}
	t0 := time.Now()
	tmpl := openEnv(t, memDir(t), memDir(t))
	before, after := bigBranch(t, tmpl)
	b, err := tmpl.m.Get("big")
	require.NoError(t, err)
	require.NoError(t, b.SetMount("/mnt/big-branch"))
	require.NoError(t, tmpl.m.Close())
	branchBefore := treeBytes(t, filepath.Join(tmpl.state, "branches", "big"))

	var runs []*killRun
	for _, how := range []string{"commit", "atomic"} {
		for _, at := range crashPoints {
			runs = append(runs, &killRun{how: how, at: at, ws: memDir(t), state: memDir(t)})
		}
	}
	cells := map[*killRun]map[string][2]string{}
	for _, r := range runs {
		cells[r] = map[string][2]string{}
		for _, c := range downChanges {
			cells[r][c.name] = [2]string{memDir(t), memDir(t)}
		}
	}
	sem := make(chan struct{}, killRunners)
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if r.err = copyTree(tmpl.ws, r.ws); r.err == nil {
				r.err = copyTree(tmpl.state, r.state)
			}
			if r.err != nil {
				return
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestKillHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), "DSH_BRANCH_KILL_AT="+strconv.Itoa(r.at), "DSH_BRANCH_HOW="+r.how,
				"DSH_BRANCH_WS="+r.ws, "DSH_BRANCH_STATE="+r.state)
			r.out, r.err = cmd.CombinedOutput()
			// The same killed state, once per change made while down.
			for _, dirs := range cells[r] {
				if err := copyTree(r.ws, dirs[0]); err != nil {
					r.out = append(r.out, err.Error()...)
				} else if err := copyTree(r.state, dirs[1]); err != nil {
					r.out = append(r.out, err.Error()...)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d killed children ran in %s", len(runs), time.Since(t0))
	for _, r := range runs {
		for _, c := range downChanges {
			t.Run(fmt.Sprintf("%s/%s/%d", r.how, c.name, r.at), func(t *testing.T) {
				checkKilled(t, r, c, cells[r][c.name][0], cells[r][c.name][1], before, after, branchBefore)
			})
		}
	}
}

// checkKilled checks one cell of the kill -9 matrix: run r's killed state,
// copied to the workspace ws and state directory state, with c made in
// the workspace, opened again.
func checkKilled(t *testing.T, r *killRun, c downChange, ws, state string, before, after, branchBefore map[string]string) {
	branchDir := filepath.Join("branches", "big")
	var ee *exec.ExitError
	require.ErrorAs(t, r.err, &ee, "%s", r.out)
	st, ok := ee.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	require.True(t, st.Signaled(), "%s", r.out)
	require.Equal(t, syscall.SIGKILL, st.Signal())
	if c.path != "" {
		p := filepath.Join(ws, c.path)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(c.content), 0o644))
	}
	e := openEnv(t, ws, state)
	forward := settlesForward(r.at, c)

	want := maps.Clone(before)
	if forward {
		want = maps.Clone(after)
	}
	if c.path != "" {
		want[c.path] = c.content
		want[filepath.Dir(c.path)+"/"] = "<dir>"
	}
	assert.Equal(t, want, e.snapshot(), "the workspace is entirely %s the commit, with the change made while down",
		map[bool]string{true: "after", false: "before"}[forward])

	b, err := e.m.Get("big")
	if r.how == "commit" && forward {
		assert.Equal(t, provider.CodeNotFound, provider.CodeOf(err), "the committed branch is gone")
		assert.NoDirExists(t, filepath.Join(state, branchDir))
	} else {
		require.NoError(t, err, "the branch is kept")
		assert.Equal(t, "/mnt/big-branch", b.Mount(), "the daemon mounts it again")
		assert.Equal(t, branchBefore, treeBytes(t, filepath.Join(state, branchDir)), "the branch is exactly as before")
	}

	_, lerr := os.Stat(filepath.Join(state, "live-audit"))
	live := lerr == nil
	recs := e.m.TakeRecovered()
	if r.at == journalGone {
		assert.Empty(t, recs)
		assert.True(t, live, "the run recorded the commit")
		assertClean(t, e)
		return
	}
	require.Len(t, recs, 1)
	rec := recs[0]
	assert.Equal(t, forward, rec.Forward)
	assert.Equal(t, forward && r.at >= appliedMarked, live, "the run recorded the commit only once it was in place")
	assert.Equal(t, live, rec.Audited, "the commit is recorded once: by the run or by the start")
	if r.how == "commit" {
		assert.Equal(t, "big", rec.Branch)
	} else {
		assert.Empty(t, rec.Branch)
	}
	switch {
	case forward && c.path != "":
		require.Len(t, rec.OutOfBand, 1, "the change made while down is reported")
		assert.Equal(t, c.path, rec.OutOfBand[0].Target.DisplayPath)
		assert.Equal(t, version.OfBytes([]byte(c.content)), rec.OutOfBand[0].After)
	case forward:
		assert.Empty(t, rec.OutOfBand)
	case r.at > lastStaging:
		assert.Contains(t, rec.Reason, c.path, "the undo names the path changed while down")
	default:
		assert.Contains(t, rec.Reason, "staging")
	}
	assertClean(t, e)
}

// TestKillHelper is the child of TestCommit_KilledByKill9IsAllOrNothing:
// it commits (or applies atomically) branch big and kills itself at hook
// step DSH_BRANCH_KILL_AT. Its Applied hook leaves live-audit in the state
// directory, as the daemon's audit entries would be.
func TestKillHelper(t *testing.T) {
	at, err := strconv.Atoi(os.Getenv("DSH_BRANCH_KILL_AT"))
	if err != nil {
		t.Skip("only run as a helper process")
	}
	e := &env{t: t, ws: os.Getenv("DSH_BRANCH_WS"), state: os.Getenv("DSH_BRANCH_STATE"),
		opts: Options{Logger: slog.New(slog.DiscardHandler)}}
	lfs, err := newLower(e.ws)
	require.NoError(t, err)
	e.lower = lfs
	e.opts.hooks.step = func(n int) error {
		if n == at {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		return nil
	}
	e.open()
	hooks := Hooks{Applied: func(context.Context, any, []AppliedFile) {
		require.NoError(t, records.WriteFileAtomic(filepath.Join(e.state, "live-audit"), []byte("recorded\n"), true))
	}}
	if os.Getenv("DSH_BRANCH_HOW") == "atomic" {
		b, err := e.m.Get("big")
		require.NoError(t, err)
		b.mu.RLock()
		cs := b.changeSet()
		b.mu.RUnlock()
		cs.Label = "atomic patch"
		_, err = e.m.Apply(context.Background(), cs, hooks)
		t.Fatalf("atomic apply returned (%v) instead of being killed at %d", err, at)
	}
	_, err = e.m.Commit(context.Background(), "big", false, nil, hooks)
	t.Fatalf("commit returned (%v) instead of being killed at %d", err, at)
}

// openEnv opens the branches of the workspace ws and state directory
// state, as a daemon start does.
func openEnv(t *testing.T, ws, state string) *env {
	t.Helper()
	e := &env{t: t, ws: ws, state: state, opts: Options{Logger: slog.New(slog.DiscardHandler)}}
	lfs, err := newLower(ws)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lfs.Close() })
	e.lower = lfs
	e.open()
	t.Cleanup(func() { _ = e.m.Close() })
	return e
}

// memDir returns a new directory on /dev/shm when there is one (else in
// t.TempDir). A kill -9 loses nothing the page cache holds, so a memory
// filesystem checks the same states as a disk, without the flushes the
// commits make going to a disk other programs share.
func memDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("/dev/shm", "dsh-kill-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

// copyTree copies the files, links and directories below src to dst
// (which exists), with their permission bits.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil || rel == "." {
			return err
		}
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.Mkdir(to, info.Mode().Perm())
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, data, info.Mode().Perm())
	})
}

// treeBytes maps every file and directory below dir to its content
// ("<dir>" for a directory); nil when dir does not exist.
func treeBytes(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			out[rel+"/"] = "<dir>"
			return nil
		}
		data, err := os.ReadFile(p)
		out[rel] = string(data)
		return err
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	return out
}
