package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/daemon"
	"github.com/dshmount/dshmount/internal/fuse"
	runregistry "github.com/dshmount/dshmount/internal/registry"
	"github.com/dshmount/dshmount/internal/service"
)

// serveCommand is `dshmount serve`.
func serveCommand() command {
	return command{
		name:    "serve",
		summary: "mount a guarded view of a workspace and serve the control socket",
		run:     runServe,
	}
}

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
	_, gomemlimitSet := os.LookupEnv("GOMEMLIMIT")
	limitCtx, stopLimit := context.WithCancel(ctx)
	defer stopLimit()
	startMemoryLimit(limitCtx, gomemlimitSet)
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
	d, err := daemon.Open(ctx, daemon.Config{
		Source: cfg.Source, Mountpoint: cfg.Mountpoint, StateDir: cfg.StateDir, Store: cfg.Store, NoSync: cfg.NoSync,
		Hide: cfg.Hide, ReadOnly: cfg.ReadOnly, Unguarded: cfg.Unguarded, GuardGit: cfg.GuardGit, BindCgroups: cfg.BindCgroups,
		MergeCache: int64(cfg.MergeCache), FeedRetention: cfg.FeedRetention, FeedMaxEntries: cfg.FeedMaxEntries,
		FeedPruneInterval: cfg.FeedPruneInterval, Logger: log,
	})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := d.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()

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
		Local: d.FS, View: d.View, Engine: d.Engine, Bindings: d.Bindings,
		Logger: log.With("component", "fuse"), Debug: cfg.Debug, AllowOther: cfg.AllowOther,
		EntryTimeout: orNone(cfg.EntryTO), AttrTimeout: orNone(cfg.AttrTO), Passthrough: cfg.Passthrough,
		NegativeTimeout: cfg.NegTO, CacheDirs: cfg.DirCache, CacheLinks: cfg.Watch, ReaddirPlus: fuse.ReaddirPlusMode(cfg.ReaddirPlus),
		Watched: func() bool { return started.Load() && watching.Load() }, DirFDs: dirCap,
		Commits: d.Branches,
	}
	mnt, err := fuse.Mount(cfg.Mountpoint, mcfg)
	if err != nil {
		return err
	}
	bmounts := fuse.NewBranchMounts(mcfg, log) // branch mounts, configured like the workspace's
	d.Engine.AddObserver(bmounts.ObserveWorkspace)
	unmount := func() {
		gctx, cancel := context.WithTimeout(context.Background(), cfg.Grace)
		defer cancel()
		if uerr := mnt.Unmount(gctx); uerr != nil {
			log.Error("unmount", "err", uerr)
		}
	}

	if cfg.Watch {
		w, werr := d.Watch(ctx, cfg.WatchMaxPending, daemon.WatchHooks{
			DropData: func(rel string) { mnt.DropData(rel); bmounts.DropData(rel) }, Forget: mnt.ForgetDirs,
			Stopped: func() { watching.Store(false) }, FlushOn: control.IsChangesCookie,
		})
		if werr != nil {
			unmount()
			return fmt.Errorf("watch the workspace directory (run without --watch to skip it): %w", werr)
		}
		defer w.Close()
		started.Store(true)
		defer started.Store(false) // before the watcher closes: the mount outlives it
	}
	svc, err := d.Service(daemon.ServiceConfig{
		ForgetCallers:   func() { mnt.ForgetCallers(); bmounts.ForgetCallers() },
		BranchMounts:    bmounts,
		ExternalWatched: watching.Load,
	})
	if err != nil {
		unmount()
		return err
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
	bmounts.OnGone(svc.BranchMountGone)
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
	go d.SweepBindings(sctx)

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
	d.Bindings.Sweep() // remove the binding cgroups that are empty by now
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

// unmountBranches ends the branch mounts at shutdown, waiting up to grace
// for busy ones before detaching them lazily; their records stay, so the
// next start mounts them again.
func unmountBranches(srv *service.Service, grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	srv.UnmountBranches(ctx)
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
