package fuse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/dshmount/dshmount/internal/fuse/reqcount"
	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Server is a live mount and the loop serving it. (The type cannot share
// the name of the Mount function that creates it.)
type Server struct {
	mountpoint string
	fsys       *FileSystem
	state      *mountState
	inval      *invalidator
	served     <-chan struct{} // closed when the serve loop has exited
	requests   *reqcount.Counts

	closeOnce sync.Once
}

// Requests returns the FUSE requests the mount has answered since it was
// mounted, by opcode (LOOKUP, GETATTR, …; FORGET counts forgotten nodes).
func (mt *Server) Requests() map[string]uint64 { return mt.requests.Snapshot() }

// Mountpoint returns the absolute mountpoint.
func (mt *Server) Mountpoint() string { return mt.mountpoint }

// Mount mounts the view of cfg.Local at mountpoint and serves it in the
// background over /dev/fuse: NewFileSystem, then Serve with DevFuse. As
// root it calls mount(2) itself (no fusermount needed); otherwise it
// relies on fusermount3. It returns once the kernel has answered INIT, so
// the mount is usable when Mount returns.
func Mount(mountpoint string, cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("mount: %w", err)
	}
	cfg = cfg.withDefaults()
	mp, err := filepath.Abs(mountpoint)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	cfg.Logger = cfg.Logger.With("mount", mp)
	fsys, err := NewFileSystem(cfg)
	if err != nil {
		return nil, err
	}
	return fsys.Serve(DevFuse{}, mp)
}

// FileSystem is a mount built and not served yet: what the kernel's
// requests reach and the state behind it. A Transport serves it (Serve);
// Close drops one that is never served.
type FileSystem struct {
	// Raw is the raw file system a Transport serves: the node tree,
	// behind the release gate, with Init stopped (keepCallbacks), behind
	// the request counter.
	Raw gofuse.RawFileSystem
	// Options are the mount options Raw expects (capabilities, request
	// sizes, the panic handler).
	Options gofuse.MountOptions

	state    *mountState
	requests *reqcount.Counts
}

// NewFileSystem builds the file system of cfg: it opens the workspace root
// (and the branch's upper directory), builds the node tree and registers
// the attribute cache's observer on cfg.Engine. It mounts nothing; cfg's
// logger is used as is (Mount adds the mountpoint to it).
func NewFileSystem(cfg Config) (*FileSystem, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("mount: %w", err)
	}
	cfg = cfg.withDefaults()
	root := cfg.Local.Root()
	rootFd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("mount: open workspace %s: %w", root, err)
	}
	rootStat, err := fstat(rootFd)
	if err != nil {
		_ = unix.Close(rootFd)
		return nil, fmt.Errorf("mount: stat workspace %s: %w", root, err)
	}
	m := &mountState{
		cfg:     cfg,
		log:     cfg.Logger,
		root:    root,
		rootFd:  rootFd,
		rootDev: rootStat.st.Dev,
		asRoot:  euidIsRoot(),
		vers:    cfg.Local.Versioner(),
		kernel:  &kernelCalls{},
	}
	m.be = wsBackend{m}
	if cfg.Branch != nil {
		bb, err := newBranchBackend(m, cfg.Branch)
		if err != nil {
			_ = unix.Close(rootFd)
			return nil, fmt.Errorf("mount: %w", err)
		}
		m.be = bb
	}
	// A branch mount resolves every workspace path from the root: its
	// invalidations follow the branch, not the workspace's renames.
	if cfg.Watched != nil && cfg.DirFDs > 0 && cfg.Branch == nil {
		m.dirs = newDirFds(rootFd, cfg.DirFDs, cfg.Watched)
	}
	rootNode := m.newNode()
	m.rootInode = rootNode.EmbeddedInode()

	entry, attr := cfg.EntryTimeout, cfg.AttrTimeout
	rootAttr := m.stableAttr(&rootStat)
	opts := &fs.Options{
		MountOptions: gofuse.MountOptions{
			AllowOther: cfg.AllowOther,
			// The kernel checks file modes against the caller: the daemon
			// itself may run as root.
			Options:              []string{"default_permissions"},
			FsName:               root,
			Name:                 "dshmount",
			DirectMount:          m.asRoot,
			Debug:                cfg.Debug,
			Logger:               slog.NewLogLogger(m.log.Handler(), slog.LevelDebug),
			IgnoreSecurityLabels: true,
			MaxBackground:        64,
			// Large requests: fewer round trips for reads and writes that
			// do reach the daemon, and a readahead window like a disk's.
			MaxWrite:     1 << 20,
			MaxReadAhead: 1 << 20,
			PanicHandler: m.panicHandler,
			// A bound writer's direct-I/O handle may be mmap'd shared:
			// its stores then reach the daemon as guarded writes.
			// The kernel asks for attributes with every listing batch
			// (READDIRPLUS, not READDIRPLUS_AUTO): the daemon decides per
			// entry which carry them (dirHandle.Lookup).
			ExtraCapabilities:    gofuse.CAP_DIRECT_IO_ALLOW_MMAP | gofuse.CAP_HANDLE_KILLPRIV_V2,
			DisableReadDirPlus:   cfg.ReaddirPlus == ReaddirPlusOff,
			EnableSymlinkCaching: cfg.CacheLinks,
		},
		// Modes are the backing modes, 0000 included: go-fuse would
		// otherwise show a null mode as 0644 (0755 for a directory), and
		// default_permissions would then let every user in.
		NullPermissions: true,
		EntryTimeout:    &entry,
		AttrTimeout:     &attr,
		NegativeTimeout: negativeTimeout(cfg.NegativeTimeout),
		Logger:          slog.NewLogLogger(m.log.Handler(), slog.LevelWarn),
		RootStableAttr:  &fs.StableAttr{Ino: rootAttr.Ino, Gen: rootAttr.Gen},
		// The bridge's calls into the kernel go to the Transport's Conn.
		ServerCallbacks: m.kernel,
	}
	cfg.Engine.AddObserver(m.xattrs.observe)
	requests := &reqcount.Counts{}
	m.releases = &releaseGate{RawFileSystem: fs.NewNodeFS(rootNode, opts)}
	return &FileSystem{
		Raw:      reqcount.Wrap(keepCallbacks{m.releases}, requests),
		Options:  opts.MountOptions,
		state:    m,
		requests: requests,
	}, nil
}

