package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/local"
	"github.com/dshmount/dshmount/internal/registry"
	"github.com/dshmount/dshmount/internal/service"
	"github.com/dshmount/dshmount/internal/viewrules"
)

// dirMounter plays the daemon's branch mounter: it records the
// directories and mounts nothing.
type dirMounter struct {
	mu      sync.Mutex
	mounted map[string]string // branch → dir
}

func (d *dirMounter) Mount(_ context.Context, b *branch.Branch, _ *policy.Engine, _ *viewrules.View, dir string) (func(context.Context) error, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mounted[b.Name()] = dir
	return func(context.Context) error {
		d.mu.Lock()
		defer d.mu.Unlock()
		delete(d.mounted, b.Name())
		return nil
	}, nil
}

func (d *dirMounter) at(name string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mounted[name]
}

// newBranchCLIEnv is a control socket with branches, mounted through a
// dirMounter.
func newBranchCLIEnv(t *testing.T) (*cliEnv, *dirMounter) {
	t.Helper()
	m := &dirMounter{mounted: map[string]string{}}
	env := newCLIEnv(t, func(cfg *service.Config) {
		lfs := cfg.Engine.FS().(*local.FS)
		mgr, err := branch.Open(t.TempDir(), lfs, branch.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Upper: func(dir string) (branch.Upper, error) {
			return local.New(dir, local.Options{Durability: local.DurabilityNone})
		}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = mgr.Close() })
		cfg.Branches, cfg.BranchMounts = mgr, m
	})
	return env, m
}

// realDir is a new empty directory, symlinks resolved.
func realDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return d
}

func TestBranchCLI_MountFlagsAndVerbsThroughTheBinary(t *testing.T) {
	env, m := newBranchCLIEnv(t)
	parent := realDir(t)
	require.NoError(t, os.Mkdir(filepath.Join(parent, "feat"), 0o755))

	// --mount DIR, relative to the command's directory.
	code, out, stderr := runBinary(t, binRun{dir: parent}, "branch", "create", "feat", "--mount", "feat", "--socket", env.sock)
	require.Equal(t, exitOK, code, stderr)
	want := filepath.Join(parent, "feat")
	assert.Equal(t, "created branch feat, mounted at "+want+"\n", out)
	assert.Equal(t, want, m.at("feat"))

	code, out, stderr = runBinary(t, binRun{}, "branch", "list", "--socket", env.sock)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, out, "mounted at "+want)

	code, out, stderr = runBinary(t, binRun{}, "branch", "unmount", "feat", "--socket", env.sock)
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, "unmounted branch feat\n", out)
	assert.Empty(t, m.at("feat"))

	other := realDir(t)
	code, out, stderr = runBinary(t, binRun{}, "branch", "mount", "feat", other, "--socket", env.sock)
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, "mounted branch feat at "+other+"\n", out)
	assert.Equal(t, other, m.at("feat"))

	// A refused directory: the daemon's code, exit 1.
	code, _, stderr = runBinary(t, binRun{}, "branch", "mount", "feat", filepath.Join(other, "missing"), "--socket", env.sock)
	assert.Equal(t, exitFS, code)
	assert.True(t, strings.HasPrefix(stderr, "FS_"), stderr)

	// Usage errors: exit 2.
	for _, args := range [][]string{
		{"branch", "mount", "feat"},
		{"branch", "unmount", "feat", "extra"},
		{"branch", "list", "--mount", other},
		{"branch", "commit", "feat", "--mount", other},
	} {
		code, _, stderr = runBinary(t, binRun{}, append(args, "--socket", env.sock)...)
		assert.Equal(t, exitUsage, code, "%v: %s", args, stderr)
	}
}

func TestBranchCLI_HelpNamesTheMountVerbsAndExecBranch(t *testing.T) {
	code, out, stderr := runBinary(t, binRun{}, "branch", "--help")
	require.Equal(t, exitOK, code, stderr)
	help := out + stderr
	for _, s := range []string{"create NAME [--mount DIR]", "mount NAME DIR", "unmount NAME", "-mount string", "exec\n                  --branch NAME"} {
		assert.Contains(t, help, s)
	}
	code, out, stderr = runBinary(t, binRun{}, "exec", "--help")
	require.Equal(t, exitOK, code, stderr)
	help = out + stderr
	assert.Contains(t, help, "[--branch NAME]")
	assert.Contains(t, help, "'dshmount branch mount NAME DIR'")
	assert.Contains(t, help, "-branch string")
}

