package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"github.com/dshmount/dshmount/internal/seen"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/daemon"
	"github.com/dshmount/dshmount/internal/fuse"
	"github.com/dshmount/dshmount/internal/registry"
)

// serveConfig is every knob of `dshmount serve`. The flags map onto it and
// withStateDir() and defaults() fill what the flags left empty.
type serveConfig struct {
	Source     string        // workspace directory (canonical after resolve)
	Mountpoint string        // where the view is mounted (absolute after resolve)
	StateDir   string        // Badger database and socket directory
	Socket     string        // control socket path
	Hide       []string      // --hide globs
	ReadOnly   []string      // --read-only globs
	Unguarded  []string      // --unguarded globs: outside the guard for bound processes
	GuardGit   bool          // --guard-git: git directories under the guard too
	AllowOther bool          // other users may use the mount
	AllowUIDs  []uint32      // control socket peers besides the daemon's uid and root
	Debug      bool          // debug logs and FUSE request tracing
	EntryTO    time.Duration // kernel name cache timeout
	AttrTO     time.Duration // kernel attribute cache timeout
	NegTO      time.Duration // kernel cache timeout of missing names (0: not cached)
	// DirCache lets the kernel keep directory listings (with the watcher
	// only: every change to a directory then drops its listing).
	DirCache bool
	// ReaddirPlus is how directory listings carry attributes: auto, always
	// or off (see fuse.Config.ReaddirPlus).
	ReaddirPlus string
	Grace       time.Duration // how long shutdown waits for open files before a lazy unmount
	// Passthrough lets the kernel read and write backing files directly.
	Passthrough bool
	// CPUProfile is a file for a CPU profile of the whole run (hidden
	// flag, for performance work).
	CPUProfile string
	// MemProfile is a file for a heap profile written at shutdown (hidden
	// flag, for performance work).
	MemProfile string
	// MaxRequestBytes bounds one control request line (0: the control
	// package's default).
	MaxRequestBytes int64
	// NoSync skips the fsyncs of socket publications (--durability none).
	NoSync bool
	// Watch runs the backing-tree watcher (--watch).
	Watch bool
	// WatchMaxPending bounds the paths the watcher collects in one window
	// (--watch-max-pending; 0: the default).
	WatchMaxPending int
	// BindCgroups puts each process bound to a session (dshmount exec) in
	// a cgroup v2 of its own where the hierarchy is writable; false binds
	// by the parent chain only.
	BindCgroups bool
	// MaxConnections bounds concurrent control connections (0: default).
	MaxConnections int
	// MaxConnectionsPerUID bounds the connections of one uid other than
	// root and the daemon's (0: a quarter of MaxConnections).
	MaxConnectionsPerUID int
	// MaxPendingBytes bounds the request bytes held across connections
	// (0: default).
	MaxPendingBytes int64
	// RequestTimeout bounds how long a begun request line may take.
	RequestTimeout time.Duration
	// IdleTimeout closes connections that hold nothing after this long.
	IdleTimeout time.Duration
	// Store is where the policy records live (--store and its TLS flags).
	Store daemon.StoreConfig
	// FeedRetention and FeedMaxEntries bound the audit log, and with it
	// the change feed's history (--feed-retention, --feed-max-entries).
	FeedRetention  time.Duration
	FeedMaxEntries uint64
	// MergeCache bounds the bytes kept for merge: true (--merge-cache;
	// 0 disables it).
	MergeCache byteSize
	// FeedPruneInterval is how often the retention runs
	// (--feed-prune-interval).
	FeedPruneInterval time.Duration
	// DirFDs caps the backing directory descriptors the mount keeps with
	// the watcher (--dir-fds; 0: none); DirFDsSet says the flag was given
	// (else serve lowers it to what the descriptor limit leaves).
	DirFDs    int
	DirFDsSet bool
}

// defaultGrace is the shutdown grace period.
const defaultGrace = 5 * time.Second

// maxSocketPath is the longest path a Unix socket address holds.
const maxSocketPath = 107

// stringsFlag is a repeatable string flag.
type stringsFlag struct{ dst *[]string }

func (f stringsFlag) String() string {
	if f.dst == nil {
		return ""
	}
	return strings.Join(*f.dst, ",")
}

func (f stringsFlag) Set(v string) error { *f.dst = append(*f.dst, v); return nil }

// uidsFlag is a repeatable numeric uid flag.
type uidsFlag struct{ dst *[]uint32 }