// Serve serves f at mountpoint over t and returns once the kernel has
// answered INIT; then it starts the kernel cache invalidator (cfg.Engine's
// observer and preparer). A FileSystem is served once; when Serve fails,
// f is closed.
func (f *FileSystem) Serve(t Transport, mountpoint string) (*Server, error) {
	m := f.state
	mp, err := filepath.Abs(mountpoint)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	conn, err := t.Serve(f.Raw, mp, &f.Options, m.kernel.attach)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("mount %s at %s: %w", m.root, mp, err)
	}
	mt := &Server{mountpoint: mp, fsys: f, state: m, served: conn.Done(), requests: f.requests}
	mt.inval = newInvalidator(m, m.rootInode)
	m.cfg.Engine.AddObserver(mt.inval.observe)
	m.cfg.Engine.AddPreparer(mt.inval.writeBack)
	m.log.Info("mounted", "source", m.root, "passthrough", m.cfg.Passthrough, "direct", m.asRoot,
		"entry_timeout", m.cfg.EntryTimeout, "attr_timeout", m.cfg.AttrTimeout, "negative_timeout", m.cfg.NegativeTimeout,
		"dir_cache", m.cfg.CacheDirs, "readdirplus", m.cfg.ReaddirPlus)
	return mt, nil
}

// Close releases what NewFileSystem opened (the backing root, the branch's
// upper directory, cached directory descriptors). A served file system is
// closed by its Server's Unmount instead.
func (f *FileSystem) Close() {
	m := f.state
	m.closed.Store(true)
	m.callers.forget() // closes the callers' pidfds
	m.dirs.close()
	_ = unix.Close(m.rootFd)
	if bb, ok := m.be.(*branchBackend); ok {
		bb.close()
	}
}

