// Package badgerkv is the embedded kv.Store: one Badger database in the
// daemon's state directory, used by that daemon alone (an exclusive
// directory lock keeps a second daemon out). It is the default engine.
package badgerkv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/dshmount/dshmount/internal/policy/kv"
)

// ErrLocked: another process (or another Open in this one) holds the
// directory. It is kv.ErrLocked.
var ErrLocked = kv.ErrLocked

// Scheme is the store URL scheme of Badger: badger:///ABS/PATH.
const Scheme = "badger"

// Register adds the badger:///ABS/PATH scheme to r; every engine it opens
// is sized by c. The directory is created (0700) if missing.
func Register(r *kv.Registry, c Config) {
	r.Register(Scheme, func(_ context.Context, rest string) (kv.Store, error) {
		dir, err := DirFromURL(rest)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", dir, err)
		}
		return Open(dir, c)
	}, func(rest string) error { _, err := DirFromURL(rest); return err })
}

// DirFromURL is the directory of a badger URL's rest (what follows
// "badger://"): an empty host and an absolute, clean path, percent-escaped
// where it holds a '%', '?' or '#' (as URL writes it).
func DirFromURL(rest string) (string, error) {
	if !strings.HasPrefix(rest, "/") {
		return "", fmt.Errorf("%w: want badger:///ABSOLUTE/PATH (three slashes, no host)", kv.ErrBadURL)
	}
	if strings.ContainsAny(rest, "?#") {
		return "", fmt.Errorf("%w: badger:// takes a path only, no query or fragment", kv.ErrBadURL)
	}
	unescaped, err := url.PathUnescape(rest)
	if err != nil {
		return "", fmt.Errorf("%w: badger:// path: %v", kv.ErrBadURL, err)
	}
	dir := filepath.Clean(unescaped)
	if dir == "/" {
		return "", fmt.Errorf("%w: badger:/// needs a directory, not /", kv.ErrBadURL)
	}
	return dir, nil
}

// URL is the store URL of the Badger database in dir (absolute), its path
// percent-escaped so that a directory whose name holds '#', '?' or '%'
// reads back as itself (DirFromURL).
func URL(dir string) string {
	return Scheme + "://" + (&url.URL{Path: filepath.Clean(dir)}).EscapedPath()
}

// DefaultMaxTxnOps bounds the conditions and the writes of one Txn, and the
// writes of one chunk of Write.
const DefaultMaxTxnOps = 1000

// Config sizes the Badger database. The zero value of a field keeps
// Badger's own default; Logger nil drops Badger's messages.
type Config struct {
	MemTableSize     int64
	NumMemtables     int
	BlockCacheSize   int64
	IndexCacheSize   int64
	BaseTableSize    int64
	NumCompactors    int
	ValueLogFileSize int64
	// MaxTxnOps is DefaultMaxTxnOps when zero.
	MaxTxnOps int
	Logger    *slog.Logger
}

// Store is a kv.Store on Badger.
type Store struct {
	db     *badger.DB
	dir    string
	maxOps int
	closed atomic.Bool
}

var _ kv.Store = (*Store)(nil)

