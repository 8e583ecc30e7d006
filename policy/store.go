package policy

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Errors of the store.
var (
	// ErrStateLocked: another daemon holds the state directory.
	ErrStateLocked = errors.New("state directory is locked")
	// ErrUnknownSession: the session was never opened, or was closed.
	ErrUnknownSession = errors.New("unknown session")
	// ErrObserverFailed: the mutation succeeded but an observer failed.
	ErrObserverFailed = errors.New("observer failed")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("policy store is closed")
)

// Store is the persistent observation store: sessions, observations,
// cached content digests, last writers and the audit log, on Badger. Writes are
// acknowledged from memory and reach Badger in batches; a crash may lose the
// last batch, which only makes guards stricter (see Open).
type Store struct {
	db   *badger.DB
	dir  string
	opts Options
	log  *slog.Logger

	buf        *writeBuffer
	digests    digests
	auditSeq   *sequence
	feed       *feed // live subscribers of the audit log's changes
	sessMu     sync.RWMutex
	sessions   map[SessionID]*sessionState
	flushMu    sync.Mutex // one flush (or prefix purge) at a time
	flushErr   atomic.Pointer[error]
	recovered  bool // opened after an unclean shutdown
	closed     atomic.Bool
	closeOnce  sync.Once
	closeErr   error
	stop       chan struct{}
	background sync.WaitGroup
}

// Open opens (creating if needed) the store under stateDir/db. A second
// opener of the same directory, in this process or another, fails with an
// error wrapping ErrStateLocked.
//
// Versions name bytes, so a token issued before a crash stays valid
// exactly as long as the file holds the same bytes; a record lost in a
// crash (an observation, a session's latest version) can only make a guard
// stricter.
func Open(stateDir string, opts Options) (*Store, error) {
	opts = opts.normalized()
	dir := filepath.Join(stateDir, "db")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create state directory %s: %w", dir, err)
	}
	bopts := badger.DefaultOptions(dir).
		WithMemTableSize(opts.MemTableSize).
		WithNumMemtables(opts.NumMemtables).
		WithBlockCacheSize(opts.BlockCacheSize).
		WithIndexCacheSize(opts.IndexCacheSize).
		WithNumCompactors(opts.NumCompactors).
		WithBaseTableSize(opts.BaseTableSize).
		WithValueLogFileSize(opts.ValueLogFileSize).
		WithValueThreshold(min(64<<10, opts.MemTableSize/16, opts.BaseTableSize/16)). // records are small: keep them in the LSM tree
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(8).
		WithMetricsEnabled(false).
		WithNumGoroutines(2).
		WithLogger(badgerLogger{opts.Logger})
	db, err := badger.Open(bopts)
	if err != nil {
		if strings.Contains(err.Error(), "Another process is using this Badger database") {
			return nil, fmt.Errorf("another dshmount daemon is using state directory %s; stop it or pass a different --state: %w: %w",
				stateDir, ErrStateLocked, err)
		}
		return nil, fmt.Errorf("open policy store in %s: %w", dir, err)
	}
	s := &Store{
		db:       db,
		dir:      stateDir,
		opts:     opts,
		log:      opts.Logger,
		buf:      newWriteBuffer(opts.FlushEntries, opts.CacheEntries),
		sessions: make(map[SessionID]*sessionState),
		stop:     make(chan struct{}),
	}
	s.digests.init(opts.CacheEntries)
	if err := s.start(); err != nil {
		_ = db.Close()
		return nil, err
	}
	s.background.Add(1)
	go s.flusher()
	if opts.JanitorInterval > 0 && opts.SessionTTL > 0 {
		s.background.Add(1)
		go s.janitor()
	}
	return s, nil
}

// start loads the meta records and sessions and applies the crash rule.
func (s *Store) start() error {
	var err error
	if s.auditSeq, err = openSequence(s.db, keyLeaseAudit, s.opts.LeaseBandwidth); err != nil {
		return err
	}
	clean, err := s.exists([]byte(keyClean))
	if err != nil {
		return fmt.Errorf("read clean-shutdown marker: %w", err)
	}
	fresh := s.auditSeq.limit.Load() == 0
	s.feed = newFeed(s) // after fresh: it takes a seq
	if !clean && !fresh {
		s.recovered = true
		s.log.Warn("policy store was not closed cleanly; records of the last moments may be missing, which only makes guards stricter",
			"state", s.dir)
	}
	// Remove the marker before serving: a crash from now on must be seen
	// as unclean.
	err = s.db.Update(func(txn *badger.Txn) error { return txn.Delete([]byte(keyClean)) })
	if err == nil {
		err = s.db.Sync()
	}
	if err != nil {
		return fmt.Errorf("mark policy store in use: %w", err)
	}
	return s.loadSessions()
}