// panicHandler turns a panic in a FUSE handler into EIO for that request
// and a log entry, instead of a dead daemon and a hung mount.
func (m *mountState) panicHandler(v any) gofuse.Status {
	m.log.Error("panic in a FUSE handler; the request fails with EIO", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	return gofuse.EIO
}

// Wait blocks until the serve loop has exited (after Unmount, or when the
// mount was removed from outside).
func (mt *Server) Wait() { <-mt.served }

// Unmount unmounts cleanly, retrying while the mount is busy (open files,
// working directories) until ctx ends, then detaches it lazily (MNT_DETACH):
// the name disappears at once and the kernel finishes when the last user
// goes. It stops the cache invalidator and releases the backing root.
func (mt *Server) Unmount(ctx context.Context) error {
	defer mt.release()
	m := mt.state
	if mt.isServed() {
		return nil
	}
	for {
		err := mt.unmountOnce(false)
		if err == nil {
			mt.waitServed(5 * time.Second)
			m.log.Info("unmounted")
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			if mt.isServed() {
				return nil
			}
			m.log.Warn("unmount failed; detaching lazily", "err", err)
			break
		}
		select {
		case <-ctx.Done():
			m.log.Warn("mount still busy at the end of the grace period; detaching lazily")
		case <-mt.served:
			return nil
		case <-time.After(50 * time.Millisecond):
			continue
		}
		break
	}
	if err := mt.unmountOnce(true); err != nil && !mt.isServed() {
		return fmt.Errorf("unmount %s: %w", mt.mountpoint, err)
	}
	m.log.Info("detached; open files keep the old mount until they are closed")
	return nil
}

// isServed reports whether the serve loop has exited.
func (mt *Server) isServed() bool {
	select {
	case <-mt.served:
		return true
	default:
		return false
	}
}

// waitServed waits a bounded time for the serve loop to exit.
func (mt *Server) waitServed(d time.Duration) {
	select {
	case <-mt.served:
	case <-time.After(d):
	}
}

// unmountOnce tries one unmount of the mountpoint.
func (mt *Server) unmountOnce(lazy bool) error {
	return unmountPath(mt.mountpoint, lazy, mt.state.asRoot)
}

// release stops the invalidator and closes the backing root descriptor.
func (mt *Server) release() {
	mt.closeOnce.Do(func() {
		mt.state.closed.Store(true)
		if mt.inval != nil {
			mt.inval.close()
		}
		mt.fsys.Close()
	})
}

// unmountPath unmounts mp with umount2(2) as root, or fusermount3 -u.
func unmountPath(mp string, lazy, asRoot bool) error {
	if asRoot {
		flags := 0
		if lazy {
			flags = unix.MNT_DETACH
		}
		return unix.Unmount(mp, flags)
	}
	args := []string{"-u"}
	if lazy {
		args = append(args, "-z")
	}
	bin := "fusermount3"
	if _, err := exec.LookPath(bin); err != nil {
		bin = "fusermount"
	}
	out, err := exec.Command(bin, append(args, mp)...).CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if strings.Contains(msg, "busy") {
			return fmt.Errorf("%s: %s: %w", bin, msg, unix.EBUSY)
		}
		return fmt.Errorf("%s %s: %s: %w", bin, strings.Join(args, " "), msg, err)
	}
	return nil
}

// Unmount unmounts the FUSE filesystem at mountpoint from outside the daemon
// (dshmount unmount): a clean unmount, or with lazy a detach even when busy.
func Unmount(mountpoint string, lazy bool) error {
	mp, err := filepath.Abs(mountpoint)
	if err != nil {
		return fmt.Errorf("unmount %s: %w", mountpoint, err)
	}
	if err := unmountPath(mp, false, euidIsRoot()); err != nil {
		if !lazy || !errors.Is(err, unix.EBUSY) {
			if errors.Is(err, unix.EBUSY) {
				return fmt.Errorf("unmount %s: the mount is busy (open files or working directories); close them or use --lazy: %w", mp, err)
			}
			if errors.Is(err, unix.EINVAL) {
				return fmt.Errorf("unmount %s: not a mount point: %w", mp, err)
			}
			return fmt.Errorf("unmount %s: %w", mp, err)
		}
		if err := unmountPath(mp, true, euidIsRoot()); err != nil {
			return fmt.Errorf("unmount %s lazily: %w", mp, err)
		}
	}
	return nil
}

// ErrMounted reports a mountpoint that already holds a live mount.
var ErrMounted = errors.New("already a mount point")

// CleanupStale prepares mountpoint for a new mount. A mount left by a
// crashed daemon ("transport endpoint is not connected") is detached lazily;
// a live mount is an error wrapping ErrMounted; anything else (a plain or a
// missing directory) is left alone.
func CleanupStale(mountpoint string) error {
	mp, err := filepath.Abs(mountpoint)
	if err != nil {
		return fmt.Errorf("check mountpoint %s: %w", mountpoint, err)
	}
	// statfs always reaches the filesystem; a stat could be answered from
	// attributes the kernel cached before the daemon died.
	var sfs unix.Statfs_t
	err = unix.Statfs(mp, &sfs)
	var st unix.Stat_t
	if err == nil {
		err = unix.Stat(mp, &st)
	}
	switch {
	case errors.Is(err, unix.ENOTCONN) || errors.Is(err, unix.ECONNABORTED):
		if err := unmountPath(mp, true, euidIsRoot()); err != nil {
			return fmt.Errorf("%s holds a dead mount (transport endpoint is not connected) that could not be detached: %w", mp, err)
		}
		if err := unix.Stat(mp, &st); err != nil {
			return fmt.Errorf("%s after detaching its dead mount: %w", mp, err)
		}
		return nil
	case errors.Is(err, unix.ENOENT):
		return nil // nothing mounted there; mounting will say what is missing
	case err != nil:
		return fmt.Errorf("check mountpoint %s: %w", mp, err)
	}
	mounted, err := isMountPoint(mp)
	if err != nil {
		return fmt.Errorf("check mountpoint %s: %w", mp, err)
	}
	if mounted {
		return fmt.Errorf("%s: %w; unmount it first (dshmount unmount %s)", mp, ErrMounted, mp)
	}
	return nil
}

// isMountPoint reports whether mp is listed as a mount point in
// /proc/self/mountinfo.
func isMountPoint(mp string) (bool, error) {
	device, _, err := mountEntry(mp)
	return device != "", err
}
