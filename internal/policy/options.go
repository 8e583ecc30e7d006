package policy

import (
	"log/slog"
	"os"
	"strings"
	"time"
)

// Options configures Open. Build them with DefaultOptions and the With*
// setters; every knob is named and defaulted here.
//
// Memory: the defaults are sized for a 2-core, small-memory daemon. Badger
// holds at most NumMemtables memtables of MemTableSize each (2 × 4 MiB), a
// block cache of BlockCacheSize (8 MiB) and an index cache of
// IndexCacheSize (4 MiB); tables below level 0 are BaseTableSize (1 MiB),
// which bounds the buffers a compaction holds; the value log file
// (ValueLogFileSize, 64 MiB) is memory-mapped and only its touched pages
// count. The store adds bounded caches of flushed records and digests
// (CacheEntries each, about 150 bytes per entry) plus unflushed writes.
// Measured with dshmount serve: 17 MiB RSS idle; 183 MiB after 100,000 files
// were created through the mount unbound, 242–268 MiB bound to a session, of
// which a compaction's table builders held about 72 MB when the fill ended (a
// builder holds a table's uncompressed blocks and their compressed copies
// until the table is done, and its capacity counts compressed bytes).
type Options struct {
	// MemTableSize is the size of one Badger memtable (default 4 MiB).
	MemTableSize int64
	// NumMemtables bounds the memtables kept in memory (default 2).
	NumMemtables int
	// BlockCacheSize is Badger's block cache (default 8 MiB).
	BlockCacheSize int64
	// IndexCacheSize is Badger's index cache (default 4 MiB).
	IndexCacheSize int64
	// BaseTableSize is the size of Badger's tables below level 0 (default
	// 1 MiB); a compaction holds about twice this per table it builds.
	BaseTableSize int64
	// NumCompactors is the number of Badger compaction goroutines (default 2).
	NumCompactors int
	// ValueLogFileSize is the size of one value log file (default 64 MiB).
	ValueLogFileSize int64
	// SessionTTL is how long a session may stay idle before CollectIdle and
	// the janitor close it (default 24 h; zero or negative: never).
	SessionTTL time.Duration
	// JanitorInterval is how often the janitor collects idle sessions
	// (default 1 min; zero or negative: no janitor).
	JanitorInterval time.Duration
	// FlushInterval is how often buffered writes reach Badger (default 25 ms).
	FlushInterval time.Duration
	// FlushEntries flushes early once this many writes are buffered
	// (default 4096).
	FlushEntries int
	// CacheEntries bounds the records (observations, sessions, last
	// writers) and, separately, the cached digests kept in memory once
	// flushed, about 150 bytes each (default 32768, about 5 MiB each).
	// Unflushed writes are always kept.
	CacheEntries int
	// LeaseBandwidth is how many audit sequence numbers are
	// reserved on disk ahead of use; a new lease is reserved in the
	// background when half is used (default 10000).
	LeaseBandwidth uint64
	// RefusalInterval rate-limits the mount's refusal audit entries (each
	// socket refusal is written): at most one per
	// (session, path, code) per interval; the refusals left out are counted
	// on the next entry of that key (default 1 s; negative: every refusal
	// is recorded). The kernel retries an ESTALE open, and a looping
	// program may retry forever.
	RefusalInterval time.Duration
	// RefusalKeys bounds the keys the rate limiter remembers (default
	// 4096); when full, the key whose last entry is the oldest is
	// forgotten (a count of refusals left out for it is then lost).
	RefusalKeys int
	// WorkspaceRoot is the workspace directory's real path on this host.
	// Target keys below it are stored relative to it, so daemons that see
	// one shared workspace under different paths share its records
	// (default "": keys are stored as they are).
	WorkspaceRoot string
	// Host names this daemon's host on a shared engine: process bindings
	// (pids, cgroups) mean something only there and are kept under it
	// (default: the hostname).
	Host string
	// ClaimTTL is how long a claim on a file's version record holds on a
	// shared engine before another daemon may take it over: a daemon
	// killed or paused mid-mutation blocks that file for at most this long
	// (default 30 s).
	ClaimTTL time.Duration
	// ClaimWait is how long a mutation waits for another daemon's claim on
	// its file before it is refused with FS_IO_ERROR (default 10 s).
	ClaimWait time.Duration
	// Logger receives the store's logs and Badger's warnings and errors
	// (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock (default time.Now); tests replace it.
	Now func() time.Time
}

// DefaultOptions returns the defaults described on Options.
func DefaultOptions() Options {
	return Options{
		MemTableSize:     4 << 20,
		NumMemtables:     2,
		BlockCacheSize:   8 << 20,
		IndexCacheSize:   4 << 20,
		BaseTableSize:    1 << 20,
		NumCompactors:    2,
		ValueLogFileSize: 64 << 20,
		SessionTTL:       24 * time.Hour,
		JanitorInterval:  time.Minute,
		FlushInterval:    25 * time.Millisecond,
		FlushEntries:     4096,
		CacheEntries:     1 << 15,
		LeaseBandwidth:   10000,
		RefusalInterval:  time.Second,
		RefusalKeys:      4096,
		ClaimTTL:         30 * time.Second,
		ClaimWait:        10 * time.Second,
		Logger:           slog.Default(),
		Now:              time.Now,
	}
}

