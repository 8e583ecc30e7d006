package fuse

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/local"
	"github.com/dshmount/dshmount/internal/viewrules"
)

// branchEnv is a mounted workspace (env) plus one branch of it served as a
// second mount, as the daemon serves `branch.create {mount}`.
type branchEnv struct {
	*env
	mgr    *branch.Manager
	br     *branch.Branch
	bmnt   string
	bview  *viewrules.View
	bengin *policy.Engine
	bsrv   *Server
}

// newBranchEnv mounts a fresh workspace and a branch "work" of it.
func newBranchEnv(t testing.TB, o envOptions) *branchEnv {
	t.Helper()
	e := newEnv(t, o)
	be := &branchEnv{env: e, bmnt: filepath.Join(filepath.Dir(e.src), "bmnt")}
	require.NoError(t, os.Mkdir(be.bmnt, 0o755))
	var err error
	quiet := slog.New(slog.DiscardHandler)
	be.mgr, err = branch.Open(filepath.Join(filepath.Dir(e.src), "bstate"), e.lfs, branch.Options{Logger: quiet, Upper: openBranchUpper})
	require.NoError(t, err)
	be.br, err = be.mgr.Create("work")
	require.NoError(t, err)
	be.bview, err = viewrules.New(be.br, o.rules)
	require.NoError(t, err)
	be.bengin = policy.NewEngine(e.store, be.bview)
	if testing.Verbose() {
		quiet = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	be.bsrv, err = Mount(be.bmnt, Config{
		Local: e.lfs, View: be.bview, Engine: be.bengin, Branch: be.br, Bindings: e.bind, Logger: quiet,
		Passthrough: o.passthrough, Watched: o.watched,
	})
	require.NoError(t, err)
	if !o.noBaseObserver {
		e.engine.AddObserver(be.bsrv.BaseObserver())
	}
	// Cleanups run last-in first-out: this unmount runs before the
	// workspace's.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		require.NoError(t, be.bsrv.Unmount(ctx))
		require.NoError(t, be.mgr.Close())
	})
	return be
}

// eachBranchMode runs f with passthrough off and on.
func eachBranchMode(t *testing.T, o envOptions, f func(t *testing.T, e *branchEnv)) {
	for _, pt := range []bool{false, true} {
		name := "passthrough=false"
		if pt {
			name = "passthrough=true"
		}
		t.Run(name, func(t *testing.T) {
			o := o
			o.passthrough = pt
			f(t, newBranchEnv(t, o))
		})
	}
}

// bm is the branch mount path of rel.
func (e *branchEnv) bm(rel string) string { return filepath.Join(e.bmnt, rel) }

// read returns the content of p ("<absent>" when missing).
func read(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return "<absent>"
	}
	require.NoError(t, err)
	return string(b)
}

// bread reads rel through the branch's provider API ("<absent>" when
// missing).
func (e *branchEnv) bread(rel string) string {
	e.t.Helper()
	s, err := e.br.ReadText(context.Background(), e.br.TargetForRel(rel))
	if provider.CodeOf(err) == provider.CodeNotFound {
		return "<absent>"
	}
	require.NoError(e.t, err)
	return s
}

// blist lists the directory rel through the branch's provider API.
func (e *branchEnv) blist(rel string) []string {
	e.t.Helper()
	des, err := e.br.ListDir(context.Background(), e.br.TargetForRel(rel))
	require.NoError(e.t, err)
	var out []string
	for _, de := range des {
		out = append(out, de.Name)
	}
	return out
}

// bnames lists a directory on the branch mount.
func (e *branchEnv) bnames(rel string) []string {
	e.t.Helper()
	entries, err := os.ReadDir(e.bm(rel))
	require.NoError(e.t, err)
	var out []string
	for _, en := range entries {
		out = append(out, en.Name())
	}
	return out
}

// commit commits the branch into the workspace (kept).
func (e *branchEnv) commit() {
	e.t.Helper()
	_, err := e.mgr.Commit(context.Background(), "work", true, nil, branch.Hooks{})
	require.NoError(e.t, err)
}

// relookup makes the kernel forget its entry of rel on the branch mount,
// so the next use of the name is a new LOOKUP.
func (e *branchEnv) relookup(rel string) { e.bsrv.inval.forget(rel, false) }

// openBranchUpper opens a branch's upper directory as cmd/dshmount serve
// does.
func openBranchUpper(dir string) (branch.Upper, error) {
	return local.New(dir, local.Options{Durability: local.DurabilityNone})
}
