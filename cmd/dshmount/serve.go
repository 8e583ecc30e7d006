package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"github.com/dshmount/dshmount/internal/seen"
	"github.com/dshmount/dshmount/internal/service"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/fuse"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/policy/procbind"
	"github.com/dshmount/dshmount/internal/provider/local"
	runregistry "github.com/dshmount/dshmount/internal/registry"
	"github.com/dshmount/dshmount/internal/viewrules"
	"github.com/dshmount/dshmount/internal/watcher"
)

// serveCommand is `dshmount serve`.
func serveCommand() command {
	return command{
		name:    "serve",
		summary: "mount a guarded view of a workspace and serve the control socket",
		run:     runServe,
	}
}

// defaultMemoryLimit is the daemon's soft heap limit (GOMEMLIMIT overrides
// it): past it the collector runs more often and returns freed memory to the
// system, so transient peaks (Badger flushing memtables and compacting) do
// not leave the daemon's RSS at twice its live heap.
const defaultMemoryLimit = 128 << 20

// runServe parses the flags and runs the daemon until ctx ends.
func runServe(ctx context.Context, args []string, sio stdio) int {
	cfg, err := parseServeArgs(args, sio.out, sio.err)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(sio.err, "dshmount serve: %v\n", err)
		return exitUsage
	}
	level := slog.LevelInfo
	if cfg.Debug {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(sio.err, &slog.HandlerOptions{Level: level}))
	if cfg, err = cfg.resolve(logger); err != nil {
		fmt.Fprintf(sio.err, "dshmount serve: %v\n", err)
		return exitUsage
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(sio.err, "dshmount serve: cpu profile: %v\n", err)
			return exitUsage
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
	}
	if err := serve(ctx, cfg, logger, sio.out); err != nil {
		logger.Error("serve failed", "err", err)
		fmt.Fprintf(sio.err, "dshmount serve: %v\n", err)
		return exitFS
	}
	return exitOK
}

