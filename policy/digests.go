package policy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/dshmount/dshmount/policy/kv"
	"github.com/dshmount/dshmount/provider"
)

const digestShards = 64

// digests caches content digests (provider.CachedDigest) by file identity in
// sharded maps, bounded: a changed entry stays until Badger has it (dirty),
// then may be evicted, after which it is read from Badger again. Each shard
// queues the identities changed since the last flush, so a flush touches
// only those. It is a cache: losing an entry costs one rehash.
type digests struct {
	shards   [digestShards]digestShard
	shardCap int // clean entries kept per shard
}

type digestShard struct {
	mu     sync.Mutex
	m      map[provider.FileID]*digestEntry
	queue  []provider.FileID // changed since the last takeDirty (may repeat)
	ndirty int
	// evictions counts evictions; a Badger read started before one may be
	// stale (the evicted value may be newer than what it read).
	evictions uint64
}

type digestEntry struct {
	d      provider.CachedDigest
	dirty  bool // not yet in Badger
	queued bool // in the shard's queue
}

// digestItem is one entry handed to the flusher.
type digestItem struct {
	id provider.FileID
	d  provider.CachedDigest
}

func (g *digests) init(capacity int) {
	g.shardCap = max(capacity/digestShards, 1)
	for i := range g.shards {
		g.shards[i].m = make(map[provider.FileID]*digestEntry)
	}
}

func (g *digests) shard(id provider.FileID) *digestShard {
	h := id.Ino*0x9e3779b97f4a7c15 ^ id.Dev
	return &g.shards[(h>>32)%digestShards]
}

// setLocked replaces id's cached entry with d and queues it for the
// flusher.
func (g *digests) setLocked(sh *digestShard, id provider.FileID, d provider.CachedDigest) {
	e := sh.m[id]
	if e == nil {
		g.evictLocked(sh, 1)
		e = &digestEntry{}
		sh.m[id] = e
	}
	if e.d == d {
		return
	}
	e.d = d
	if !e.dirty {
		e.dirty = true
		sh.ndirty++
	}
	if !e.queued {
		e.queued = true
		sh.queue = append(sh.queue, id)
	}
}

// evictLocked drops clean entries once a shard's clean entries would exceed
// its capacity, down to three quarters of it.
func (g *digests) evictLocked(sh *digestShard, room int) {
	clean := len(sh.m) - sh.ndirty
	if clean+room <= g.shardCap {
		return
	}
	drop := clean + room - g.shardCap*3/4
	for id, e := range sh.m {
		if drop <= 0 {
			break
		}
		if !e.dirty {
			delete(sh.m, id)
			drop--
		}
	}
	sh.evictions++
}

// takeDirty returns the entries changed since the last call; they stay
// dirty (never evicted) until flushed reports them written.
func (g *digests) takeDirty() []digestItem {
	var items []digestItem
	for i := range g.shards {
		sh := &g.shards[i]
		sh.mu.Lock()
		queue := sh.queue
		sh.queue = nil
		for _, id := range queue {
			e := sh.m[id]
			if e == nil || !e.queued {
				continue
			}
			e.queued = false
			items = append(items, digestItem{id: id, d: e.d})
		}
		sh.mu.Unlock()
	}
	return items
}

// flushed marks items as in Badger: entries unchanged since become clean,
// and shards over capacity shed clean entries.
func (g *digests) flushed(items []digestItem) {
	for _, it := range items {
		sh := g.shard(it.id)
		sh.mu.Lock()
		if e := sh.m[it.id]; e != nil && e.dirty && e.d == it.d {
			e.dirty = false
			sh.ndirty--
		}
		sh.mu.Unlock()
	}
	for i := range g.shards {
		sh := &g.shards[i]
		sh.mu.Lock()
		g.evictLocked(sh, 0)
		sh.mu.Unlock()
	}
}

// requeue puts back entries whose flush failed.
func (g *digests) requeue(items []digestItem) {
	for _, it := range items {
		sh := g.shard(it.id)
		sh.mu.Lock()
		if e := sh.m[it.id]; e != nil && e.dirty && !e.queued {
			e.queued = true
			sh.queue = append(sh.queue, it.id)
		}
		sh.mu.Unlock()
	}
}

