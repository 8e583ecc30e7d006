package policy

import (
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
)

const bufferShards = 32

// writeBuffer is a sharded write-back cache in front of Badger. Writes are
// acknowledged once they are in it ("dirty") and reach Badger when the
// flusher runs; flushed entries stay as a bounded read cache ("clean"), so
// the hot path rarely opens a Badger transaction. Reads consult it before
// Badger, so a caller always sees its own writes.
//
// Each shard queues the keys written since the last flush, so a flush
// touches only what changed, never the whole cache. Only clean entries are
// evicted: a dirty one stays until Badger has it, and an evicted one is read
// from Badger again.
type writeBuffer struct {
	seed     maphash.Seed
	shards   [bufferShards]bufferShard
	dirty    atomic.Int64 // writes since the last flush
	limit    int64        // dirty writes that wake the flusher early
	shardCap int          // clean entries kept per shard
	kick     chan struct{}
}

type bufferShard struct {
	mu      sync.Mutex
	entries map[string]*bufferEntry
	queue   []string // keys written since the last takeDirty (may repeat)
	ndirty  int      // entries with dirty set
	seq     uint64   // advanced by every change, to detect races with fills
}

// bufferEntry is a cached value, or a deletion (del).
type bufferEntry struct {
	val    []byte
	del    bool
	dirty  bool   // not yet in Badger
	queued bool   // in the shard's queue, to be taken by the next flush
	keep   bool   // stay cached once flushed
	seq    uint64 // shard seq of the last write, to recognize it after a flush
}

// flushItem is one dirty entry handed to the flusher.
type flushItem struct {
	key   string
	val   []byte
	del   bool
	shard *bufferShard
	seq   uint64
}

func newWriteBuffer(limit, capacity int) *writeBuffer {
	b := &writeBuffer{
		seed:     maphash.MakeSeed(),
		limit:    int64(limit),
		shardCap: max(capacity/bufferShards, 1),
		kick:     make(chan struct{}, 1),
	}
	for i := range b.shards {
		b.shards[i].entries = make(map[string]*bufferEntry)
	}
	return b
}

func (b *writeBuffer) shard(key []byte) *bufferShard {
	return &b.shards[maphash.Bytes(b.seed, key)%bufferShards]
}

// put buffers key=val; keep says whether it stays cached after the flush.
func (b *writeBuffer) put(key, val []byte, keep bool) {
	b.write(key, bufferEntry{val: val, keep: keep})
}

// del buffers the deletion of key.
func (b *writeBuffer) del(key []byte) { b.write(key, bufferEntry{del: true, keep: true}) }

func (b *writeBuffer) write(key []byte, e bufferEntry) {
	sh := b.shard(key)
	sh.mu.Lock()
	sh.seq++
	e.dirty, e.seq = true, sh.seq
	cur, ok := sh.entries[string(key)]
	if !ok {
		cur = &bufferEntry{}
		sh.entries[string(key)] = cur
	}
	if !cur.dirty {
		sh.ndirty++
	}
	e.queued = cur.queued
	*cur = e
	if !cur.queued {
		cur.queued = true
		sh.queue = append(sh.queue, string(key))
	}
	sh.mu.Unlock()
	b.noteWrites(1)
}

