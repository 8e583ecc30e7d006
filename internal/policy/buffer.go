package policy

import (
	"hash/maphash"
	"strings"
	"sync/atomic"

	"github.com/dshmount/dshmount/internal/shardcache"
)

const bufferShards = 32

// writeBuffer is the sharded write-back cache in front of Badger. Writes are
// acknowledged once they are in it ("dirty") and reach Badger when the
// flusher runs; flushed entries stay as a bounded read cache ("clean"), so
// the hot path rarely opens a Badger transaction. Reads consult it before
// Badger, so a caller always sees its own writes. It counts the writes
// since the last flush and wakes the flusher past its limit.
type writeBuffer struct {
	c     *shardcache.Cache[string, bufferValue]
	dirty atomic.Int64 // writes since the last flush
	limit int64        // dirty writes that wake the flusher early
	kick  chan struct{}
}

// bufferValue is a cached value, or a deletion (del).
type bufferValue struct {
	val []byte
	del bool
}

// flushItem is one dirty entry handed to the flusher.
type flushItem struct {
	key  string
	val  []byte
	del  bool
	item shardcache.Item[string, bufferValue]
}

func newWriteBuffer(limit, capacity int) *writeBuffer {
	seed := maphash.MakeSeed()
	return &writeBuffer{
		c: shardcache.New(shardcache.Config[string, bufferValue]{
			Shards: bufferShards, Capacity: capacity,
			Hash: func(k string) uint64 { return maphash.String(seed, k) },
		}),
		limit: int64(limit),
		kick:  make(chan struct{}, 1),
	}
}

// put buffers key=val; keep says whether it stays cached after the flush.
func (b *writeBuffer) put(key, val []byte, keep bool) {
	b.c.Put(string(key), bufferValue{val: val}, keep)
	b.noteWrites(1)
}

// del buffers the deletion of key.
func (b *writeBuffer) del(key []byte) {
	b.c.Put(string(key), bufferValue{del: true}, true)
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
	v, found, token := b.c.Get(string(key))
	return v.val, v.del, found, token
}

// fill caches what Badger answered for key (val, or missing), unless the
// cache changed since get returned token so that a newer write may exist.
func (b *writeBuffer) fill(key, val []byte, missing bool, token uint64) {
	b.c.Fill(string(key), bufferValue{val: val, del: missing}, token)
}

// takeDirty returns the entries written since the last call; they stay
// dirty (and visible) until flushed reports them written.
func (b *writeBuffer) takeDirty() []flushItem {
	taken := b.c.TakeDirty()
	b.dirty.Store(0)
	items := make([]flushItem, len(taken))
	for i, it := range taken {
		items[i] = flushItem{key: it.Key, val: it.Val.val, del: it.Val.del, item: it}
	}
	return items
}

// requeue puts back items whose flush failed, so the next flush retries
// them (or their newer writes, which are queued already).
func (b *writeBuffer) requeue(items []flushItem) {
	b.c.Requeue(cacheItems(items))
	b.noteWrites(int64(len(items)))
}

// flushed marks items as written to Badger.
func (b *writeBuffer) flushed(items []flushItem) { b.c.Flushed(cacheItems(items)) }

func cacheItems(items []flushItem) []shardcache.Item[string, bufferValue] {
	out := make([]shardcache.Item[string, bufferValue], len(items))
	for i, it := range items {
		out[i] = it.item
	}
	return out
}

// dropPrefix forgets every entry whose key starts with prefix. The caller
// holds the store's flush lock.
func (b *writeBuffer) dropPrefix(prefix []byte) {
	p := string(prefix)
	b.c.DropIf(func(k string) bool { return strings.HasPrefix(k, p) })
}

// size returns the number of cached entries and of dirty ones.
func (b *writeBuffer) size() (entries, dirty int) { return b.c.Size() }