// serve wires the layers, mounts, then serves the control socket until ctx
// ends or the mount goes away. The socket is created only once the mount is
// live, so a daemon that answers daemon.status has a working mount.
func serve(ctx context.Context, cfg serveConfig, log *slog.Logger, stdout io.Writer) (err error) {
	ctlCfg := control.Config{
		SocketPath: cfg.Socket, AllowUIDs: cfg.AllowUIDs,
		Logger: log, MaxRequestBytes: cfg.MaxRequestBytes,
		MaxConnections: cfg.MaxConnections, MaxConnectionsPerUID: cfg.MaxConnectionsPerUID, MaxPendingBytes: cfg.MaxPendingBytes,
		RequestTimeout: cfg.RequestTimeout, IdleTimeout: cfg.IdleTimeout,
	}
	fds, err := raiseDescriptorLimit(ctlCfg, log)
	if err != nil {
		return err
	}
	dirFDs, err := dirDescriptors(fds, ctlCfg, cfg.DirFDs, cfg.DirFDsSet)
	if err != nil {
		return err
	}
	log.Debug("descriptor limit", "limit", fds, "socket", ctlCfg.Descriptors(), "kept for the mount", fds-uint64(ctlCfg.Descriptors()), "directories", dirFDs)
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if err := openStateDirForAllowed(cfg); err != nil {
		return err
	}
	seenBytes, err := seen.Open(filepath.Join(cfg.StateDir, "seen"), int64(cfg.MergeCache))
	if err != nil {
		return err
	}
	store, err := openPolicyStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := store.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close state: %w", cerr)
		}
	}()
	defer store.StartRetention(policy.Retention{MaxAge: cfg.FeedRetention, MaxEntries: cfg.FeedMaxEntries, Interval: cfg.FeedPruneInterval})()

	lfs, err := local.New(cfg.Source, local.Options{Digests: store, Aliases: []string{cfg.Mountpoint}, Durability: durability(cfg.NoSync)})
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	defer lfs.Close()
	view, err := viewrules.New(lfs, viewrules.Rules{Hide: append(append([]string(nil), cfg.Hide...), "/"+branch.StagingDir), ReadOnly: cfg.ReadOnly})
	if err != nil {
		return err
	}
	branches, err := openBranches(cfg.StateDir, lfs, log)
	if err != nil {
		return err
	}
	defer branches.Close()
	engine := policy.NewEngine(store, view)
	unguarded, err := viewrules.NewMatcher("unguarded", cfg.Unguarded)
	if err != nil {
		return err
	}
	engine.SetZones(policy.Zones{GuardGit: cfg.GuardGit, Unguarded: unguarded.Match,
		GitDirs: policy.NewGitDirs(cfg.Mountpoint, cfg.Source)})
	registry, err := procbind.New(store, procbind.Options{NoCgroups: !cfg.BindCgroups, Logger: log.With("component", "procbind")})
	if err != nil {
		return err
	}

	// fs.changes vouches for out-of-band changes only while the watcher
	// runs; the mount keeps directory descriptors only once it started (it
	// reports no change made before its snapshot).
	var watching, started atomic.Bool
	watching.Store(cfg.Watch) // before the start: a watcher that fails at once clears it
	dirCap := dirFDs
	if dirCap == 0 {
		dirCap = -1 // none (fuse reads zero as its default)
	}
	mcfg := fuse.Config{
		Local: lfs, View: view, Engine: engine, Bindings: registry,
		Logger: log.With("component", "fuse"), Debug: cfg.Debug, AllowOther: cfg.AllowOther,
		EntryTimeout: orNone(cfg.EntryTO), AttrTimeout: orNone(cfg.AttrTO), Passthrough: cfg.Passthrough,
		NegativeTimeout: cfg.NegTO, CacheDirs: cfg.DirCache, CacheLinks: cfg.Watch, ReaddirPlus: fuse.ReaddirPlusMode(cfg.ReaddirPlus),
		Watched: func() bool { return started.Load() && watching.Load() }, DirFDs: dirCap,
		Commits: branches,
	}
	mnt, err := fuse.Mount(cfg.Mountpoint, mcfg)
	if err != nil {
		return err
	}
	bmounts := newBranchMounter(mcfg, log) // branch mounts, configured like the workspace's
	engine.AddObserver(bmounts.ObserveWorkspace)
	unmount := func() {
		gctx, cancel := context.WithTimeout(context.Background(), cfg.Grace)
		defer cancel()
		if uerr := mnt.Unmount(gctx); uerr != nil {
			log.Error("unmount", "err", uerr)
		}
	}

	if cfg.Watch {
		rec := &watcher.Recorder{FS: lfs, Engine: engine, Ignored: watcher.Ignore(lfs.Root(), cfg.StateDir, view),
			DropData: func(rel string) { mnt.DropData(rel); bmounts.DropData(rel) }, Forget: mnt.ForgetDirs,
			Stopped: func() { watching.Store(false) }, Log: log.With("component", "watch")}
		w, werr := watcher.Start(ctx, rec, watcher.Options{MaxPending: cfg.WatchMaxPending, FlushOn: control.IsChangesCookie})
		if werr != nil {
			unmount()
			return fmt.Errorf("watch the workspace directory (run without --watch to skip it): %w", werr)
		}
		defer w.Close()
		started.Store(true)
		defer started.Store(false) // before the watcher closes: the mount outlives it
	}
	svc, err := service.New(service.Config{
		Engine: engine, Binder: bindNotifier{registry, mnt, bmounts}, Branches: branches,
		Journal: branches.Journal(), View: view, BranchMounts: bmounts,
		ExternalWatched: watching.Load, SeenBytes: seenBytes,
		Source: cfg.Source, Mount: cfg.Mountpoint, Logger: log,
	})
	if err != nil {
		unmount()
		return fmt.Errorf("service: %w", err)
	}
	ctlCfg.Service = svc
	ctlCfg.FuseRequests = mnt.Requests
	srv, err := control.NewServer(ctlCfg)
	if err != nil {
		unmount()
		return fmt.Errorf("control socket: %w", err)
	}
	// Once the mount is live: a next daemon recognises this one by it if it
	// is killed and cannot exit.
	if rerr := writeDaemonRecord(cfg.StateDir, cfg.Mountpoint); rerr != nil {
		log.Warn("a daemon killed with this record missing cannot be recovered automatically", "err", rerr)
	}
	defer func() {
		if rerr := removeDaemonRecord(cfg.StateDir); rerr != nil {
			log.Warn("clean exit", "err", rerr)
		}
	}()
	// Clients started inside the mount or the workspace find this daemon
	// through the registry.
	if unregister, rerr := runregistry.Register(runregistry.DefaultDir(), runregistry.Entry{
		PID: os.Getpid(), Mount: cfg.Mountpoint, Source: cfg.Source, Socket: cfg.Socket,
	}); rerr != nil {
		log.Warn("clients inside the mount will need --socket or DSH_SOCKET", "err", rerr)
	} else {
		defer func() {
			if rerr := unregister(); rerr != nil {
				log.Warn("clean exit", "err", rerr)
			}
		}()
	}
	bmounts.gone = svc.BranchMountGone
	if merr := svc.MountBranches(ctx); merr != nil {
		log.Warn("some branch mounts did not come back", "err", merr)
	}
	log.Info("ready", "source", cfg.Source, "mount", cfg.Mountpoint, "socket", cfg.Socket, "state", cfg.StateDir)
	fmt.Fprintf(stdout, "ready mount=%s socket=%s\n", cfg.Mountpoint, cfg.Socket)

	sctx, stopServing := context.WithCancel(ctx)
	defer stopServing()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx) }()
	mountGone := make(chan struct{})
	go func() { mnt.Wait(); close(mountGone) }()
	go sweepBindings(sctx, registry)

	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down", "reason", context.Cause(ctx))
	case serveErr = <-served:
		log.Error("control socket stopped", "err", serveErr)
	case <-mountGone:
		log.Info("the mount was unmounted (dshmount unmount, umount or fusermount -u); shutting down")
	}
	if cfg.MemProfile != "" {
		writeHeapProfile(cfg.MemProfile, log) // before teardown: what the running daemon holds
	}
	stopServing()
	_ = srv.Close()
	unmountBranches(svc, cfg.Grace) // before the workspace mount they lie beside
	unmount()
	registry.Sweep() // remove the binding cgroups that are empty by now
	if serveErr != nil {
		return fmt.Errorf("control socket: %w", serveErr)
	}
	return nil
}