// Open opens (creating if needed) the Badger database in dir. A directory
// held by another opener fails with an error wrapping ErrLocked.
func Open(dir string, c Config) (*Store, error) {
	o := badger.DefaultOptions(dir).
		WithMetricsEnabled(false).
		WithNumGoroutines(2).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(8)
	if c.MemTableSize > 0 {
		o = o.WithMemTableSize(c.MemTableSize)
	}
	if c.NumMemtables > 0 {
		o = o.WithNumMemtables(c.NumMemtables)
	}
	if c.BlockCacheSize > 0 {
		o = o.WithBlockCacheSize(c.BlockCacheSize)
	}
	if c.IndexCacheSize > 0 {
		o = o.WithIndexCacheSize(c.IndexCacheSize)
	}
	if c.BaseTableSize > 0 {
		o = o.WithBaseTableSize(c.BaseTableSize)
	}
	if c.NumCompactors > 0 {
		o = o.WithNumCompactors(c.NumCompactors)
	}
	if c.ValueLogFileSize > 0 {
		o = o.WithValueLogFileSize(c.ValueLogFileSize)
	}
	// Records are small: keep them in the LSM tree.
	o = o.WithValueThreshold(min(64<<10, o.MemTableSize/16, o.BaseTableSize/16))
	o = o.WithLogger(logger{c.Logger})
	db, err := badger.Open(o)
	if err != nil {
		if strings.Contains(err.Error(), "Another process is using this Badger database") {
			return nil, fmt.Errorf("open %s: %w (another dshmount daemon?): %w", dir, ErrLocked, err)
		}
		return nil, fmt.Errorf("open badger in %s: %w", dir, err)
	}
	maxOps := c.MaxTxnOps
	if maxOps <= 0 {
		maxOps = DefaultMaxTxnOps
	}
	return &Store{db: db, dir: dir, maxOps: maxOps}, nil
}

func (e *Store) check() error {
	if e.closed.Load() {
		return kv.ErrClosed
	}
	return nil
}

// Get implements kv.Store.
func (e *Store) Get(_ context.Context, key []byte) ([]byte, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	var val []byte
	err := e.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if err != nil {
			return err
		}
		val, err = item.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, fmt.Errorf("get %q: %w", key, kv.ErrNotFound)
	}
	if err != nil {
		return nil, e.wrap("get", err)
	}
	return val, nil
}

// Scan implements kv.Store, on one Badger snapshot.
func (e *Store) Scan(_ context.Context, r kv.Range, fn func(kv.Pair) error) error {
	if err := e.check(); err != nil {
		return err
	}
	end := kv.PrefixEnd(r.Prefix)
	var cbErr error
	err := e.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Reverse: r.Reverse, PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		switch {
		case !r.Reverse:
			start := r.Prefix
			if bytes.Compare(r.Start, start) > 0 {
				start = r.Start
			}
			it.Seek(start)
		case r.Start != nil && (end == nil || bytes.Compare(r.Start, end) < 0):
			it.Seek(r.Start) // reverse: the largest key ≤ Start
		case end != nil:
			it.Seek(end)
			if it.Valid() && bytes.Equal(it.Item().Key(), end) {
				it.Next()
			}
		default:
			it.Rewind()
		}
		n := 0
		for ; it.Valid() && bytes.HasPrefix(it.Item().Key(), r.Prefix); it.Next() {
			if r.Limit > 0 && n >= r.Limit {
				return nil
			}
			item := it.Item()
			val, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			n++
			if err := fn(kv.Pair{Key: item.KeyCopy(nil), Value: val}); err != nil {
				cbErr = err
				return err
			}
		}
		return nil
	})
	if cbErr != nil {
		return cbErr
	}
	if err != nil {
		return e.wrap("scan", err)
	}
	return nil
}

// Write implements kv.Store: one Badger transaction per chunk.
func (e *Store) Write(_ context.Context, ops []kv.Op) error {
	if err := e.check(); err != nil {
		return err
	}
	ops = kv.Dedupe(ops)
	for len(ops) > 0 {
		n := min(len(ops), e.maxOps)
		for {
			err := e.db.Update(func(txn *badger.Txn) error { return apply(txn, ops[:n]) })
			if errors.Is(err, badger.ErrTxnTooBig) && n > 1 {
				n /= 2 // large values: a smaller chunk
				continue
			}
			if err != nil {
				return e.wrap(fmt.Sprintf("write %d records", n), err)
			}
			break
		}
		ops = ops[n:]
	}
	return nil
}

