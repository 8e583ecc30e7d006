package policy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy/kv/badgerkv"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/patch"
)

func quietOptions() Options {
	return DefaultOptions().WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// openDir opens a store on Badger under dir/db (what localstore.Open does,
// which policy's own tests cannot import).
func openDir(dir string, opts Options) (*Store, error) {
	o := opts.normalized()
	db, err := badgerkv.Open(filepath.Join(dir, "db"), badgerkv.Config{
		MemTableSize: o.MemTableSize, NumMemtables: o.NumMemtables, BlockCacheSize: o.BlockCacheSize,
		IndexCacheSize: o.IndexCacheSize, BaseTableSize: o.BaseTableSize, NumCompactors: o.NumCompactors,
		ValueLogFileSize: o.ValueLogFileSize, Logger: o.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("open policy store in %s: %w", dir, err)
	}
	return Open(db, dir, opts)
}

// openStore opens a store in dir and closes it when the test ends (a second
// Close is harmless).
func openStore(t testing.TB, dir string, opts Options) *Store {
	t.Helper()
	s, err := openDir(dir, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newTestEngine(t testing.TB) (*Engine, *fakeFS) {
	t.Helper()
	s := openStore(t, t.TempDir(), quietOptions())
	fs := newFakeFS()
	return NewEngine(s, fs), fs
}

func openSession(t testing.TB, s *Store) Actor {
	t.Helper()
	sess, err := s.OpenSession("test")
	require.NoError(t, err)
	return Actor{Session: sess.ID, Channel: ChannelSocket, UID: 1000}
}

// openStrictSession opens a strict session (read before every write, on
// the mount too) and returns a mount actor of it.
func openStrictSession(t testing.TB, s *Store) Actor {
	t.Helper()
	sess, err := s.OpenSessionWith(SessionSpec{Name: "strict", Strict: true})
	require.NoError(t, err)
	return Actor{Session: sess.ID, Channel: ChannelMount, UID: 1000}
}

// manualClock is a clock tests move by hand.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// guardRecorder wraps a FileSystem and remembers the guard of the last
// mutation it was asked to perform.
type guardRecorder struct {
	provider.FileSystem
	mu      sync.Mutex
	write   *provider.WriteIntent
	version *provider.VersionGuard
	calls   int
}

func (g *guardRecorder) last() (*provider.WriteIntent, *provider.VersionGuard, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.write, g.version, g.calls
}

func (g *guardRecorder) note(w *provider.WriteIntent, v *provider.VersionGuard) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.write, g.version = w, v
	g.calls++
}

func (g *guardRecorder) WriteText(ctx context.Context, t provider.Target, c string, e *provider.WriteIntent) (provider.WriteOutcome, error) {
	g.note(e, nil)
	return g.FileSystem.WriteText(ctx, t, c, e)
}

func (g *guardRecorder) EditText(ctx context.Context, t provider.Target, r provider.EditRequest, e *provider.VersionGuard) (provider.EditOutcome, error) {
	g.note(nil, e)
	return g.FileSystem.EditText(ctx, t, r, e)
}

func (g *guardRecorder) PatchText(ctx context.Context, t provider.Target, h []patch.Hunk, e *provider.VersionGuard) (provider.EditOutcome, error) {
	g.note(nil, e)
	return g.FileSystem.PatchText(ctx, t, h, e)
}

func (g *guardRecorder) DeleteFile(ctx context.Context, t provider.Target, e *provider.VersionGuard) (provider.DeleteOutcome, error) {
	g.note(nil, e)
	return g.FileSystem.DeleteFile(ctx, t, e)
}

func (g *guardRecorder) MoveFile(ctx context.Context, src, dst provider.Target, o provider.MoveOptions) (provider.MoveOutcome, error) {
	g.note(o.ExpectedDestination, o.ExpectedSource)
	return g.FileSystem.MoveFile(ctx, src, dst, o)
}

// digestFor is a distinct cached digest (the n-th) for id, as a Versioner
// would remember it.
func digestFor(id provider.FileID, n int) provider.CachedDigest {
	return provider.CachedDigest{
		Key:        provider.StatKey{Dev: id.Dev, Ino: id.Ino, Size: int64(n), MtimeNs: int64(n) * 1000, CtimeNs: int64(n) * 1000},
		Version:    provider.Version(fmt.Sprintf("c1-%064x", n)),
		HashedAtNs: int64(n)*1000 + 1e9,
	}
}
