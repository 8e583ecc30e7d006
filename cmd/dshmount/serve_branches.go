package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/fuse"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider/local"
	"github.com/dshmount/dshmount/internal/service"
	"github.com/dshmount/dshmount/internal/viewrules"
)

// openBranches opens the branches kept in the state directory; a commit a
// killed daemon left half done is finished or undone here, before the
// mount and the socket serve anything.
func openBranches(stateDir string, lower branch.Lower, log *slog.Logger) (*branch.Manager, error) {
	m, err := branch.Open(stateDir, lower, branch.Options{Logger: log.With("component", "branch"), Upper: openBranchUpper})
	if err != nil {
		return nil, fmt.Errorf("branches: %w", err)
	}
	return m, nil
}

// openBranchUpper opens a branch's own files on the host disk, without
// fsyncs: a change counts once the branch's change log records it.
func openBranchUpper(dir string) (branch.Upper, error) {
	return local.New(dir, local.Options{Durability: local.DurabilityNone})
}

// branchMounter serves branches as FUSE mounts beside the workspace mount,
// configured like it (service.BranchMounter).
type branchMounter struct {
	base fuse.Config // the workspace mount's configuration
	log  *slog.Logger

	mu   sync.Mutex
	live map[*fuse.Server]policy.Observer // each mount's BaseObserver
	// gone is told of a branch mount that went away from outside (set
	// before the first mount).
	gone func(name, dir string)
}

var _ service.BranchMounter = (*branchMounter)(nil)

// newBranchMounter returns a mounter whose mounts are configured like the
// workspace mount of base.
func newBranchMounter(base fuse.Config, log *slog.Logger) *branchMounter {
	return &branchMounter{base: base, log: log, live: map[*fuse.Server]policy.Observer{}}
}

// Mount implements service.BranchMounter: it detaches a dead mount a
// killed daemon left at dir, then mounts branch b there with its engine
// and view.
func (bm *branchMounter) Mount(_ context.Context, b *branch.Branch, engine *policy.Engine, view *viewrules.View, dir string) (func(context.Context) error, error) {
	cfg := bm.base
	cfg.View, cfg.Engine, cfg.Branch = view, engine, b
	if cfg.Logger != nil {
		cfg.Logger = cfg.Logger.With("branch", b.Name())
	}
	type mounted struct {
		mnt *fuse.Server
		err error
	}
	ch := make(chan mounted, 1)
	// On a goroutine of its own: the request's thread may carry a peer's
	// filesystem credentials, and the mount is the daemon's.
	go func() {
		if err := fuse.CleanupStale(dir); err != nil {
			ch <- mounted{err: err}
			return
		}
		mnt, err := fuse.Mount(dir, cfg)
		ch <- mounted{mnt, err}
	}()
	m := <-ch
	if m.err != nil {
		return nil, m.err
	}
	bm.mu.Lock()
	bm.live[m.mnt] = m.mnt.BaseObserver()
	bm.mu.Unlock()
	var ours atomic.Bool // the unmount is the daemon's own
	go func() {
		m.mnt.Wait()
		if !ours.Load() && bm.gone != nil {
			bm.mu.Lock()
			delete(bm.live, m.mnt)
			bm.mu.Unlock()
			bm.gone(b.Name(), dir)
		}
	}()
	return func(ctx context.Context) error {
		ours.Store(true)
		bm.mu.Lock()
		delete(bm.live, m.mnt)
		bm.mu.Unlock()
		if err := m.mnt.Unmount(ctx); err != nil {
			return fmt.Errorf("unmount branch %s from %s: %w", b.Name(), dir, err)
		}
		if ctx.Err() != nil { // Unmount waited out ctx, then detached
			return fmt.Errorf("branch %s at %s: %w", b.Name(), dir, service.ErrDetachedLazily)
		}
		return nil
	}, nil
}

// each calls fn for every live branch mount.
func (bm *branchMounter) each(fn func(*fuse.Server)) {
	bm.mu.Lock()
	mnts := make([]*fuse.Server, 0, len(bm.live))
	for m := range bm.live {
		mnts = append(mnts, m)
	}
	bm.mu.Unlock()
	for _, m := range mnts {
		fn(m)
	}
}

// ObserveWorkspace is a policy.Observer of the workspace's engine: it hands
// each recorded workspace change to every branch mount, whose kernel caches
// show the workspace's entries and bytes wherever the branch has not
// changed them (a commit, kept or not, is such a change too).
func (bm *branchMounter) ObserveWorkspace(ctx context.Context, ev policy.Event) error {
	bm.mu.Lock()
	obs := make([]policy.Observer, 0, len(bm.live))
	for _, o := range bm.live {
		if o != nil {
			obs = append(obs, o)
		}
	}
	bm.mu.Unlock()
	for _, o := range obs {
		if err := o(ctx, ev); err != nil {
			bm.log.Warn("branch mount cache invalidation", "path", ev.Target.DisplayPath, "err", err)
		}
	}
	return nil
}

// DropData drops the kernel's cached data of rel on every branch mount (a
// branch shows the workspace's bytes of a file it did not change).
func (bm *branchMounter) DropData(rel string) {
	bm.each(func(m *fuse.Server) { m.DropData(rel) })
}

// ForgetCallers tells every branch mount to resolve its callers' sessions
// again (after a bind).
func (bm *branchMounter) ForgetCallers() {
	bm.each(func(m *fuse.Server) { m.ForgetCallers() })
}

// unmountBranches ends the branch mounts at shutdown, waiting up to grace
// for busy ones before detaching them lazily; their records stay, so the
// next start mounts them again.
func unmountBranches(srv *service.Service, grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	srv.UnmountBranches(ctx)
}
