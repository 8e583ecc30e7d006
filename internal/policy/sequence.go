package policy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dshmount/dshmount/internal/policy/kv"
)

// sequence hands out increasing uint64 values that never repeat, even across
// crashes: a high-water mark ("lease") is written and synced to the engine before
// any value under it is handed out, so a restart continues above every value
// ever issued. The fast path is one atomic add; once half a lease is used,
// the next one is reserved in the background, so callers rarely wait for a
// sync.
type sequence struct {
	db        kv.Store
	key       []byte
	bandwidth uint64

	mu        sync.Mutex    // serializes lease extensions
	last      atomic.Uint64 // last value handed out
	limit     atomic.Uint64 // persisted high-water mark
	extending atomic.Bool   // a background extension is running
	spawnMu   sync.Mutex    // orders starting extensions with wait
	stopped   bool          // wait was called: no more background work
	pending   sync.WaitGroup
	err       atomic.Pointer[error]
}

// openSequence reads the persisted lease; values continue above it.
func openSequence(db kv.Store, key string, bandwidth uint64) (*sequence, error) {
	s := &sequence{db: db, key: []byte(key), bandwidth: bandwidth}
	stored, err := readUint64(db, s.key)
	if err != nil {
		return nil, fmt.Errorf("read sequence %s: %w", key, err)
	}
	s.last.Store(stored)
	s.limit.Store(stored)
	return s, nil
}

// next returns the next value. If the lease cannot be persisted the value is
// still returned (the daemon keeps working) and the failure is kept for
// failed(), so Close does not mark a clean shutdown.
func (s *sequence) next() uint64 {
	n := s.last.Add(1)
	if limit := s.limit.Load(); n <= limit {
		if limit-n < s.bandwidth/2 && s.extending.CompareAndSwap(false, true) {
			s.extendInBackground()
		}
		return n
	}
	s.extend(n)
	return n
}

func (s *sequence) extendInBackground() {
	s.spawnMu.Lock()
	defer s.spawnMu.Unlock()
	if s.stopped {
		return
	}
	s.pending.Add(1)
	go func() {
		defer s.pending.Done()
		defer s.extending.Store(false)
		s.extend(0)
	}()
}

// extend persists a lease reaching bandwidth above max(n, last handed out)
// unless the current one already covers n (n == 0: always extend).
func (s *sequence) extend(n uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n != 0 && n <= s.limit.Load() {
		return
	}
	limit := max(n, s.last.Load(), s.limit.Load()) + s.bandwidth
	ctx := context.Background()
	err := s.db.Write(ctx, []kv.Op{kv.Put(s.key, encodeUint64(limit))})
	if err == nil {
		err = s.db.Sync(ctx)
	}
	if err != nil {
		err = fmt.Errorf("persist sequence lease %s: %w", s.key, err)
		s.err.CompareAndSwap(nil, &err)
	}
	s.limit.Store(limit)
}

// wait waits for a background extension to finish (before closing the db).
func (s *sequence) wait() {
	s.spawnMu.Lock()
	s.stopped = true
	s.spawnMu.Unlock()
	s.pending.Wait()
}

// failed returns the first lease persistence failure, if any.
func (s *sequence) failed() error {
	if p := s.err.Load(); p != nil {
		return *p
	}
	return nil
}

// readUint64 reads a big-endian uint64 at key; a missing key is 0.
func readUint64(db kv.Store, key []byte) (uint64, error) {
	b, err := db.Get(context.Background(), key)
	if errors.Is(err, kv.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return decodeUint64(b)
}
