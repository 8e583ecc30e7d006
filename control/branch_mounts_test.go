package control

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/local"
	"github.com/dshmount/dshmount/internal/viewrules"
)

// fakeMounter records the mounts a server asks for.
type fakeMounter struct {
	mu         sync.Mutex
	mounts     []fakeMount
	unmounts   []fakeUnmount
	err        error // Mount fails with it
	unmountErr error // unmounts return it
}

type fakeMount struct {
	branch string
	b      *branch.Branch
	engine *policy.Engine
	view   *viewrules.View
	dir    string
}

type fakeUnmount struct {
	branch  string
	dir     string
	changed int // what the branch held when it was unmounted
}

func (f *fakeMounter) Mount(_ context.Context, b *branch.Branch, engine *policy.Engine, view *viewrules.View, dir string) (func(context.Context) error, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	f.mounts = append(f.mounts, fakeMount{branch: b.Name(), b: b, engine: engine, view: view, dir: dir})
	return func(context.Context) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.unmounts = append(f.unmounts, fakeUnmount{branch: b.Name(), dir: dir, changed: b.Changed()})
		return f.unmountErr
	}, nil
}

func (f *fakeMounter) recorded() ([]fakeMount, []fakeUnmount) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeMount(nil), f.mounts...), append([]fakeUnmount(nil), f.unmounts...)
}

// mountEnv is a branch env whose server mounts through a fake, with its
// workspace mount at wsMount and its log in logs.
type mountEnv struct {
	*testEnv
	fake    *fakeMounter
	state   string
	wsMount string
	logs    *syncBuffer
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newMountEnv starts a server with branches kept in state (a new temp
// directory when empty) and the fake mounter; each prepare runs on the
// workspace directory before the branches are opened.
func newMountEnv(t *testing.T, state string, prepare ...func(ws string)) *mountEnv {
	t.Helper()
	if state == "" {
		state = t.TempDir()
	}
	me := &mountEnv{fake: &fakeMounter{}, state: state, wsMount: t.TempDir(), logs: &syncBuffer{}}
	me.testEnv = newTestEnv(t, func(cfg *testConfig) {
		lfs, ok := cfg.Svc.Engine.FS().(*local.FS)
		require.True(t, ok)
		for _, f := range prepare {
			f(lfs.Root())
		}
		view, err := viewrules.New(lfs, viewrules.Rules{Hide: []string{"/" + branch.StagingDir}})
		require.NoError(t, err)
		cfg.Svc.Engine, cfg.Svc.View = policy.NewEngine(cfg.Svc.Engine.Store(), view), view
		mgr, err := branch.Open(state, lfs, branch.Options{Logger: quietLogger(), Upper: openBranchUpper})
		require.NoError(t, err)
		t.Cleanup(func() { _ = mgr.Close() })
		cfg.Svc.Branches, cfg.Svc.BranchMounts, cfg.Svc.Mount = mgr, me.fake, me.wsMount
		cfg.Svc.Journal = mgr.Journal()
		cfg.Logger = slog.New(slog.NewTextHandler(me.logs, nil))
		cfg.Svc.Logger = cfg.Logger
	})
	return me
}

// emptyDir returns a new empty directory outside the workspace, symlinks
// resolved.
func emptyDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return d
}

func fsCode(t *testing.T, err error) provider.Code {
	t.Helper()
	require.Error(t, err)
	return rpcErr(t, err).Code
}

func TestBranchMount_CreateWithMountMountsTheBranchEngineAndRecordsIt(t *testing.T) {
	env := newMountEnv(t, "")
	ctx := context.Background()
	c := env.client(t)
	dir := emptyDir(t)

	info, err := c.BranchCreate(ctx, BranchCreateParams{Name: "feat", Mount: dir})
	require.NoError(t, err)
	assert.Equal(t, dir, info.Mount)

	mounts, _ := env.fake.recorded()
	require.Len(t, mounts, 1)
	m := mounts[0]
	assert.Equal(t, "feat", m.branch)
	assert.Equal(t, dir, m.dir)
	eng, err := env.svc.BranchEngine("feat")
	require.NoError(t, err)
	assert.Same(t, eng, m.engine, "the branch's own engine, the one its fs.* requests use")
	assert.Same(t, m.view, eng.FS(), "the view the engine guards")
	assert.Equal(t, "feat", m.b.Name())
	assert.Equal(t, dir, m.b.Mount(), "recorded with the branch")

	ls, err := c.BranchList(ctx)
	require.NoError(t, err)
	require.Len(t, ls.Branches, 1)
	assert.Equal(t, dir, ls.Branches[0].Mount)

	// A relative mount resolves against the caller's cwd.
	parent := emptyDir(t)
	require.NoError(t, os.Mkdir(filepath.Join(parent, "m"), 0o755))
	info, err = c.BranchCreate(ctx, BranchCreateParams{Name: "rel", Mount: "m", Cwd: parent})
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(parent, "m"), info.Mount)
}