// execBranch runs 'dshmount exec --branch' with a supervise that records
// its directory and environment and runs during.
func execBranch(t *testing.T, env *cliEnv, args []string, during func(dir string, envv []string)) (int, string, bool) {
	t.Helper()
	ran := false
	ex := execer{
		lookPath: func(file string) (string, error) { return "/usr/bin/" + file, nil },
		pid:      func() int { return 4242 },
		supervise: func(_, dir string, _ []string, envv []string) (int, error) {
			ran = true
			if during != nil {
				during(dir, envv)
			}
			return 0, nil
		},
	}
	var out, errOut bytes.Buffer
	code := execWith(context.Background(), append([]string{"--socket", env.sock}, args...),
		stdio{in: strings.NewReader(""), out: &out, err: &errOut}, ex)
	return code, errOut.String(), ran
}

func TestExecBranch_WithoutAMountSaysHowToMountIt(t *testing.T) {
	env, _ := newBranchCLIEnv(t)
	c, err := control.Dial(env.sock)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.BranchCreate(context.Background(), control.BranchCreateParams{Name: "feat"})
	require.NoError(t, err)

	code, stderr, ran := execBranch(t, env, []string{"--branch", "feat", "--", "make"}, nil)
	assert.Equal(t, exitFS, code)
	assert.False(t, ran)
	assert.Contains(t, stderr, "FS_INVALID_ARGUMENT: branch feat is not mounted")
	assert.Contains(t, stderr, "dshmount branch mount feat DIR")
	st, err := c.Status(context.Background())
	require.NoError(t, err)
	assert.Empty(t, st.Sessions, "no session was opened")
	assert.Zero(t, bindCount(env), "nothing was bound")

	code, stderr, ran = execBranch(t, env, []string{"--branch", "nope", "--", "make"}, nil)
	assert.Equal(t, exitFS, code)
	assert.False(t, ran)
	assert.Contains(t, stderr, "FS_NOT_FOUND: no branch named nope")

	code, stderr, ran = execBranch(t, env, []string{"--branch", "feat", "--session", "s-1", "--", "make"}, nil)
	assert.Equal(t, exitUsage, code)
	assert.False(t, ran)
	assert.Contains(t, stderr, "excludes --session")
}

func TestExecBranch_RunsInTheBranchMountAtTheSameRelativeDirectory(t *testing.T) {
	env, m := newBranchCLIEnv(t)
	ctx := context.Background()
	c, err := control.Dial(env.sock)
	require.NoError(t, err)
	defer c.Close()
	mnt := realDir(t)
	_, err = c.BranchCreate(ctx, control.BranchCreateParams{Name: "feat", Mount: mnt})
	require.NoError(t, err)
	require.Equal(t, mnt, m.at("feat"))
	// The fake mounts nothing: give its directory the workspace's layout.
	require.NoError(t, os.MkdirAll(filepath.Join(env.root, "src", "pkg"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(mnt, "src", "pkg"), 0o755))

	t.Chdir(filepath.Join(env.root, "src", "pkg"))
	code, stderr, ran := execBranch(t, env, []string{"--branch", "feat", "--", "make"}, func(dir string, envv []string) {
		assert.Equal(t, filepath.Join(mnt, "src", "pkg"), dir)
		assert.Contains(t, envv, "PWD="+dir)
		// The session acts in the branch: its socket writes land there.
		w, err := control.Dial(env.sock)
		require.NoError(t, err)
		defer w.Close()
		_, err = w.Write(ctx, control.WriteParams{Path: "new.txt", Content: "x\n", Session: sessionFromEnv(envv)})
		require.NoError(t, err)
	})
	require.Equal(t, exitOK, code, stderr)
	require.True(t, ran)
	_, err = os.Stat(filepath.Join(env.root, "new.txt"))
	assert.True(t, os.IsNotExist(err), "the workspace is untouched")
	st, err := c.Stat(ctx, control.StatParams{Path: "new.txt", Branch: "feat"})
	require.NoError(t, err)
	assert.True(t, st.Exists, "the write went to the branch")
	assert.Equal(t, 1, bindCount(env), "the command was bound")

	// Outside the workspace: the mount's root. A directory the branch
	// lacks: the nearest one above it.
	t.Chdir(realDir(t))
	code, stderr, _ = execBranch(t, env, []string{"--branch", "feat", "--", "make"}, func(dir string, _ []string) {
		assert.Equal(t, mnt, dir)
	})
	require.Equal(t, exitOK, code, stderr)
	require.NoError(t, os.MkdirAll(filepath.Join(env.root, "src", "only-ws"), 0o755))
	t.Chdir(filepath.Join(env.root, "src", "only-ws"))
	code, stderr, _ = execBranch(t, env, []string{"--branch", "feat", "--", "make"}, func(dir string, _ []string) {
		assert.Equal(t, filepath.Join(mnt, "src"), dir)
	})
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stderr, "has no directory src/only-ws")

	// From inside another branch's mount: the same place in this one.
	other := realDir(t)
	_, err = c.BranchCreate(ctx, control.BranchCreateParams{Name: "other", Mount: other})
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(other, "src", "pkg"), 0o755))
	t.Chdir(filepath.Join(other, "src", "pkg"))
	code, stderr, _ = execBranch(t, env, []string{"--branch", "feat", "--", "make"}, func(dir string, _ []string) {
		assert.Equal(t, filepath.Join(mnt, "src", "pkg"), dir)
	})
	require.Equal(t, exitOK, code, stderr)
}