// WithMemTableSize sets MemTableSize.
func (o Options) WithMemTableSize(v int64) Options { o.MemTableSize = v; return o }

// WithNumMemtables sets NumMemtables.
func (o Options) WithNumMemtables(v int) Options { o.NumMemtables = v; return o }

// WithBlockCacheSize sets BlockCacheSize.
func (o Options) WithBlockCacheSize(v int64) Options { o.BlockCacheSize = v; return o }

// WithIndexCacheSize sets IndexCacheSize.
func (o Options) WithIndexCacheSize(v int64) Options { o.IndexCacheSize = v; return o }

// WithBaseTableSize sets BaseTableSize.
func (o Options) WithBaseTableSize(v int64) Options { o.BaseTableSize = v; return o }

// WithNumCompactors sets NumCompactors.
func (o Options) WithNumCompactors(v int) Options { o.NumCompactors = v; return o }

// WithValueLogFileSize sets ValueLogFileSize.
func (o Options) WithValueLogFileSize(v int64) Options { o.ValueLogFileSize = v; return o }

// WithSessionTTL sets SessionTTL.
func (o Options) WithSessionTTL(v time.Duration) Options { o.SessionTTL = v; return o }

// WithJanitorInterval sets JanitorInterval.
func (o Options) WithJanitorInterval(v time.Duration) Options { o.JanitorInterval = v; return o }

// WithFlushInterval sets FlushInterval.
func (o Options) WithFlushInterval(v time.Duration) Options { o.FlushInterval = v; return o }

// WithFlushEntries sets FlushEntries.
func (o Options) WithFlushEntries(v int) Options { o.FlushEntries = v; return o }

// WithCacheEntries sets CacheEntries.
func (o Options) WithCacheEntries(v int) Options { o.CacheEntries = v; return o }

// WithLeaseBandwidth sets LeaseBandwidth.
func (o Options) WithLeaseBandwidth(v uint64) Options { o.LeaseBandwidth = v; return o }

// WithRefusalInterval sets RefusalInterval.
func (o Options) WithRefusalInterval(v time.Duration) Options { o.RefusalInterval = v; return o }

// WithRefusalKeys sets RefusalKeys.
func (o Options) WithRefusalKeys(v int) Options { o.RefusalKeys = v; return o }

// WithWorkspaceRoot sets WorkspaceRoot.
func (o Options) WithWorkspaceRoot(v string) Options { o.WorkspaceRoot = v; return o }

// WithHost sets Host.
func (o Options) WithHost(v string) Options { o.Host = v; return o }

// WithClaimTTL sets ClaimTTL.
func (o Options) WithClaimTTL(v time.Duration) Options { o.ClaimTTL = v; return o }

// WithClaimWait sets ClaimWait.
func (o Options) WithClaimWait(v time.Duration) Options { o.ClaimWait = v; return o }

// WithLogger sets Logger.
func (o Options) WithLogger(v *slog.Logger) Options { o.Logger = v; return o }

// WithNow sets the clock.
func (o Options) WithNow(v func() time.Time) Options { o.Now = v; return o }

// normalized fills zero fields with defaults.
// Normalized is o with every unset field at its default.
func (o Options) Normalized() Options { return o.normalized() }

func (o Options) normalized() Options {
	d := DefaultOptions()
	if o.MemTableSize <= 0 {
		o.MemTableSize = d.MemTableSize
	}
	if o.NumMemtables <= 0 {
		o.NumMemtables = d.NumMemtables
	}
	if o.BlockCacheSize <= 0 {
		o.BlockCacheSize = d.BlockCacheSize
	}
	if o.IndexCacheSize < 0 {
		o.IndexCacheSize = 0
	}
	if o.BaseTableSize <= 0 {
		o.BaseTableSize = d.BaseTableSize
	}
	if o.NumCompactors < 2 {
		o.NumCompactors = d.NumCompactors // Badger needs at least two
	}
	if o.ValueLogFileSize <= 0 {
		o.ValueLogFileSize = d.ValueLogFileSize
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = d.FlushInterval
	}
	if o.FlushEntries <= 0 {
		o.FlushEntries = d.FlushEntries
	}
	if o.CacheEntries <= 0 {
		o.CacheEntries = d.CacheEntries
	}
	if o.LeaseBandwidth == 0 {
		o.LeaseBandwidth = d.LeaseBandwidth
	}
	if o.RefusalInterval == 0 {
		o.RefusalInterval = d.RefusalInterval
	}
	if o.RefusalKeys <= 0 {
		o.RefusalKeys = d.RefusalKeys
	}
	if o.ClaimTTL <= 0 {
		o.ClaimTTL = d.ClaimTTL
	}
	if o.ClaimWait <= 0 {
		o.ClaimWait = d.ClaimWait
	}
	if o.Host == "" {
		o.Host, _ = os.Hostname()
	}
	o.WorkspaceRoot = strings.TrimSuffix(o.WorkspaceRoot, "/")
	if o.Logger == nil {
		o.Logger = d.Logger
	}
	if o.Now == nil {
		o.Now = d.Now
	}
	return o
}