func apply(txn *badger.Txn, ops []kv.Op) error {
	for _, op := range ops {
		var err error
		if op.Delete {
			err = txn.Delete(op.Key)
		} else {
			err = txn.Set(op.Key, op.Value)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// errCondFailed stops a Badger transaction whose conditions do not hold.
var errCondFailed = errors.New("condition failed")

// Txn implements kv.Store with Badger's optimistic transactions: the
// conditions' keys are read inside the transaction, so a concurrent commit
// to one of them makes this one conflict, and it is tried again.
func (e *Store) Txn(_ context.Context, conds []kv.Cond, ops []kv.Op) (bool, error) {
	if err := e.check(); err != nil {
		return false, err
	}
	if len(conds) > e.maxOps || len(ops) > e.maxOps {
		return false, fmt.Errorf("txn of %d conditions and %d writes (at most %d each): %w", len(conds), len(ops), e.maxOps, kv.ErrTooBig)
	}
	ops = kv.Dedupe(ops)
	for {
		err := e.db.Update(func(txn *badger.Txn) error {
			for _, c := range conds {
				item, err := txn.Get(c.Key)
				if errors.Is(err, badger.ErrKeyNotFound) {
					if c.Absent {
						continue
					}
					return errCondFailed
				}
				if err != nil {
					return err
				}
				if c.Absent {
					return errCondFailed
				}
				same := false
				if err := item.Value(func(v []byte) error { same = bytes.Equal(v, c.Value); return nil }); err != nil {
					return err
				}
				if !same {
					return errCondFailed
				}
			}
			return apply(txn, ops)
		})
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, errCondFailed):
			return false, nil
		case errors.Is(err, badger.ErrConflict):
			continue
		case errors.Is(err, badger.ErrTxnTooBig):
			return false, fmt.Errorf("txn of %d writes: %w: %w", len(ops), kv.ErrTooBig, err)
		default:
			return false, e.wrap("txn", err)
		}
	}
}

// MaxTxnOps implements kv.Store.
func (e *Store) MaxTxnOps() int { return e.maxOps }

// Sync implements kv.Store.
func (e *Store) Sync(context.Context) error {
	if err := e.check(); err != nil {
		return err
	}
	if err := e.db.Sync(); err != nil {
		return e.wrap("sync", err)
	}
	return nil
}

// Shared implements kv.Store: a Badger directory has one daemon.
func (e *Store) Shared() bool { return false }

// closeWait bounds how long Close waits for Badger to write its memory
// table out; closeCheck is how often it looks whether the directory is
// still there (Badger retries a failed flush forever, once a second).
const (
	closeWait  = 30 * time.Second
	closeCheck = 500 * time.Millisecond
)

// Close implements kv.Store. It does not hang when Badger cannot write
// its directory any more (removed under the daemon): what was not written
// out is in Badger's log, replayed on the next open, as after a crash, or
// gone with the directory.
func (e *Store) Close() error {
	if e.closed.Swap(true) {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- e.db.Close() }()
	check := time.NewTicker(closeCheck)
	defer check.Stop()
	deadline := time.NewTimer(closeWait)
	defer deadline.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("close badger in %s: %w", e.dir, err)
			}
			return nil
		case <-check.C:
			if _, err := os.Stat(e.dir); errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("close badger in %s: the directory was removed; records not yet written to it are lost", e.dir)
			}
		case <-deadline.C:
			return fmt.Errorf("close badger in %s: not closed after %v; its log is replayed on the next open", e.dir, closeWait)
		}
	}
}

func (e *Store) wrap(op string, err error) error {
	if errors.Is(err, badger.ErrDBClosed) {
		return fmt.Errorf("%s: %w: %w", op, kv.ErrClosed, err)
	}
	return fmt.Errorf("badger %s in %s: %w", op, e.dir, err)
}

// logger routes Badger's warnings and errors to slog and drops its
// informational chatter.
type logger struct{ l *slog.Logger }

func (b logger) Errorf(f string, a ...any) {
	if b.l != nil {
		b.l.Error(strings.TrimSpace(fmt.Sprintf(f, a...)), "component", "badger")
	}
}

func (b logger) Warningf(f string, a ...any) {
	if b.l != nil {
		b.l.Warn(strings.TrimSpace(fmt.Sprintf(f, a...)), "component", "badger")
	}
}

func (logger) Infof(string, ...any)  {}
func (logger) Debugf(string, ...any) {}