func TestBranchMount_BadDirectoriesRefusedWithStableCodesAndNoBranchLeft(t *testing.T) {
	env := newMountEnv(t, "")
	ctx := context.Background()
	c := env.client(t)
	env.file(t, "inws/keep.txt", "x\n")
	require.NoError(t, os.Mkdir(filepath.Join(env.root, "emptyws"), 0o755))
	file := filepath.Join(emptyDir(t), "f")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	full := emptyDir(t)
	require.NoError(t, os.WriteFile(filepath.Join(full, "x"), nil, 0o644))
	inMount := filepath.Join(env.wsMount, "sub")
	require.NoError(t, os.Mkdir(inMount, 0o755))
	inState := filepath.Join(env.state, "m")
	require.NoError(t, os.Mkdir(inState, 0o755))

	cases := []struct {
		name, mount, cwd string
		code             provider.Code
	}{
		{"relative without cwd", "some/dir", "", provider.CodeInvalidArgument},
		{"relative with a relative cwd", "dir", "rel", provider.CodeInvalidArgument},
		{"missing", filepath.Join(emptyDir(t), "nope"), "", provider.CodeNotFound},
		{"a file", file, "", provider.CodeNotDirectory},
		{"not empty", full, "", provider.CodeInvalidArgument},
		{"inside the workspace", filepath.Join(env.root, "emptyws"), "", provider.CodeSandboxDenied},
		{"the workspace mount", env.wsMount, "", provider.CodeSandboxDenied},
		{"inside the workspace mount", inMount, "", provider.CodeSandboxDenied},
		{"inside the state directory", inState, "", provider.CodeSandboxDenied},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.BranchCreate(ctx, BranchCreateParams{Name: "b", Mount: tc.mount, Cwd: tc.cwd})
			assert.Equal(t, tc.code, fsCode(t, err))
			ls, err := c.BranchList(ctx)
			require.NoError(t, err)
			assert.Empty(t, ls.Branches, "a refused mount leaves no branch")
		})
	}

	// A directory another branch is mounted at, and a second mount of one
	// branch.
	dir := emptyDir(t)
	_, err := c.BranchCreate(ctx, BranchCreateParams{Name: "a", Mount: dir})
	require.NoError(t, err)
	_, err = c.BranchCreate(ctx, BranchCreateParams{Name: "b", Mount: dir})
	assert.Equal(t, provider.CodeInvalidArgument, fsCode(t, err))
	assert.Contains(t, err.Error(), "already the mount of branch a")
	_, err = c.BranchMount(ctx, BranchMountParams{Name: "a", Mount: emptyDir(t)})
	assert.Equal(t, provider.CodeInvalidArgument, fsCode(t, err))
	assert.Contains(t, err.Error(), "already mounted")
	// Inside another branch's mount.
	_, err = c.BranchCreate(ctx, BranchCreateParams{Name: "c", Mount: filepath.Join(dir, "x")})
	require.Error(t, err)

	// A mount that fails leaves no branch either.
	env.fake.mu.Lock()
	env.fake.err = errors.New("no /dev/fuse")
	env.fake.mu.Unlock()
	_, err = c.BranchCreate(ctx, BranchCreateParams{Name: "d", Mount: emptyDir(t)})
	assert.Equal(t, provider.CodeIOError, fsCode(t, err))
	assert.Contains(t, err.Error(), "no /dev/fuse")
	_, err = c.BranchDiff(ctx, BranchDiffParams{Name: "d"})
	assert.Equal(t, provider.CodeNotFound, fsCode(t, err))
}