// bindCount returns how many sessions the env's binder bound.
func bindCount(env *cliEnv) int {
	env.binder.mu.Lock()
	defer env.binder.mu.Unlock()
	return len(env.binder.binds)
}

func TestCLI_WatchBranchFollowsTheBranch(t *testing.T) {
	env, _ := newBranchCLIEnv(t)
	ctx := context.Background()
	cl, err := control.Dial(env.sock)
	require.NoError(t, err)
	defer cl.Close()
	_, err = cl.BranchCreate(ctx, control.BranchCreateParams{Name: "feat"})
	require.NoError(t, err)

	p := startWatch(t, env.root, "--branch", "feat", "--socket", env.sock, ".")
	waitWatching(t, cl)
	_, err = cl.Write(ctx, control.WriteParams{Path: "in-branch.txt", Content: "x\n", Branch: "feat"})
	require.NoError(t, err)
	assert.Contains(t, p.line(t), " created in-branch.txt ")

	require.NoError(t, cl.BranchDiscard(ctx, "feat"))
	_, err = cl.Write(ctx, control.WriteParams{Path: "after.txt", Content: "x\n"})
	require.NoError(t, err)
	assert.Equal(t, exitFS, p.exit(t))
	assert.Contains(t, p.stderr.String(), "branch feat was committed or discarded; the watch of it ended")
}

// TestBranchCLI_CommitConflictFromASubdirectoryNamesNoPath: `branch commit`
// run in a subdirectory of the workspace reports the daemon's refusal
// without taking the verb for a path ("hello/commit"), and --json lists
// the conflicting paths.
func TestBranchCLI_CommitConflictFromASubdirectoryNamesNoPath(t *testing.T) {
	env, _ := newBranchCLIEnv(t)
	hello := filepath.Join(env.root, "hello")
	require.NoError(t, os.Mkdir(hello, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(hello, "a.txt"), []byte("a\n"), 0o644))
	runDir := t.TempDir()
	remove, err := registry.Register(runDir, registry.Entry{PID: os.Getpid(), Source: env.root, Socket: env.sock})
	require.NoError(t, err)
	defer func() { require.NoError(t, remove()) }()
	reg := []string{envRunDir + "=" + runDir}

	code, out, stderr := runBinary(t, binRun{dir: hello, env: reg}, "session", "open", "--name", "s")
	require.Equal(t, exitOK, code, stderr)
	sess := append(reg, envSession+"="+strings.TrimSpace(out))
	code, _, stderr = runBinary(t, binRun{dir: hello, env: sess}, "branch", "create", "feat")
	require.Equal(t, exitOK, code, stderr)
	code, _, stderr = runBinary(t, binRun{dir: hello, env: sess}, "read", "a.txt", "--branch", "feat")
	require.Equal(t, exitOK, code, stderr)
	code, _, stderr = runBinary(t, binRun{dir: hello, env: sess, stdin: "branch\n"}, "write", "a.txt", "--branch", "feat")
	require.Equal(t, exitOK, code, stderr)
	require.NoError(t, os.WriteFile(filepath.Join(hello, "a.txt"), []byte("workspace\n"), 0o644))

	code, out, stderr = runBinary(t, binRun{dir: hello, env: sess}, "branch", "commit", "feat", "--json")
	assert.Equal(t, exitFS, code, stderr)
	assert.True(t, strings.HasPrefix(stderr, "FS_STALE_VERSION: "), stderr)
	assert.NotContains(t, stderr, "commit:", "the verb is not a path")
	var f failure
	require.NoError(t, json.Unmarshal([]byte(out), &f), out)
	assert.Equal(t, provider.CodeStaleVersion, f.Code)
	assert.Empty(t, f.Path, "no path of the invocation is at fault")
	assert.Equal(t, []string{"hello/a.txt"}, f.Conflicts)
}