// Recovered reports whether Open found an unclean shutdown.
func (s *Store) Recovered() bool { return s.recovered }

// Close stops the background work, flushes pending writes, syncs, and marks
// a clean shutdown. It is safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.feed.end()
		close(s.stop)
		s.background.Wait()
		s.auditSeq.wait()
		err := s.flush()
		if err == nil {
			err = s.failure()
		}
		if err == nil {
			err = s.db.Update(func(txn *badger.Txn) error {
				return txn.Set([]byte(keyClean), []byte{1})
			})
		}
		if err == nil {
			err = s.db.Sync()
		}
		if cerr := s.db.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			s.closeErr = fmt.Errorf("close policy store %s: %w", s.dir, err)
		}
	})
	return s.closeErr
}

// failure returns the first persistence failure of this run.
func (s *Store) failure() error {
	if p := s.flushErr.Load(); p != nil {
		return *p
	}
	return s.auditSeq.failed()
}

// Flush writes every buffered change to Badger now.
func (s *Store) Flush() error {
	if s.closed.Load() {
		return ErrClosed
	}
	return s.flush()
}

func (s *Store) flush() error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	items := s.buf.takeDirty()
	digests := s.digests.takeDirty()
	if len(items) == 0 && len(digests) == 0 {
		return nil
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	err := func() error {
		for _, d := range digests {
			if err := wb.Set(digestKey(d.id), encodeDigest(d.d)); err != nil {
				return err
			}
		}
		for _, it := range items {
			var err error
			if it.del {
				err = wb.Delete([]byte(it.key))
			} else {
				err = wb.Set([]byte(it.key), it.val)
			}
			if err != nil {
				return err
			}
		}
		return wb.Flush()
	}()
	if err != nil {
		s.digests.requeue(digests)
		s.buf.requeue(items)
		err = fmt.Errorf("flush %d policy records: %w", len(items)+len(digests), err)
		s.flushErr.CompareAndSwap(nil, &err)
		s.log.Error("policy store flush failed; will retry", "err", err)
		return err
	}
	s.buf.flushed(items)
	s.digests.flushed(digests)
	return nil
}

// flusher writes buffered changes every FlushInterval, or sooner when
// FlushEntries accumulate.
func (s *Store) flusher() {
	defer s.background.Done()
	t := time.NewTicker(s.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		case <-s.buf.kick:
		}
		_ = s.flush() // logged and kept for Close
	}
}

// janitor collects idle sessions every JanitorInterval.
func (s *Store) janitor() {
	defer s.background.Done()
	t := time.NewTicker(s.opts.JanitorInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if ids := s.CollectIdle(s.opts.Now()); len(ids) > 0 {
				s.log.Info("closed idle sessions", "count", len(ids))
			}
		}
	}
}

// lookup reads key through the write buffer, then Badger (caching the
// answer).
func (s *Store) lookup(key []byte) ([]byte, bool, error) {
	val, del, found, token := s.buf.get(key)
	if found {
		return val, !del, nil
	}
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if err != nil {
			return err
		}
		val, err = item.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		s.buf.fill(key, nil, true, token)
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %q from policy store: %w", key, err)
	}
	s.buf.fill(key, val, false, token)
	return val, true, nil
}

func (s *Store) exists(key []byte) (bool, error) {
	err := s.db.View(func(txn *badger.Txn) error {
		_, err := txn.Get(key)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil, err
}

// badgerLogger routes Badger's warnings and errors to slog and drops its
// informational chatter.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any) {
	b.l.Error(strings.TrimSpace(fmt.Sprintf(f, a...)), "component", "badger")
}

func (b badgerLogger) Warningf(f string, a ...any) {
	b.l.Warn(strings.TrimSpace(fmt.Sprintf(f, a...)), "component", "badger")
}

func (badgerLogger) Infof(string, ...any)  {}
func (badgerLogger) Debugf(string, ...any) {}