func TestBranchMount_RefusesAMountPoint(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	env := newMountEnv(t, "")
	dir := emptyDir(t)
	require.NoError(t, unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"))
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	_, err := env.client(t).BranchCreate(context.Background(), BranchCreateParams{Name: "b", Mount: dir})
	assert.Equal(t, provider.CodeInvalidArgument, fsCode(t, err))
	assert.Contains(t, err.Error(), "already a mount point")
}

func TestBranchMount_DiscardAndCommitUnmountFirst(t *testing.T) {
	env := newMountEnv(t, "")
	env.file(t, "a.txt", "a0\n")
	ctx := context.Background()
	c := env.client(t)
	write := func(name string) {
		_, err := c.Write(ctx, WriteParams{Path: "new-" + name, Content: "x\n", Branch: name})
		require.NoError(t, err)
	}

	dd := emptyDir(t)
	_, err := c.BranchCreate(ctx, BranchCreateParams{Name: "dis", Mount: dd})
	require.NoError(t, err)
	write("dis")
	require.NoError(t, c.BranchDiscard(ctx, "dis"))
	_, un := env.fake.recorded()
	require.Len(t, un, 1)
	assert.Equal(t, fakeUnmount{branch: "dis", dir: dd, changed: 1}, un[0], "unmounted while the branch still held its change")

	// A commit that keeps the branch keeps its mount.
	kd := emptyDir(t)
	_, err = c.BranchCreate(ctx, BranchCreateParams{Name: "kept", Mount: kd})
	require.NoError(t, err)
	write("kept")
	_, err = c.BranchCommit(ctx, BranchCommitParams{Name: "kept", Keep: true})
	require.NoError(t, err)
	_, un = env.fake.recorded()
	assert.Len(t, un, 1)
	ls, err := c.BranchList(ctx)
	require.NoError(t, err)
	require.Len(t, ls.Branches, 1)
	assert.Equal(t, kd, ls.Branches[0].Mount)

	// A refused commit unmounts, and mounts again at the same place.
	cd := emptyDir(t)
	_, err = c.BranchCreate(ctx, BranchCreateParams{Name: "com", Mount: cd})
	require.NoError(t, err)
	_, err = c.Read(ctx, ReadParams{Path: "a.txt", Branch: "com"})
	require.NoError(t, err)
	_, err = c.Write(ctx, WriteParams{Path: "a.txt", Content: "branch\n", Branch: "com"})
	require.NoError(t, err)
	env.file(t, "a.txt", "someone else\n")
	_, err = c.BranchCommit(ctx, BranchCommitParams{Name: "com"})
	assert.Equal(t, provider.CodeStaleVersion, fsCode(t, err))
	mounts, un := env.fake.recorded()
	require.Len(t, un, 2)
	assert.Equal(t, "com", un[1].branch)
	var comMounts []string
	for _, m := range mounts {
		if m.branch == "com" {
			comMounts = append(comMounts, m.dir)
		}
	}
	assert.Equal(t, []string{cd, cd}, comMounts, "mounted again after the refused commit")
	ls, err = c.BranchList(ctx)
	require.NoError(t, err)
	require.Len(t, ls.Branches, 2)
	assert.Equal(t, cd, ls.Branches[0].Mount)

	// A commit that goes through unmounts first, and the mount is gone.
	require.NoError(t, c.BranchDiscard(ctx, "com"))
	cd2 := emptyDir(t)
	_, err = c.BranchCreate(ctx, BranchCreateParams{Name: "com2", Mount: cd2})
	require.NoError(t, err)
	write("com2")
	_, err = c.BranchCommit(ctx, BranchCommitParams{Name: "com2"})
	require.NoError(t, err)
	_, un = env.fake.recorded()
	lastUn := un[len(un)-1]
	assert.Equal(t, fakeUnmount{branch: "com2", dir: cd2, changed: 1}, lastUn, "unmounted before the commit emptied it")
	got, ok := env.content(t, "new-com2")
	assert.True(t, ok)
	assert.Equal(t, "x\n", got)
	ls, err = c.BranchList(ctx)
	require.NoError(t, err)
	for _, b := range ls.Branches {
		assert.NotEqual(t, "com2", b.Name)
	}
}

func TestBranchMount_MountUnmountAndBusyDetachIsLogged(t *testing.T) {
	env := newMountEnv(t, "")
	ctx := context.Background()
	c := env.client(t)
	_, err := c.BranchCreate(ctx, BranchCreateParams{Name: "feat"})
	require.NoError(t, err)
	err = c.BranchUnmount(ctx, "feat")
	assert.Equal(t, provider.CodeInvalidArgument, fsCode(t, err), "not mounted")

	dir := emptyDir(t)
	res, err := c.BranchMount(ctx, BranchMountParams{Name: "feat", Mount: dir})
	require.NoError(t, err)
	assert.Equal(t, dir, res.Mount)
	b, err := env.branches.Get("feat")
	require.NoError(t, err)
	assert.Equal(t, dir, b.Mount())

	env.fake.mu.Lock()
	env.fake.unmountErr = ErrDetachedLazily
	env.fake.mu.Unlock()
	require.NoError(t, c.BranchUnmount(ctx, "feat"))
	_, un := env.fake.recorded()
	require.Len(t, un, 1)
	assert.Equal(t, dir, un[0].dir)
	assert.Empty(t, b.Mount(), "the record goes with branch.unmount")
	ls, err := c.BranchList(ctx)
	require.NoError(t, err)
	assert.Empty(t, ls.Branches[0].Mount)
	assert.Contains(t, env.logs.String(), "detached lazily")

	_, err = c.BranchMount(ctx, BranchMountParams{Name: "nope", Mount: emptyDir(t)})
	assert.Equal(t, provider.CodeNotFound, fsCode(t, err))
}

func TestBranchMount_RestartMountsRecordedBranchesAgain(t *testing.T) {
	state := t.TempDir()
	first := newMountEnv(t, state)
	ctx := context.Background()
	dir := emptyDir(t)
	_, err := first.client(t).BranchCreate(ctx, BranchCreateParams{Name: "feat", Mount: dir})
	require.NoError(t, err)
	_, err = first.client(t).BranchCreate(ctx, BranchCreateParams{Name: "plain"})
	require.NoError(t, err)

	// Shutdown unmounts, keeping the record.
	first.svc.UnmountBranches(ctx)
	_, un := first.fake.recorded()
	require.Len(t, un, 1)
	assert.Equal(t, dir, un[0].dir)
	ls, err := first.client(t).BranchList(ctx)
	require.NoError(t, err)
	assert.Empty(t, ls.Branches[0].Mount)
	require.NoError(t, first.branches.Close())

	second := newMountEnv(t, state)
	require.NoError(t, second.svc.MountBranches(ctx))
	mounts, _ := second.fake.recorded()
	require.Len(t, mounts, 1, "only the branch with a recorded mount")
	assert.Equal(t, "feat", mounts[0].branch)
	assert.Equal(t, dir, mounts[0].dir)
	eng, err := second.svc.BranchEngine("feat")
	require.NoError(t, err)
	assert.Same(t, eng, mounts[0].engine)
	ls, err = second.client(t).BranchList(ctx)
	require.NoError(t, err)
	require.Len(t, ls.Branches, 2)
	assert.Equal(t, dir, ls.Branches[0].Mount)

	// A mount that cannot come back is reported and keeps its record.
	second.svc.UnmountBranches(ctx)
	second.fake.mu.Lock()
	second.fake.err = errors.New("gone")
	second.fake.mu.Unlock()
	err = second.svc.MountBranches(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "gone")
	b, err := second.branches.Get("feat")
	require.NoError(t, err)
	assert.Equal(t, dir, b.Mount())
}

func TestBranchMount_RefusedWithoutAMounter(t *testing.T) {
	env := newBranchEnv(t)
	_, err := env.client(t).BranchCreate(context.Background(), BranchCreateParams{Name: "b", Mount: emptyDir(t)})
	require.Error(t, err)
	assert.Equal(t, CodeUnavailable, rpcErr(t, err).RPCCode)
}

func TestBranchMount_GoneFromOutsideIsNoLongerListedAndMountsAgain(t *testing.T) {
	env := newMountEnv(t, "")
	ctx := context.Background()
	c := env.client(t)
	dir := emptyDir(t)
	_, err := c.BranchCreate(ctx, BranchCreateParams{Name: "feat", Mount: dir})
	require.NoError(t, err)

	env.svc.BranchMountGone("feat", "/elsewhere") // not its mount: nothing
	ls, err := c.BranchList(ctx)
	require.NoError(t, err)
	assert.Equal(t, dir, ls.Branches[0].Mount)

	env.svc.BranchMountGone("feat", dir)
	ls, err = c.BranchList(ctx)
	require.NoError(t, err)
	assert.Empty(t, ls.Branches[0].Mount)
	assert.Contains(t, env.logs.String(), "went away from outside")
	b, err := env.branches.Get("feat")
	require.NoError(t, err)
	assert.Equal(t, dir, b.Mount(), "still recorded: the next start mounts it again")

	_, err = c.BranchMount(ctx, BranchMountParams{Name: "feat", Mount: dir})
	require.NoError(t, err, "mounted again")
	mounts, _ := env.fake.recorded()
	assert.Len(t, mounts, 2)
}

// A rebase replaces the branch's files: it runs with the mount down, and
// the mount comes back at the same place.
func TestBranchMount_RebaseUnmountsAndMountsAgain(t *testing.T) {
	env := newMountEnv(t, "")
	env.file(t, "a.txt", "a\nb\nc\nd\ne\n")
	ctx := context.Background()
	c := env.client(t)
	dir := emptyDir(t)
	_, err := c.BranchCreate(ctx, BranchCreateParams{Name: "rb", Mount: dir})
	require.NoError(t, err)
	_, err = c.Write(ctx, WriteParams{Path: "a.txt", Content: "A\nb\nc\nd\ne\n", Branch: "rb", Unconditional: true})
	require.NoError(t, err)
	env.file(t, "a.txt", "a\nb\nc\nd\nE\n")
	res, err := c.BranchRebase(ctx, BranchRebaseParams{Name: "rb"})
	require.NoError(t, err)
	assert.Equal(t, []string{"a.txt"}, res.Merged)
	mounts, un := env.fake.recorded()
	require.Len(t, un, 1)
	assert.Equal(t, "rb", un[0].branch)
	require.Len(t, mounts, 2)
	assert.Equal(t, []string{dir, dir}, []string{mounts[0].dir, mounts[1].dir}, "mounted again after the rebase")
}
