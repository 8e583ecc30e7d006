package fuse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/policy/procbind"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/version"
	"github.com/dshmount/dshmount/internal/viewrules"
)

// Default kernel cache timeouts. Every change made through the mount is
// seen by the kernel and every change made through the control socket is
// invalidated at once (see invalidate.go); only out-of-band changes to the
// backing directory (git checkout there, another program) wait for the
// timeout, so it bounds how long the mount may show their old state.
const (
	DefaultEntryTimeout = 10 * time.Second
	DefaultAttrTimeout  = 10 * time.Second
)

// WatchedTimeout is the kernel cache timeout (names, attributes, missing
// names) when the backing tree is watched: then every change reaches the
// kernel's caches at once, so the timeout only bounds what no watcher sees.
// That is a store through a shared mmap of a backing file by a process
// outside the mount (inotify reports no event for it), a change made on
// another host of a network filesystem, and a change inside a directory
// the watcher could not watch (it logs that).
const WatchedTimeout = time.Hour

// ReaddirPlusMode says how directory listings carry attributes.
type ReaddirPlusMode string

// ReaddirPlus modes.
const (
	// ReaddirPlusAuto: a listing carries attributes for the entries the
	// kernel already holds (a stat after it costs no GETATTR, although the
	// kernel dropped a written file's size and times) and for its first
	// entries (a cold ls -l); the others go as names only, so a plain
	// listing (find, ls) of a large directory costs no lookup per entry
	// (dirHandle.Lookup).
	ReaddirPlusAuto ReaddirPlusMode = "auto"
	// ReaddirPlusAlways: every entry carries attributes (a lookup per
	// entry in the daemon).
	ReaddirPlusAlways ReaddirPlusMode = "always"
	// ReaddirPlusOff: names only; each name is looked up when used.
	ReaddirPlusOff ReaddirPlusMode = "off"
)

// Validate reports an unknown mode ("" is ReaddirPlusAuto).
func (r ReaddirPlusMode) Validate() error {
	switch r {
	case "", ReaddirPlusAuto, ReaddirPlusAlways, ReaddirPlusOff:
		return nil
	}
	return fmt.Errorf("unknown readdirplus mode %q (auto, always or off)", string(r))
}

// Bindings maps a calling pid to the session it acts for;
// *procbind.Registry implements it.
type Bindings interface {
	SessionOf(pid int) (policy.SessionID, bool)
}

// StrictBindings are Bindings that also tell whether the binding that
// answers is strict (exec --strict: its processes read before every
// write); *procbind.Registry implements it.
type StrictBindings interface {
	Binding(pid int) (session policy.SessionID, strict, ok bool)
}

var (
	_ Bindings       = (*procbind.Registry)(nil)
	_ StrictBindings = (*procbind.Registry)(nil)
)

// Guard is what the mount asks of the guard: one method per decision or
// record a request needs. *policy.Engine implements it; tests give a fake.
type Guard interface {
	// CheckMountFile decides a change of an existing file.
	CheckMountFile(a policy.Actor, op policy.MutationOp, t provider.Target, f policy.FileNow) error
	// CheckMountCreate decides a create (current: what is there now).
	CheckMountCreate(a policy.Actor, op policy.MutationOp, t provider.Target, current *provider.Version) error
	// CheckMountBelow decides a change that carries the files below a
	// directory (a directory rename or removal).
	CheckMountBelow(a policy.Actor, op policy.MutationOp, t provider.Target, f policy.FileNow) error
	// OutsideGuard reports a target the guard does not cover for a.
	OutsideGuard(a policy.Actor, t provider.Target) bool
	// Zones are the parts of the workspace outside the guard (git
	// directories, --unguarded); the mount teaches GitDirs what .git files
	// point to.
	Zones() policy.Zones
	// ObserveMount records what a reads.
	ObserveMount(a policy.Actor, t provider.Target, obs policy.Observation) error
	// RecordMount records a change made through the mount.
	RecordMount(ctx context.Context, a policy.Actor, op policy.MutationOp, t provider.Target, before, after provider.Version, to *provider.Target) error
	// KeepMount carries a's observation over a metadata-only change.
	KeepMount(a policy.Actor, t provider.Target, before, after provider.Version) error
	// CopyMount and CarryMount carry observations over a link and a
	// rename.
	CopyMount(a policy.Actor, from, to provider.Target) error
	CarryMount(a policy.Actor, from, to provider.Target) error
	// HoldOwn marks t as being changed by the daemon until release.
	HoldOwn(t provider.Target) (release func())
	// Changing marks ts as being changed by one mount operation until
	// done (called after the operation's record).
	Changing(ts ...provider.Target) (done func())
	// AuditRefusal records a refused request (false: not recorded).
	AuditRefusal(a policy.Actor, op policy.MutationOp, t provider.Target, err error) bool
	// AddObserver and AddPreparer register the mount's cache keepers.
	AddObserver(o policy.Observer)
	AddPreparer(p policy.Preparer)
	// Flush writes the records out (a file's fsync waits for them).
	Flush() error
}

// Rules are the view's hide and read-only rules (*viewrules.View).
type Rules interface {
	Access(rel string) viewrules.Access
	AccessBelow(rel string) viewrules.Access
}