// size returns the number of cached entries and of dirty ones.
func (g *digests) size() (entries, dirty int) {
	for i := range g.shards {
		sh := &g.shards[i]
		sh.mu.Lock()
		entries += len(sh.m)
		dirty += sh.ndirty
		sh.mu.Unlock()
	}
	return entries, dirty
}

var _ provider.DigestCache = (*Store)(nil)

// Digest implements provider.DigestCache: the entry of id from memory, else
// from Badger.
func (s *Store) Digest(id provider.FileID) (provider.CachedDigest, bool) {
	return s.cachedDigest(id)
}

// RememberDigest implements provider.DigestCache. The entry is persisted by
// the next flush.
func (s *Store) RememberDigest(id provider.FileID, d provider.CachedDigest) {
	sh := s.digests.shard(id)
	sh.mu.Lock()
	s.digests.setLocked(sh, id, d)
	sh.mu.Unlock()
	s.buf.noteWrites(1)
}

// maxDigestRetries bounds the Badger re-reads of one lookup that raced with
// evictions of its shard.
const maxDigestRetries = 8

// cachedDigest returns id's entry, loading it from Badger into the cache
// when it is not there. A Badger read is trusted only if its shard evicted
// nothing meanwhile: an evicted value may be newer than what the read saw.
// Constant eviction races answer "no entry": the caller hashes.
func (s *Store) cachedDigest(id provider.FileID) (provider.CachedDigest, bool) {
	sh := s.digests.shard(id)
	for range maxDigestRetries {
		sh.mu.Lock()
		if e := sh.m[id]; e != nil {
			d := e.d
			sh.mu.Unlock()
			return d, d.Version != ""
		}
		token := sh.evictions
		sh.mu.Unlock()

		d := s.loadDigest(id)

		sh.mu.Lock()
		e := sh.m[id]
		if e == nil && sh.evictions != token {
			sh.mu.Unlock()
			continue // read again: the value may have been evicted meanwhile
		}
		if e == nil {
			s.digests.evictLocked(sh, 1)
			e = &digestEntry{d: d}
			sh.m[id] = e
		}
		d = e.d
		sh.mu.Unlock()
		return d, d.Version != ""
	}
	return provider.CachedDigest{}, false
}

// loadDigest reads the persisted entry of id from the engine (the zero
// entry when none, or when it cannot be read or decoded: the caller then
// hashes). A shared engine keeps no digests: a device and inode number mean
// something only on the host that took them, and two hosts see one shared
// file under different ones, so each daemon keeps its digests in memory
// and hashes a file once per run.
func (s *Store) loadDigest(id provider.FileID) provider.CachedDigest {
	if s.db.Shared() {
		return provider.CachedDigest{}
	}
	b, err := s.db.Get(context.Background(), digestKey(id))
	if errors.Is(err, kv.ErrNotFound) {
		return provider.CachedDigest{}
	}
	var d provider.CachedDigest
	if err == nil {
		d, err = decodeDigest(b)
	}
	if err != nil {
		s.log.Warn("read cached digest; the file will be hashed", "dev", id.Dev, "ino", id.Ino, "err", err)
		return provider.CachedDigest{}
	}
	return d
}

// encodeDigest is the Badger value of a cached digest: dev, ino, size,
// mtime, ctime and hashing time as big-endian 64-bit words, then the
// version.
func encodeDigest(d provider.CachedDigest) []byte {
	b := make([]byte, 0, 6*8+len(d.Version))
	for _, w := range [...]uint64{d.Key.Dev, d.Key.Ino, uint64(d.Key.Size), uint64(d.Key.MtimeNs),
		uint64(d.Key.CtimeNs), uint64(d.HashedAtNs)} {
		b = binary.BigEndian.AppendUint64(b, w)
	}
	return append(b, d.Version...)
}

// decodeDigest reverses encodeDigest.
func decodeDigest(b []byte) (provider.CachedDigest, error) {
	if len(b) <= 6*8 {
		return provider.CachedDigest{}, fmt.Errorf("cached digest of %d bytes is too short", len(b))
	}
	w := func(i int) uint64 { return binary.BigEndian.Uint64(b[8*i:]) }
	return provider.CachedDigest{
		Key: provider.StatKey{Dev: w(0), Ino: w(1), Size: int64(w(2)), MtimeNs: int64(w(3)),
			CtimeNs: int64(w(4))},
		HashedAtNs: int64(w(5)),
		Version:    provider.Version(b[6*8:]),
	}, nil
}
