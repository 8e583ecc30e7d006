package local

import (
	"context"
	"slices"
	"sync"

	"github.com/dshmount/dshmount/internal/provider"
)

// lockTable holds one lock per target key that is in use. The table mutex
// only guards the map; it is never held while waiting for a key or during
// I/O. Entries are reference-counted and dropped when unused.
type lockTable struct {
	mu      sync.Mutex
	entries map[provider.Key]*keyLock
	// free holds unused locks for reuse (at most freeLocks): every
	// mutation takes a lock, which would otherwise be two allocations.
	free []*keyLock
}

// freeLocks is how many unused locks the table keeps for reuse.
const freeLocks = 64

// keyLock is a context-aware mutex: a one-slot channel.
type keyLock struct {
	slot chan struct{}
	refs int
}

func newLockTable() *lockTable {
	return &lockTable{entries: make(map[provider.Key]*keyLock)}
}

// lock acquires the locks of keys in canonical (sorted) order, so two calls
// that lock the same pair cannot deadlock. It returns the function that
// releases them, or ctx's error when ctx ends first (nothing stays held).
// keys must be distinct.
func (lt *lockTable) lock(ctx context.Context, keys ...provider.Key) (func(), error) {
	if len(keys) == 2 && keys[1] < keys[0] {
		keys = []provider.Key{keys[1], keys[0]}
	}
	for i, k := range keys {
		if err := lt.acquire(ctx, k); err != nil {
			lt.releaseAll(keys[:i])
			return nil, err
		}
	}
	switch len(keys) {
	case 0:
		return func() {}, nil
	case 1, 2: // what mutations take: the release holds the keys by value (one allocation)
		first, last, n := keys[0], keys[len(keys)-1], len(keys)
		return func() {
			if n == 2 {
				lt.release(last)
			}
			lt.release(first)
		}, nil
	}
	held := slices.Clone(keys)
	return func() { lt.releaseAll(held) }, nil
}

// releaseAll frees the locks of keys, last first.
func (lt *lockTable) releaseAll(keys []provider.Key) {
	for i := len(keys) - 1; i >= 0; i-- {
		lt.release(keys[i])
	}
}

// acquire takes the lock of one key.
func (lt *lockTable) acquire(ctx context.Context, k provider.Key) error {
	lt.mu.Lock()
	e := lt.entries[k]
	if e == nil {
		if n := len(lt.free); n > 0 {
			e, lt.free = lt.free[n-1], lt.free[:n-1]
		} else {
			e = &keyLock{slot: make(chan struct{}, 1)}
		}
		lt.entries[k] = e
	}
	e.refs++
	lt.mu.Unlock()
	select { // a free lock is taken even when ctx has ended
	case e.slot <- struct{}{}:
		return nil
	default:
	}
	select {
	case e.slot <- struct{}{}:
		return nil
	case <-ctx.Done():
		lt.drop(k, e)
		return ctx.Err()
	}
}

// release frees the lock of one key.
func (lt *lockTable) release(k provider.Key) {
	lt.mu.Lock()
	e := lt.entries[k]
	lt.mu.Unlock()
	<-e.slot
	lt.drop(k, e)
}

// drop gives up one reference to e.
func (lt *lockTable) drop(k provider.Key, e *keyLock) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	e.refs--
	if e.refs == 0 { // nobody holds or waits for it: its slot is empty
		delete(lt.entries, k)
		if len(lt.free) < freeLocks {
			lt.free = append(lt.free, e)
		}
	}
}

// size returns the number of keys in use (for tests).
func (lt *lockTable) size() int {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	return len(lt.entries)
}

// Lock takes the per-target mutation locks of keys (in canonical order), the
// same locks every mutation of this FS holds from its guard check to its
// publication. The FUSE layer holds them around its own check-then-change
// sequences so a mount write and a socket mutation of one file serialise
// and a guard is never checked against a version that changes before the
// change lands. keys must be distinct. It returns the release function, or
// ctx's error when ctx ends first.
func (fs *FS) Lock(ctx context.Context, keys ...provider.Key) (func(), error) {
	if len(keys) == 2 && keys[0] == keys[1] {
		keys = keys[:1]
	}
	unlock, err := fs.locks.lock(ctx, keys...)
	if err != nil {
		return nil, provider.NewError(provider.CodeAborted, "lock", "", err, "cancelled while waiting for the file's lock")
	}
	return unlock, nil
}