// Workspace is the backing directory (*local.FS implements it).
type Workspace interface {
	Root() string
	TargetForRel(rel string) provider.Target
	Lock(ctx context.Context, keys ...provider.Key) (func(), error)
	Versioner() *version.Versioner
}

// Config is everything a mount needs.
type Config struct {
	Local  Workspace      // the backing directory; required
	View   Rules          // hide / read-only rules; required
	Engine Guard          // guards, versions, audit; required
	Branch *branch.Branch // nil: serve the workspace (Local); else serve this branch over it
	// Commits, when set, makes opens of files and directories a running
	// branch commit or atomic patch changes wait until it has ended, so no
	// one reading through the mount sees it half applied.
	Commits CommitWaiter
	// Bindings maps callers to sessions; nil: every caller is unbound.
	Bindings Bindings
	Logger   *slog.Logger // nil: slog.Default()
	// Debug logs every FUSE request (go-fuse's debug output, at debug level).
	Debug bool
	// AllowOther lets other users use the mount (allow_other; the kernel
	// still checks file modes: default_permissions is always on).
	AllowOther bool
	// EntryTimeout and AttrTimeout bound how long the kernel caches names
	// and attributes; zero means the defaults above, negative means none.
	EntryTimeout, AttrTimeout time.Duration
	// NegativeTimeout is how long the kernel caches that a name does not
	// exist (zero: not cached). A name created through the socket or out of
	// band is dropped from that cache at once (the invalidator), so this is
	// safe for long only while the backing tree is watched.
	NegativeTimeout time.Duration
	// CacheDirs lets the kernel keep directory listings (FOPEN_CACHE_DIR).
	// The kernel drops a listing when the mount changes the directory; the
	// invalidator drops it on every socket or out-of-band change, so this
	// is exact only while the backing tree is watched.
	CacheDirs bool
	// CacheLinks lets the kernel keep symbolic link targets; like
	// CacheDirs, exact only while the backing tree is watched (a link
	// retargeted out of band is a new inode, or its pages are dropped).
	CacheLinks bool
	// ReaddirPlus is how listings carry attributes ("": ReaddirPlusAuto).
	ReaddirPlus ReaddirPlusMode
	// Passthrough offers the kernel the backing file of each open (kernel
	// ≥ 6.9, as root): reads and writes then bypass the daemon. Guards do not
	// depend on it (they are decided at open, setattr, rename, unlink and
	// release); it is switchable so tests can cover both paths.
	Passthrough bool
	// Watched reports whether the backing-tree watcher is running (every
	// out-of-band rename or delete reaches the engine's observers). Only
	// then does the mount keep directory descriptors (DirFDs); nil: never.
	Watched func() bool
	// DirFDs caps the backing directory descriptors the mount keeps open
	// while watched (zero: DefaultDirFDs; negative: none, every request
	// resolves its directory from the root).
	DirFDs int
}

// withDefaults fills the zero fields; it is the one place defaults live.
func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if r, ok := c.Bindings.(*procbind.Registry); ok && r == nil {
		c.Bindings = nil // a nil registry in the interface: nobody is bound
	}
	if c.EntryTimeout == 0 {
		c.EntryTimeout = DefaultEntryTimeout
	}
	if c.AttrTimeout == 0 {
		c.AttrTimeout = DefaultAttrTimeout
	}
	if c.EntryTimeout < 0 {
		c.EntryTimeout = 0
	}
	if c.AttrTimeout < 0 {
		c.AttrTimeout = 0
	}
	if c.NegativeTimeout < 0 {
		c.NegativeTimeout = 0
	}
	if c.DirFDs == 0 {
		c.DirFDs = DefaultDirFDs
	}
	if c.DirFDs < 0 {
		c.DirFDs = 0
	}
	if c.ReaddirPlus == "" {
		c.ReaddirPlus = ReaddirPlusAuto
	}
	return c
}

// validate reports a missing required field.
func (c Config) validate() error {
	var errs []error
	if err := c.ReaddirPlus.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Local == nil {
		errs = append(errs, errors.New("Config.Local is required"))
	}
	if c.View == nil {
		errs = append(errs, errors.New("Config.View is required"))
	}
	if c.Engine == nil {
		errs = append(errs, errors.New("Config.Engine is required"))
	}
	if c.Branch != nil && c.Local != nil && filepath.Clean(c.Branch.Root()) != filepath.Clean(c.Local.Root()) {
		errs = append(errs, fmt.Errorf("Config.Branch is a branch of %s, not of Config.Local (%s)", c.Branch.Root(), c.Local.Root()))
	}
	return errors.Join(errs...)
}

// CommitWaiter is what a mount waits on before an open (*branch.Manager).
type CommitWaiter interface {
	// AwaitCommit returns once no running commit changes the
	// workspace-relative path rel or an entry of the directory rel, or
	// with ctx's error.
	AwaitCommit(ctx context.Context, rel string) error
}

// The daemon's implementations of the mount's seams.
var (
	_ Guard = (*policy.Engine)(nil)
	_ Rules = (*viewrules.View)(nil)
)
