package fuse

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/mountinfo"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/viewrules"
)

// BranchMounts serves branches as FUSE mounts beside the workspace mount,
// configured like it (it implements the service's BranchMounter).
type BranchMounts struct {
	base Config // the workspace mount's configuration
	log  *slog.Logger

	mu   sync.Mutex
	live map[*Server]policy.Observer // each mount's BaseObserver
	// gone is told of a branch mount that went away from outside (set by
	// OnGone before the first mount).
	gone func(name, dir string)
}

// NewBranchMounts returns a mounter whose mounts are configured like the
// workspace mount of base.
func NewBranchMounts(base Config, log *slog.Logger) *BranchMounts {
	return &BranchMounts{base: base, log: log, live: map[*Server]policy.Observer{}}
}

// Mount implements the service's BranchMounter: it detaches a dead mount a
// killed daemon left at dir, then mounts branch b there with its engine
// and view.
func (bm *BranchMounts) Mount(_ context.Context, b *branch.Branch, engine *policy.Engine, view *viewrules.View, dir string) (func(context.Context) error, error) {
	cfg := bm.base
	cfg.View, cfg.Engine, cfg.Branch = view, engine, b
	if cfg.Logger != nil {
		cfg.Logger = cfg.Logger.With("branch", b.Name())
	}
	type mounted struct {
		mnt *Server
		err error
	}
	ch := make(chan mounted, 1)
	// On a goroutine of its own: the request's thread may carry a peer's
	// filesystem credentials, and the mount is the daemon's.
	go func() {
		if err := CleanupStale(dir); err != nil {
			ch <- mounted{err: err}
			return
		}
		mnt, err := Mount(dir, cfg)
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
			return fmt.Errorf("branch %s at %s: %w", b.Name(), dir, mountinfo.ErrDetachedLazily)
		}
		return nil
	}, nil
}

// each calls fn for every live branch mount.
func (bm *BranchMounts) each(fn func(*Server)) {
	bm.mu.Lock()
	mnts := make([]*Server, 0, len(bm.live))
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
func (bm *BranchMounts) ObserveWorkspace(ctx context.Context, ev policy.Event) error {
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
func (bm *BranchMounts) DropData(rel string) {
	bm.each(func(m *Server) { m.DropData(rel) })
}

// ForgetCallers tells every branch mount to resolve its callers' sessions
// again (after a bind).
func (bm *BranchMounts) ForgetCallers() {
	bm.each(func(m *Server) { m.ForgetCallers() })
}

// OnGone sets who is told of a branch mount that went away from outside
// (an umount): the service forgets it. Call it before the first Mount.
func (bm *BranchMounts) OnGone(fn func(name, dir string)) { bm.gone = fn }
