package policy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dshmount/dshmount/internal/policy/kv"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/shardcache"
)

const digestShards = 64

// digests caches content digests (provider.CachedDigest) by file identity,
// bounded: a changed entry stays until Badger has it (dirty), then may be
// evicted, after which it is read from Badger again. It is a cache: losing
// an entry costs one rehash.
type digests struct {
	c *shardcache.Cache[provider.FileID, provider.CachedDigest]
}

// digestItem is one entry handed to the flusher.
type digestItem struct {
	id   provider.FileID
	d    provider.CachedDigest
	item shardcache.Item[provider.FileID, provider.CachedDigest]
}

func (g *digests) init(capacity int) {
	g.c = shardcache.New(shardcache.Config[provider.FileID, provider.CachedDigest]{
		Shards: digestShards, Capacity: capacity,
		Hash:  func(id provider.FileID) uint64 { return (id.Ino*0x9e3779b97f4a7c15 ^ id.Dev) >> 32 },
		Equal: func(a, b provider.CachedDigest) bool { return a == b },
	})
}

// takeDirty returns the entries changed since the last call; they stay
// dirty (never evicted) until flushed reports them written.
func (g *digests) takeDirty() []digestItem {
	taken := g.c.TakeDirty()
	items := make([]digestItem, len(taken))
	for i, it := range taken {
		items[i] = digestItem{id: it.Key, d: it.Val, item: it}
	}
	return items
}

// flushed marks items as in Badger.
func (g *digests) flushed(items []digestItem) { g.c.Flushed(digestCacheItems(items)) }

// requeue puts back entries whose flush failed.
func (g *digests) requeue(items []digestItem) { g.c.Requeue(digestCacheItems(items)) }

func digestCacheItems(items []digestItem) []shardcache.Item[provider.FileID, provider.CachedDigest] {
	out := make([]shardcache.Item[provider.FileID, provider.CachedDigest], len(items))
	for i, it := range items {
		out[i] = it.item
	}
	return out
}

// size returns the number of cached entries and of dirty ones.
func (g *digests) size() (entries, dirty int) { return g.c.Size() }

var _ provider.DigestCache = (*Store)(nil)

// Digest implements provider.DigestCache: the entry of id from memory, else
// from Badger.
func (s *Store) Digest(id provider.FileID) (provider.CachedDigest, bool) {
	return s.cachedDigest(id)
}

// RememberDigest implements provider.DigestCache. The entry is persisted by
// the next flush.
func (s *Store) RememberDigest(id provider.FileID, d provider.CachedDigest) {
	s.digests.c.Put(id, d, true)
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
	for range maxDigestRetries {
		d, found, token := s.digests.c.Get(id)
		if found {
			return d, d.Version != ""
		}
		d, ok := s.digests.c.Fill(id, s.loadDigest(id), token)
		if !ok {
			continue // read again: the value may have been evicted meanwhile
		}
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
func (s *Store) loadDigest(id provider.FileID) provider.CachedDigest { return s.rec.loadDigest(id) }

// loadDigestLocal is loadDigest on a local engine.
func (s *Store) loadDigestLocal(id provider.FileID) provider.CachedDigest {
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
