package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/policy/procbind"
	"github.com/dshmount/dshmount/internal/provider/local"
	"github.com/dshmount/dshmount/internal/seen"
	"github.com/dshmount/dshmount/internal/service"
	"github.com/dshmount/dshmount/internal/viewrules"
	"github.com/dshmount/dshmount/internal/watcher"
)

// Defaults of the serve flags that the core owns.
const (
	DefaultFeedRetention     = policy.DefaultFeedRetention
	DefaultFeedMaxEntries    = policy.DefaultFeedMaxEntries
	DefaultFeedPruneInterval = policy.DefaultRetentionInterval
	DefaultWatchMaxPending   = local.DefaultTreeMaxPending
)

// Config configures Open. Source, Mountpoint and StateDir are absolute.
type Config struct {
	// Source is the workspace directory; Mountpoint the mount's path (an
	// alias of Source for the workspace backend and the git directories).
	Source, Mountpoint string
	// StateDir holds the default store, the branches and the merge cache.
	StateDir string
	// Store names the policy store (--store and its TLS files).
	Store StoreConfig
	// NoSync skips the fsyncs of socket publications (--durability none).
	NoSync bool
	// Hide and ReadOnly are the view's rules (--hide, --read-only);
	// Unguarded the paths outside the guard (--unguarded).
	Hide, ReadOnly, Unguarded []string
	// GuardGit guards a repository's git directory too (--guard-git).
	GuardGit bool
	// BindCgroups binds each exec in a cgroup of its own (--bind-cgroups).
	BindCgroups bool
	// MergeCache bounds the bytes kept for merge: true (0 disables it).
	MergeCache int64
	// FeedRetention, FeedMaxEntries and FeedPruneInterval bound the audit
	// log and the change feed's history.
	FeedRetention     time.Duration
	FeedMaxEntries    uint64
	FeedPruneInterval time.Duration
	// Logger receives the core's logs (nil: slog.Default()).
	Logger *slog.Logger
}

// Daemon is the core a daemon serves, opened by Open and closed by Close.
// Its fields are for the mount's configuration; the service is built by
// Service.
type Daemon struct {
	// FS is the workspace directory on the host disk.
	FS *local.FS
	// View applies the view's rules over FS.
	View *viewrules.View
	// Engine is the guarded path over View.
	Engine *policy.Engine
	// Bindings answers which session a process acts for.
	Bindings *procbind.Registry
	// Branches keeps the branches of the state directory.
	Branches *branch.Manager

	cfg     Config
	log     *slog.Logger
	store   *policy.Store
	seen    *seen.Cache
	closers []func() error // in the order Close runs them
}

// Open opens the store, the workspace, the view, the branches (finishing
// or undoing a commit a killed daemon left half done), the engine and the
// process bindings of cfg. On an error, what was opened is closed.
func Open(ctx context.Context, cfg Config) (_ *Daemon, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	log := cfg.Logger
	d := &Daemon{cfg: cfg, log: log}
	defer func() {
		if err != nil {
			_ = d.Close()
		}
	}()
	if d.seen, err = seen.Open(filepath.Join(cfg.StateDir, "seen"), cfg.MergeCache); err != nil {
		return nil, err
	}
	if d.store, err = OpenStore(ctx, cfg.Store, cfg.Source, cfg.StateDir, log); err != nil {
		return nil, err
	}
	store := d.store
	d.push(func() error {
		if cerr := store.Close(); cerr != nil {
			return fmt.Errorf("close state: %w", cerr)
		}
		return nil
	})
	stop := store.StartRetention(policy.Retention{MaxAge: cfg.FeedRetention, MaxEntries: cfg.FeedMaxEntries, Interval: cfg.FeedPruneInterval})
	d.push(func() error { stop(); return nil })

	durability := local.DurabilityFsync
	if cfg.NoSync {
		durability = local.DurabilityNone
	}
	if d.FS, err = local.New(cfg.Source, local.Options{Digests: store, Aliases: []string{cfg.Mountpoint}, Durability: durability}); err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	lfs := d.FS
	d.push(func() error { lfs.Close(); return nil })
	hide := append(append([]string(nil), cfg.Hide...), "/"+branch.StagingDir)
	if d.View, err = viewrules.New(lfs, viewrules.Rules{Hide: hide, ReadOnly: cfg.ReadOnly}); err != nil {
		return nil, err
	}
	if d.Branches, err = branch.Open(cfg.StateDir, lfs, branch.Options{Logger: log.With("component", "branch"), Upper: openBranchUpper}); err != nil {
		return nil, fmt.Errorf("branches: %w", err)
	}
	branches := d.Branches
	d.push(func() error { branches.Close(); return nil })
	d.Engine = policy.NewEngine(store, d.View)
	unguarded, err := viewrules.NewMatcher("unguarded", cfg.Unguarded)
	if err != nil {
		return nil, err
	}
	d.Engine.SetZones(policy.Zones{GuardGit: cfg.GuardGit, Unguarded: unguarded.Match,
		GitDirs: policy.NewGitDirs(cfg.Mountpoint, cfg.Source)})
	if d.Bindings, err = procbind.New(store, procbind.Options{NoCgroups: !cfg.BindCgroups, Logger: log.With("component", "procbind")}); err != nil {
		return nil, err
	}
	return d, nil
}