func (f uidsFlag) String() string {
	if f.dst == nil {
		return ""
	}
	parts := make([]string, len(*f.dst))
	for i, u := range *f.dst {
		parts[i] = strconv.FormatUint(uint64(u), 10)
	}
	return strings.Join(parts, ",")
}

func (f uidsFlag) Set(v string) error {
	u, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return fmt.Errorf("not a numeric uid: %q", v)
	}
	*f.dst = append(*f.dst, uint32(u))
	return nil
}

// parseServeArgs parses `serve [flags] SOURCE MOUNTPOINT`.
func parseServeArgs(args []string, stdout, stderr io.Writer) (serveConfig, error) {
	cfg := serveConfig{Passthrough: true, BindCgroups: true}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: dshmount serve [flags] SOURCE MOUNTPOINT

Mounts a guarded view of the workspace SOURCE at MOUNTPOINT and serves the
control socket, in the foreground. Prints "ready mount=… socket=…" once the
mount works. SIGINT/SIGTERM unmount (waiting --grace for open files, then
detaching lazily).

After a crash, run the same command again: a dead mount at MOUNTPOINT is
detached, and a killed daemon of the same state that is stuck in the kernel
has its FUSE connection aborted (root) before the new one mounts.

Users and permissions: the kernel checks every access against the file's
mode, owner and group exactly as on the disk (default_permissions is always
on; a mode of 0000 stays 0000). Without --allow-other only the user running
serve may use the mount; pass --allow-other when several users share it, or
when root runs tools that switch to another uid (package managers, test
suites, sudo -u, setpriv). POSIX ACLs are not supported: the kernel decides
by the mode bits alone, so a file with an ACL is checked by its group-class
bits (the ACL mask) and its named-user and named-group entries are ignored;
do not rely on ACLs to restrict other users on the mount.

The control socket serves the daemon's uid and root. --allow-uid UID (a
root daemon only) also serves UID: its requests run with UID's own
permissions (it gets over the socket what the mount gives it, no more),
it sees and uses only the sessions it opened, and binds only its own
processes. The socket is then opened to it (0666, its directory
searchable); serve refuses to start if UID cannot reach it.

The socket's resources are bounded: --max-connections (and
--max-connections-per-uid for each other uid), --max-pending-bytes,
--request-timeout and --idle-timeout below. The descriptor limit is raised
to its hard limit at start, and serve refuses to start unless it leaves
1024 descriptors for the mount beyond what the socket may hold.

