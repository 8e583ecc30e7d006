package policy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dshmount/dshmount/internal/policy/kv"
)

// Errors of the store.
var (
	// ErrStateLocked: another daemon holds the state directory. It is
	// kv.ErrLocked.
	ErrStateLocked = kv.ErrLocked
	// ErrUnknownSession: the session was never opened, or was closed.
	ErrUnknownSession = errors.New("unknown session")
	// ErrObserverFailed: the mutation succeeded but an observer failed.
	ErrObserverFailed = errors.New("observer failed")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("policy store is closed")
	// ErrStoreUnavailable: a shared engine cannot be reached. Guarded work
	// is refused (FS_IO_ERROR) until it is back.
	ErrStoreUnavailable = errors.New("policy store unavailable")
)

// Store is the persistent observation store: sessions, observations,
// cached content digests, last writers and the audit log, on a kv.Store
// (Badger by default). Writes are acknowledged from memory and reach the
// engine in batches; a crash may lose the last batch, which only makes
// guards stricter (see Open).
type Store struct {
	db    kv.Store
	rec   recorder // chosen once from db.Shared()
	owner string   // this daemon's name in claims (host, pid, random)
	dir   string
	opts  Options
	log   *slog.Logger

	buf      *writeBuffer
	digests  digests
	auditSeq *sequence
	// On a shared store: the counter value this daemon last saw (the
	// guess for its next compare-and-swap), seqMu serializing its appends,
	// and onRemote, told of every other daemon's change (set by the Engine).
	counterSeen atomic.Uint64
	seqMu       sync.Mutex
	onRemote    atomic.Pointer[func(AuditEntry)]
	feed        *feed // live subscribers of the audit log's changes
	sessMu      sync.RWMutex
	sessions    map[SessionID]*sessionState
	flushMu     sync.Mutex // one flush (or prefix purge) at a time
	flushErr    atomic.Pointer[error]
	recovered   bool // opened after an unclean shutdown
	closed      atomic.Bool
	closeOnce   sync.Once
	closeErr    error
	stop        chan struct{}
	background  sync.WaitGroup
}

// Open opens the store on an engine it then owns (Close closes it); name
// says where the records are, for messages. The engine's Shared decides, once,
// whether records are cached and buffered (a local engine) or written
// through (a shared one).
//
// Versions name bytes, so a token issued before a crash stays valid
// exactly as long as the file holds the same bytes; a record lost in a
// crash (an observation, a session's latest version) can only make a guard
// stricter.
func Open(db kv.Store, name string, opts Options) (*Store, error) {
	opts = opts.normalized()
	s := &Store{
		db:       db,
		dir:      name,
		opts:     opts,
		log:      opts.Logger,
		buf:      newWriteBuffer(opts.FlushEntries, opts.CacheEntries),
		sessions: make(map[SessionID]*sessionState),
		stop:     make(chan struct{}),
	}
	s.rec = newRecorder(s)
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
	return s.rec.start()
}

// startLocal is start on a local engine: the audit sequence's leases, the
// clean-shutdown marker, the sessions.
func (s *Store) startLocal() error {
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
	ctx := context.Background()
	err = s.db.Write(ctx, []kv.Op{kv.Delete([]byte(keyClean))})
	if err == nil {
		err = s.db.Sync(ctx)
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
		ctx := context.Background()
		if err == nil {
			err = s.rec.markClean(ctx)
		}
		if err == nil {
			err = s.db.Sync(ctx)
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

// Flush writes every buffered change to the engine now.
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
	ops := make([]kv.Op, 0, len(items)+len(digests))
	ops = append(ops, s.rec.digestOps(digests)...)
	for _, it := range items {
		if it.del {
			ops = append(ops, kv.Delete([]byte(it.key)))
		} else {
			ops = append(ops, kv.Put([]byte(it.key), it.val))
		}
	}
	err := s.db.Write(context.Background(), ops)
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

// lookup reads key through the write buffer, then the engine (caching the
// answer).
func (s *Store) lookup(key []byte) ([]byte, bool, error) { return s.rec.lookup(key) }

// lookupShared is lookup on a shared engine: straight from the engine.
func (s *Store) lookupShared(key []byte) ([]byte, bool, error) {
	val, err := s.db.Get(context.Background(), key)
	if errors.Is(err, kv.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, unavailable(err)
	}
	return val, true, nil
}

// lookupLocal is lookup on a local engine: through the write buffer.
func (s *Store) lookupLocal(key []byte) ([]byte, bool, error) {
	cached, del, found, token := s.buf.get(key)
	if found {
		return cached, !del, nil
	}
	val, err := s.db.Get(context.Background(), key)
	if errors.Is(err, kv.ErrNotFound) {
		s.buf.fill(key, nil, true, token)
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %q from policy store: %w", key, err)
	}
	s.buf.fill(key, val, false, token)
	return val, true, nil
}

// put stores key=val: buffered (keep: stay cached once flushed), or on a
// shared engine written through before it returns.
func (s *Store) put(key, val []byte, keep bool) error { return s.rec.put(key, val, keep) }

// del removes key, like put.
func (s *Store) del(key []byte) error { return s.rec.del(key) }

func (s *Store) writeThrough(ops ...kv.Op) error {
	if err := s.db.Write(context.Background(), ops); err != nil {
		return unavailable(err)
	}
	return nil
}

// unavailable wraps an engine error as ErrStoreUnavailable (a closed
// engine stays ErrClosed).
func unavailable(err error) error {
	if errors.Is(err, kv.ErrClosed) {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return fmt.Errorf("%w: %w", ErrStoreUnavailable, err)
}

func (s *Store) exists(key []byte) (bool, error) {
	_, err := s.db.Get(context.Background(), key)
	if errors.Is(err, kv.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}