// push adds a step to Close, which runs the steps last pushed first.
func (d *Daemon) push(f func() error) { d.closers = append(d.closers, f) }

// Close closes the branches, the workspace and the store (after stopping
// the retention), last opened first; the mounts must be gone.
func (d *Daemon) Close() error {
	var errs []error
	for i := len(d.closers) - 1; i >= 0; i-- {
		errs = append(errs, d.closers[i]())
	}
	d.closers = nil
	return errors.Join(errs...)
}

// openBranchUpper opens a branch's own files on the host disk, without
// fsyncs: a change counts once the branch's change log records it.
func openBranchUpper(dir string) (branch.Upper, error) {
	return local.New(dir, local.Options{Durability: local.DurabilityNone})
}

// WatchHooks are what the tree watcher tells the mounts.
type WatchHooks struct {
	// DropData drops the kernel's cached data of a file changed in the
	// workspace directory (every mount that shows it).
	DropData func(rel string)
	// Forget drops the mounts' cached directory descriptors when events
	// were lost.
	Forget func()
	// Stopped is called once if the watcher fails for good.
	Stopped func()
	// FlushOn names files whose event flushes the watcher's window at once
	// (the change feed's cookie files).
	FlushOn func(name string) bool
}

// Watch starts the tree watcher, which records the changes made in the
// workspace directory outside the daemon until ctx ends or the returned
// Closer is closed. maxPending bounds the paths of one window (0: default).
func (d *Daemon) Watch(ctx context.Context, maxPending int, h WatchHooks) (io.Closer, error) {
	rec := &watcher.Recorder{FS: d.FS, Engine: d.Engine, Ignored: watcher.Ignore(d.FS.Root(), d.cfg.StateDir, d.View),
		DropData: h.DropData, Forget: h.Forget, Stopped: h.Stopped, Log: d.log.With("component", "watch")}
	return watcher.Start(ctx, rec, watcher.Options{MaxPending: maxPending, FlushOn: h.FlushOn})
}

// ServiceConfig is what the service needs from the transports.
type ServiceConfig struct {
	// ForgetCallers tells every mount to resolve its callers' sessions
	// again (after a bind).
	ForgetCallers func()
	// BranchMounts serves branches as mounts (nil: refused).
	BranchMounts service.BranchMounter
	// ExternalWatched reports whether the tree watcher runs.
	ExternalWatched func() bool
}

// Service builds the service every transport calls over the daemon's
// core.
func (d *Daemon) Service(sc ServiceConfig) (*service.Service, error) {
	svc, err := service.New(service.Config{
		Engine: d.Engine, Binder: binder{d.Bindings, sc.ForgetCallers}, Branches: d.Branches,
		Journal: d.Branches.Journal(), View: d.View, BranchMounts: sc.BranchMounts,
		ExternalWatched: sc.ExternalWatched, SeenBytes: d.seen,
		Source: d.cfg.Source, Mount: d.cfg.Mountpoint, Logger: d.log,
	})
	if err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}
	return svc, nil
}

// bindingSweepEvery is how often the daemon drops the bindings whose
// processes have all exited (and removes their empty cgroups).
const bindingSweepEvery = 30 * time.Second

// SweepBindings drops the bindings whose processes have all exited (and
// removes their empty cgroups) every 30 s until ctx ends.
func (d *Daemon) SweepBindings(ctx context.Context) {
	tick := time.NewTicker(bindingSweepEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			d.Bindings.Sweep()
		}
	}
}