Flags:
`)
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.StateDir, "state", "", "state directory (default $XDG_STATE_HOME/dshmount/NAME-HASH)")
	fs.StringVar(&cfg.Socket, "socket", "", "control socket path (default STATE/run/control.sock)")
	fs.Var(stringsFlag{&cfg.Hide}, "hide", "glob of paths that do not exist in the view (repeatable)")
	fs.Var(stringsFlag{&cfg.ReadOnly}, "read-only", "glob of paths that cannot change (repeatable)")
	fs.Var(stringsFlag{&cfg.Unguarded}, "unguarded", "glob of paths processes bound to a session change without the guard, e.g. 'node_modules/**' (repeatable; matched like --hide; changes are still recorded)")
	fs.BoolVar(&cfg.GuardGit, "guard-git", false, "guard repositories' git directories too (by default a bound process's changes inside one, except hooks/, config and info/, are recorded but not guarded)")
	fs.BoolVar(&cfg.AllowOther, "allow-other", false, "let other users use the mount: needed for several users, or root running tools that switch uid (default_permissions is always on)")
	fs.Var(uidsFlag{&cfg.AllowUIDs}, "allow-uid", "uid allowed on the control socket besides yours and root (repeatable; root daemon only). "+
		"Its requests run with its own permissions and it sees only its own sessions; the socket is opened to it (0666, its directory searchable), "+
		"and serve refuses to start if it cannot reach the socket (pass a --socket it can reach)")
	fs.BoolVar(&cfg.Watch, "watch", true, "watch the workspace directory: a change made there directly (git checkout, an editor on the real path) shows through the mount at once and is audited with channel external; needs one inotify watch per directory (raised as root, else the error names the sysctl); --watch=false turns it off (out-of-band changes then show after the cache timeouts and are not audited)")
	fs.IntVar(&cfg.WatchMaxPending, "watch-max-pending", daemon.DefaultWatchMaxPending, "paths the watcher collects in one 20 ms window; beyond it (or when the kernel's event queue overflows) it rescans the workspace directory and records what changed")
	fs.BoolVar(&cfg.Debug, "debug", false, "debug logs, including every FUSE request")
	fs.DurationVar(&cfg.EntryTO, "entry-timeout", 0,
		"how long the kernel caches names (default "+fuse.WatchedTimeout.String()+" with --watch, which drops every changed name at once; "+
			fuse.DefaultEntryTimeout.String()+" without)")
	fs.DurationVar(&cfg.AttrTO, "attr-timeout", 0,
		"how long the kernel caches attributes (default "+fuse.WatchedTimeout.String()+" with --watch; "+fuse.DefaultAttrTimeout.String()+" without)")
	fs.DurationVar(&cfg.NegTO, "negative-timeout", 0,
		"how long the kernel caches that a name does not exist (default: the entry timeout with --watch, not at all without)")
	fs.BoolVar(&cfg.DirCache, "dir-cache", true, "let the kernel cache directory listings (with --watch only: every change to a directory, from the mount, the socket or outside, drops its listing)")
	fs.StringVar(&cfg.ReaddirPlus, "readdirplus", "auto", "directory listings with attributes: auto (for the files the kernel holds and a listing's first entries), always (every entry), or off")
	fs.DurationVar(&cfg.Grace, "grace", defaultGrace, "on shutdown, how long to wait for open files before a lazy unmount")
	fs.BoolVar(&cfg.Passthrough, "passthrough", true, "let the kernel read and write backing files directly (root, kernel ≥ 6.9)")
	fs.BoolVar(&cfg.BindCgroups, "bind-cgroups", true,
		"keep bound processes in a cgroup v2 per dshmount exec (where writable), so no descendant can shed its session; false: by the parent chain only")
	fs.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of the daemon to `FILE` (go tool pprof), from start to exit")
	fs.StringVar(&cfg.MemProfile, "memprofile", "", "write a heap profile of the daemon to `FILE` (go tool pprof) when it shuts down")
	fs.Int64Var(&cfg.MaxRequestBytes, "max-request-bytes", control.DefaultMaxRequestBytes,
		"largest control request line the daemon accepts, in bytes (longer lines are refused without being buffered)")
	fs.IntVar(&cfg.MaxConnections, "max-connections", control.DefaultMaxConnections,
		"most control connections served at once; the next is answered with an error and closed")
	fs.IntVar(&cfg.MaxConnectionsPerUID, "max-connections-per-uid", 0,
		"most control connections of one uid other than root and the daemon's; those uids together also leave this many for root and the daemon's uid (0: a quarter of --max-connections)")
	fs.Int64Var(&cfg.MaxPendingBytes, "max-pending-bytes", control.DefaultMaxPendingBytes,
		"most bytes of unanswered request lines the daemon holds across all connections; a line past it is refused and dropped (at least --max-request-bytes)")
	fs.DurationVar(&cfg.RequestTimeout, "request-timeout", control.DefaultRequestTimeout,
		"how long a request line may take to arrive once begun (and a response to be taken) before the connection is closed")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", control.DefaultIdleTimeout,
		"close a connection that sent nothing for this long and holds no session it opened, no watch and no request")
	addStoreFlags(fs, &cfg.Store)
	fs.DurationVar(&cfg.FeedRetention, "feed-retention", daemon.DefaultFeedRetention,
		"keep audit entries (fs.log, and the changes 'watch --since' replays) this long; older ones are pruned in the background and a since before them is FS_CHANGES_LOST (0: no age limit)")
	fs.Uint64Var(&cfg.FeedMaxEntries, "feed-max-entries", daemon.DefaultFeedMaxEntries,
		"keep at most this many of the newest audit entries (0: no count limit)")
	cfg.MergeCache = seen.DefaultMaxBytes
	fs.Var(&cfg.MergeCache, "merge-cache",
		"keep the bytes of files read over the socket and MCP (text up to 8 MiB), up to this size (e.g. 256MiB, 1GiB; least recently used dropped first), so that a stale change with merge: true can be merged; 0 disables it")
	fs.DurationVar(&cfg.FeedPruneInterval, "feed-prune-interval", daemon.DefaultFeedPruneInterval,
		"how often old audit entries are pruned (--feed-retention, --feed-max-entries); also once at start")
	fs.IntVar(&cfg.DirFDs, "dir-fds", fuse.DefaultDirFDs,
		"with --watch, backing directory descriptors the mount keeps open, so a request below a kept directory skips resolving its path (least recently used closed beyond it; 0: none); counted in the descriptor limit")
	durability := fs.String("durability", "fsync", "agent writes: fsync (file and directory, survives a crash) or none (atomic, not durable; faster)")
	if err := parseFlags(fs, stdio{out: stdout, err: stderr}, func() error { return fs.Parse(args) }); err != nil {
		return serveConfig{}, err
	}
	cfg.cacheDefaults(fs)
	if cfg.DirFDs < 0 {
		return serveConfig{}, fmt.Errorf("--dir-fds must not be negative (0: none), not %d", cfg.DirFDs)
	}
	if err := fuse.ReaddirPlusMode(cfg.ReaddirPlus).Validate(); err != nil {
		return serveConfig{}, fmt.Errorf("--readdirplus: %w", err)
	}
	if cfg.MaxRequestBytes <= 0 {
		return serveConfig{}, fmt.Errorf("--max-request-bytes must be positive, not %d", cfg.MaxRequestBytes)
	}
	switch {
	case cfg.MaxConnections <= 0:
		return serveConfig{}, fmt.Errorf("--max-connections must be positive, not %d", cfg.MaxConnections)
	case cfg.MaxConnectionsPerUID < 0 || cfg.MaxConnectionsPerUID > cfg.MaxConnections:
		return serveConfig{}, fmt.Errorf("--max-connections-per-uid must be between 1 and --max-connections (%d), or 0 for a quarter of it; not %d", cfg.MaxConnections, cfg.MaxConnectionsPerUID)
	case cfg.MaxPendingBytes < cfg.MaxRequestBytes:
		return serveConfig{}, fmt.Errorf("--max-pending-bytes (%d) must be at least --max-request-bytes (%d)", cfg.MaxPendingBytes, cfg.MaxRequestBytes)
	case cfg.RequestTimeout <= 0:
		return serveConfig{}, fmt.Errorf("--request-timeout must be positive, not %s", cfg.RequestTimeout)
	case cfg.IdleTimeout <= 0:
		return serveConfig{}, fmt.Errorf("--idle-timeout must be positive, not %s", cfg.IdleTimeout)
	case cfg.FeedPruneInterval <= 0:
		return serveConfig{}, fmt.Errorf("--feed-prune-interval must be positive, not %s", cfg.FeedPruneInterval)
	case cfg.FeedRetention < 0:
		return serveConfig{}, fmt.Errorf("--feed-retention must not be negative (0: no age limit), not %s", cfg.FeedRetention)
	}
	if err := checkAllowUIDs(os.Geteuid(), cfg.AllowUIDs); err != nil {
		return serveConfig{}, err
	}
	switch *durability {
	case "fsync":
	case "none":
		cfg.NoSync = true
	default:
		return serveConfig{}, fmt.Errorf("--durability must be fsync or none, not %q", *durability)
	}
	if err := cfg.Store.Check(); err != nil {
		return serveConfig{}, err
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return serveConfig{}, fmt.Errorf("serve needs SOURCE and MOUNTPOINT, got %d arguments", fs.NArg())
	}
	cfg.Source, cfg.Mountpoint = fs.Arg(0), fs.Arg(1)
	return cfg, nil
}

// resolve makes the paths absolute and canonical and fills the defaults. It
// refuses a mountpoint that is the workspace, inside it, or above it: the
// daemon works on the backing directory by path and must never reach its
// own mountpoint.
func (c serveConfig) resolve(log *slog.Logger) (serveConfig, error) {
	src, err := filepath.Abs(c.Source)
	if err != nil {
		return c, fmt.Errorf("source %s: %w", c.Source, err)
	}
	if src, err = filepath.EvalSymlinks(src); err != nil {
		return c, fmt.Errorf("source %s: %w", c.Source, err)
	}
	if st, err := os.Stat(src); err != nil {
		return c, fmt.Errorf("source %s: %w", c.Source, err)
	} else if !st.IsDir() {
		return c, fmt.Errorf("source %s is not a directory", c.Source)
	}
	c.Source = src

	mp, err := filepath.Abs(c.Mountpoint)
	if err != nil {
		return c, fmt.Errorf("mountpoint %s: %w", c.Mountpoint, err)
	}
	// A dead mount left by a crashed daemon cannot even be stat'ed; clear it
	// before resolving the path. A killed daemon stuck in the kernel keeps
	// its mount hung instead of dead: abort its connection first.
	stateDefaulted := c.StateDir == ""
	if c, err = c.withStateDir(); err != nil {
		return c, err
	}
	if err := recoverPredecessor(c.StateDir, log); err != nil {
		return c, err
	}
	if err := fuse.CleanupStale(mp); err != nil {
		return c, err
	}
	if mp, err = filepath.EvalSymlinks(mp); err != nil {
		return c, fmt.Errorf("mountpoint %s: %w; create the directory first", c.Mountpoint, err)
	}
	if st, err := os.Stat(mp); err != nil {
		return c, fmt.Errorf("mountpoint %s: %w", c.Mountpoint, err)
	} else if !st.IsDir() {
		return c, fmt.Errorf("mountpoint %s is not a directory", c.Mountpoint)
	}
	c.Mountpoint = mp
	switch {
	case src == mp:
		return c, errors.New("SOURCE and MOUNTPOINT are the same directory; mount the view somewhere else")
	case within(mp, src):
		return c, fmt.Errorf("MOUNTPOINT %s is inside SOURCE %s; the daemon must never reach its own mount, choose a mountpoint outside the workspace", mp, src)
	case within(src, mp):
		return c, fmt.Errorf("SOURCE %s is inside MOUNTPOINT %s; the mount would hide the workspace from the daemon, choose another mountpoint", src, mp)
	}
	if c, err = c.defaults(); err != nil {
		return c, err
	}
	return c, checkOwnDirsOutside(c, registry.DefaultDir(), stateDefaulted)
}

// withStateDir fills the default state directory (one per source) and
// makes it absolute.
func (c serveConfig) withStateDir() (serveConfig, error) {
	if c.StateDir == "" {
		base := os.Getenv("XDG_STATE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return c, fmt.Errorf("no --state given and no home directory: %w", err)
			}
			base = filepath.Join(home, ".local", "state")
		}
		sum := sha256.Sum256([]byte(c.Source))
		c.StateDir = filepath.Join(base, "dshmount", filepath.Base(c.Source)+"-"+hex.EncodeToString(sum[:6]))
	}
	st, err := filepath.Abs(c.StateDir)
	if err != nil {
		return c, fmt.Errorf("state directory %s: %w", c.StateDir, err)
	}
	c.StateDir = st
	return c, nil
}

// defaults fills the socket path (checkOwnDirsOutside checks where it
// and the state directory are).
func (c serveConfig) defaults() (serveConfig, error) {
	if c.Socket == "" {
		c.Socket = filepath.Join(c.StateDir, "run", "control.sock")
	}
	var err error
	if c.Socket, err = filepath.Abs(c.Socket); err != nil {
		return c, fmt.Errorf("socket %s: %w", c.Socket, err)
	}
	if len(c.Socket) > maxSocketPath {
		return c, fmt.Errorf("socket path %s is %d bytes, longer than a Unix socket address holds (%d); pass a shorter --socket",
			c.Socket, len(c.Socket), maxSocketPath)
	}
	if c.Grace < 0 {
		c.Grace = 0
	}
	return c, nil
}

// within reports whether p is strictly below dir (both clean and absolute).
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../")
}

// cacheDefaults sets the kernel cache timeouts the flags left unset: with
// the backing-tree watcher every change reaches the kernel's caches at once
// (mount changes are the kernel's own, socket and outside changes are
// invalidated), so names, attributes and missing names are cached for
// fuse.WatchedTimeout; without it, for the short defaults and missing names
// not at all.
func (c *serveConfig) cacheDefaults(fs *flag.FlagSet) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if c.Watch {
		if !set["entry-timeout"] {
			c.EntryTO = fuse.WatchedTimeout
		}
		if !set["attr-timeout"] {
			c.AttrTO = fuse.WatchedTimeout
		}
		if !set["negative-timeout"] {
			c.NegTO = c.EntryTO
		}
	}
	if !c.Watch {
		if !set["entry-timeout"] {
			c.EntryTO = fuse.DefaultEntryTimeout
		}
		if !set["attr-timeout"] {
			c.AttrTO = fuse.DefaultAttrTimeout
		}
		c.DirCache = false
		c.DirFDs = 0 // nothing would report a directory moved out of band
	}
	c.DirFDsSet = set["dir-fds"]
}

// byteSize is a flag value in bytes: a number with an optional KiB, MiB
// or GiB suffix.
type byteSize int64

// String formats the size in bytes.
func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

// Set parses a size such as 268435456, 256MiB or 1GiB.
func (b *byteSize) Set(s string) error {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = n, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("a size in bytes, KiB, MiB or GiB (e.g. 256MiB), not %q", s)
	}
	*b = byteSize(n * mult)
	return nil
}