// noteWrites counts buffered writes and wakes the flusher past the limit.
func (b *writeBuffer) noteWrites(n int64) {
	if b.dirty.Add(n) >= b.limit {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
}

// get returns the cached value of key: found says whether the cache knows
// it, del whether it is deleted. When the cache does not know it, fill is
// the token to pass to fill after reading Badger.
func (b *writeBuffer) get(key []byte) (val []byte, del, found bool, fill uint64) {
	sh := b.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e, ok := sh.entries[string(key)]; ok {
		return e.val, e.del, true, 0
	}
	return nil, false, false, sh.seq
}

// fill caches what Badger answered for key (val, or missing), unless the
// shard changed since get returned token: then a newer write may exist.
func (b *writeBuffer) fill(key, val []byte, missing bool, token uint64) {
	sh := b.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.seq != token {
		return
	}
	if _, ok := sh.entries[string(key)]; ok {
		return
	}
	b.evictLocked(sh, 1)
	sh.seq++
	sh.entries[string(key)] = &bufferEntry{val: val, del: missing, keep: true, seq: sh.seq}
}

// evictLocked makes room for room more entries by dropping clean entries
// once a shard's clean entries reach its capacity: down to three quarters
// of it, so the walk is paid once per quarter of the capacity. Dirty
// entries are never dropped.
func (b *writeBuffer) evictLocked(sh *bufferShard, room int) {
	clean := len(sh.entries) - sh.ndirty
	if clean+room <= b.shardCap {
		return
	}
	drop := clean + room - b.shardCap*3/4
	for k, e := range sh.entries {
		if drop <= 0 {
			break
		}
		if !e.dirty {
			delete(sh.entries, k)
			drop--
		}
	}
	sh.seq++
}

// takeDirty returns the entries written since the last call; they stay
// dirty (and visible) until flushed reports them written.
func (b *writeBuffer) takeDirty() []flushItem {
	var items []flushItem
	for i := range b.shards {
		sh := &b.shards[i]
		sh.mu.Lock()
		queue := sh.queue
		sh.queue = nil
		for _, k := range queue {
			e, ok := sh.entries[k]
			if !ok || !e.queued {
				continue // purged, or a repeat of a key already taken
			}
			e.queued = false
			if e.dirty {
				items = append(items, flushItem{key: k, val: e.val, del: e.del, shard: sh, seq: e.seq})
			}
		}
		sh.mu.Unlock()
	}
	b.dirty.Store(0)
	return items
}

// requeue puts back items whose flush failed, so the next flush retries
// them (or their newer writes, which are queued already).
func (b *writeBuffer) requeue(items []flushItem) {
	for _, it := range items {
		sh := it.shard
		sh.mu.Lock()
		if e, ok := sh.entries[it.key]; ok && e.dirty && !e.queued {
			e.queued = true
			sh.queue = append(sh.queue, it.key)
		}
		sh.mu.Unlock()
	}
	b.noteWrites(int64(len(items)))
}

// flushed marks items as written to Badger: unchanged entries become clean
// (or leave the cache when not kept), and shards over capacity shed clean
// entries.
func (b *writeBuffer) flushed(items []flushItem) {
	for _, it := range items {
		sh := it.shard
		sh.mu.Lock()
		if e, ok := sh.entries[it.key]; ok && e.seq == it.seq && e.dirty {
			e.dirty = false
			sh.ndirty--
			if !e.keep {
				delete(sh.entries, it.key)
				sh.seq++
			}
		}
		sh.mu.Unlock()
	}
	for i := range b.shards {
		sh := &b.shards[i]
		sh.mu.Lock()
		b.evictLocked(sh, 0)
		sh.mu.Unlock()
	}
}

// dropPrefix forgets every entry whose key starts with prefix. The caller
// holds the store's flush lock.
func (b *writeBuffer) dropPrefix(prefix []byte) {
	p := string(prefix)
	for i := range b.shards {
		sh := &b.shards[i]
		sh.mu.Lock()
		for k, e := range sh.entries {
			if strings.HasPrefix(k, p) {
				if e.dirty {
					sh.ndirty--
				}
				delete(sh.entries, k)
			}
		}
		sh.seq++
		sh.mu.Unlock()
	}
}

// size returns the number of cached entries and of dirty ones.
func (b *writeBuffer) size() (entries, dirty int) {
	for i := range b.shards {
		sh := &b.shards[i]
		sh.mu.Lock()
		entries += len(sh.entries)
		dirty += sh.ndirty
		sh.mu.Unlock()
	}
	return entries, dirty
}
