// Package shardcache is a sharded, bounded write-back cache: writes are
// kept as dirty entries until a flusher reports them persisted, after which
// they stay as clean entries of a bounded read cache. Only clean entries
// are evicted. Each shard queues the keys written since the last flush, so
// a flush touches only what changed.
package shardcache

import "sync"

// Config sets up a Cache.
type Config[K comparable, V any] struct {
	// Shards is the number of shards (at least 1).
	Shards int
	// Capacity bounds the clean entries of the whole cache; each shard
	// keeps Capacity/Shards of them (at least one).
	Capacity int
	// Hash spreads keys over the shards.
	Hash func(K) uint64
	// Equal, when set, makes a Put of the value an entry already holds a
	// no-op (nothing to flush).
	Equal func(a, b V) bool
}

// Cache is a sharded write-back cache of V by K. It is safe for concurrent
// use.
type Cache[K comparable, V any] struct {
	shards   []shard[K, V]
	shardCap int
	hash     func(K) uint64
	equal    func(a, b V) bool
}

type shard[K comparable, V any] struct {
	mu      sync.Mutex
	entries map[K]*entry[V]
	queue   []K    // keys written since the last TakeDirty (may repeat)
	ndirty  int    // entries with dirty set
	writes  uint64 // advanced by every write, names it in its entry
	removed uint64 // advanced by every removal, to detect races with fills
}

type entry[V any] struct {
	val    V
	dirty  bool   // not yet persisted
	queued bool   // in the shard's queue, to be taken by the next flush
	keep   bool   // stay cached once flushed
	seq    uint64 // shard write of the last Put, to recognize it after a flush
}

// Item is one dirty entry handed to the flusher.
type Item[K comparable, V any] struct {
	Key K
	Val V
	seq uint64
}

// New returns an empty cache.
func New[K comparable, V any](cfg Config[K, V]) *Cache[K, V] {
	n := max(cfg.Shards, 1)
	c := &Cache[K, V]{
		shards:   make([]shard[K, V], n),
		shardCap: max(cfg.Capacity/n, 1),
		hash:     cfg.Hash,
		equal:    cfg.Equal,
	}
	for i := range c.shards {
		c.shards[i].entries = make(map[K]*entry[V])
	}
	return c
}

func (c *Cache[K, V]) shard(k K) *shard[K, V] {
	return &c.shards[c.hash(k)%uint64(len(c.shards))]
}

// Put writes k=v as a dirty entry; keep says whether it stays cached after
// it is flushed. It reports whether anything changed (false only when
// Equal says the entry already holds v).
func (c *Cache[K, V]) Put(k K, v V, keep bool) bool {
	sh := c.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	cur, ok := sh.entries[k]
	if !ok {
		cur = &entry[V]{}
		sh.entries[k] = cur
	} else if c.equal != nil && c.equal(cur.val, v) {
		return false
	}
	sh.writes++
	if !cur.dirty {
		sh.ndirty++
	}
	cur.val, cur.dirty, cur.keep, cur.seq = v, true, keep, sh.writes
	if !cur.queued {
		cur.queued = true
		sh.queue = append(sh.queue, k)
	}
	return true
}

// Get returns the cached value of k and whether the cache holds it. When it
// does not, token is what to pass to Fill after reading the backing store.
func (c *Cache[K, V]) Get(k K) (v V, found bool, token uint64) {
	sh := c.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e, ok := sh.entries[k]; ok {
		return e.val, true, 0
	}
	return v, false, sh.removed
}

// Fill caches v, read from the backing store, as a clean entry of k, and
// returns what the cache now holds for k. When the shard removed an entry
// since Get returned token (the read may have missed a newer value that
// was flushed and evicted meanwhile), it caches nothing and ok is false:
// the caller reads again.
func (c *Cache[K, V]) Fill(k K, v V, token uint64) (got V, ok bool) {
	sh := c.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e, present := sh.entries[k]; present {
		return e.val, true // written meanwhile: the write is newer
	}
	if sh.removed != token {
		return got, false
	}
	c.evictLocked(sh, 1)
	sh.entries[k] = &entry[V]{val: v, keep: true}
	return v, true
}

// evictLocked makes room for room more clean entries by dropping clean
// entries once a shard's clean entries would exceed its capacity: down to
// three quarters of it, so the walk is paid once per quarter of the
// capacity. Dirty entries are never dropped.
func (c *Cache[K, V]) evictLocked(sh *shard[K, V], room int) {
	clean := len(sh.entries) - sh.ndirty
	if clean+room <= c.shardCap {
		return
	}
	drop := clean + room - c.shardCap*3/4
	for k, e := range sh.entries {
		if drop <= 0 {
			break
		}
		if !e.dirty {
			delete(sh.entries, k)
			drop--
		}
	}
	sh.removed++
}

// TakeDirty returns the entries written since the last call; they stay
// dirty (and cached) until Flushed reports them persisted.
func (c *Cache[K, V]) TakeDirty() []Item[K, V] {
	var items []Item[K, V]
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		queue := sh.queue
		sh.queue = nil
		for _, k := range queue {
			e, ok := sh.entries[k]
			if !ok || !e.queued {
				continue // dropped, or a repeat of a key already taken
			}
			e.queued = false
			if e.dirty {
				items = append(items, Item[K, V]{Key: k, Val: e.val, seq: e.seq})
			}
		}
		sh.mu.Unlock()
	}
	return items
}

// Requeue puts back items whose flush failed, so the next TakeDirty returns
// them again (or their newer writes, which are queued already).
func (c *Cache[K, V]) Requeue(items []Item[K, V]) {
	for _, it := range items {
		sh := c.shard(it.Key)
		sh.mu.Lock()
		if e, ok := sh.entries[it.Key]; ok && e.dirty && !e.queued {
			e.queued = true
			sh.queue = append(sh.queue, it.Key)
		}
		sh.mu.Unlock()
	}
}

// Flushed marks items as persisted: entries not written since become clean
// (or leave the cache when not kept), and shards over capacity shed clean
// entries.
func (c *Cache[K, V]) Flushed(items []Item[K, V]) {
	for _, it := range items {
		sh := c.shard(it.Key)
		sh.mu.Lock()
		if e, ok := sh.entries[it.Key]; ok && e.dirty && e.seq == it.seq {
			e.dirty = false
			sh.ndirty--
			if !e.keep {
				delete(sh.entries, it.Key)
				sh.removed++
			}
		}
		sh.mu.Unlock()
	}
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		c.evictLocked(sh, 0)
		sh.mu.Unlock()
	}
}

// DropIf forgets every entry, dirty or not, whose key matches.
func (c *Cache[K, V]) DropIf(match func(K) bool) {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		for k, e := range sh.entries {
			if match(k) {
				if e.dirty {
					sh.ndirty--
				}
				delete(sh.entries, k)
			}
		}
		sh.removed++
		sh.mu.Unlock()
	}
}

// Size returns the number of cached entries and of dirty ones.
func (c *Cache[K, V]) Size() (entries, dirty int) {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		entries += len(sh.entries)
		dirty += sh.ndirty
		sh.mu.Unlock()
	}
	return entries, dirty
}