// orNone maps a zero timeout flag (no caching) to the fuse package's
// "none" value; the fuse package reads zero as "default".
func orNone(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// bindNotifier binds through the registry, then tells the mount to forget
// the callers it resolved before the bind.
type bindNotifier struct {
	reg      *procbind.Registry
	mnt      *fuse.Server
	branches *branchMounter
}

// Bind implements control.ProcessBinder.
func (b bindNotifier) Bind(session policy.SessionID, pid int) error {
	err := b.reg.Bind(session, pid)
	b.mnt.ForgetCallers()
	b.branches.ForgetCallers()
	return err
}

// BindStrict implements control.StrictBinder.
func (b bindNotifier) BindStrict(session policy.SessionID, pid int) error {
	err := b.reg.BindWith(session, pid, true)
	b.mnt.ForgetCallers()
	b.branches.ForgetCallers()
	return err
}

// SessionOf implements control.ProcessBinder.
func (b bindNotifier) SessionOf(pid int) (policy.SessionID, bool) { return b.reg.SessionOf(pid) }

// Bindings implements control.BindingLister.
func (b bindNotifier) Bindings() []control.BindingInfo {
	var out []control.BindingInfo
	for _, st := range b.reg.List() {
		out = append(out, control.BindingInfo{Session: st.Session, PID: st.PID, Cgroup: st.Cgroup, TreeGone: st.TreeGone})
	}
	return out
}

// bindingSweepEvery is how often the daemon drops the bindings whose
// processes have all exited (and removes their empty cgroups).
const bindingSweepEvery = 30 * time.Second

// sweepBindings sweeps the registry until ctx ends.
func sweepBindings(ctx context.Context, reg *procbind.Registry) {
	tick := time.NewTicker(bindingSweepEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			reg.Sweep()
		}
	}
}

// durability maps --durability onto the provider's knob.
func durability(noSync bool) local.Durability {
	if noSync {
		return local.DurabilityNone
	}
	return local.DurabilityFsync
}

// writeHeapProfile writes a heap profile (after a GC, so it shows what is
// live) to path.
func writeHeapProfile(path string, log *slog.Logger) {
	f, err := os.Create(path)
	if err != nil {
		log.Error("heap profile", "err", err)
		return
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		log.Error("heap profile", "path", path, "err", err)
	}
}
