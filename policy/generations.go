package policy

import (
	"errors"
	"sync"

	"github.com/dgraph-io/badger/v4"

	"github.com/dshmount/dshmount/provider"
)

const generationShards = 64

// generations caches generations in sharded maps, bounded: a changed
// generation stays until Badger has it (dirty), then may be evicted, after
// which it is read from Badger again. Each shard queues the identities
// changed since the last flush, so a flush touches only those.
type generations struct {
	shards   [generationShards]generationShard
	shardCap int // clean entries kept per shard
	// floor is the lowest generation any identity reports: raised after an
	// unclean shutdown above every generation issued before it.
	floor uint64
}

type generationShard struct {
	mu     sync.Mutex
	m      map[provider.FileID]*genEntry
	queue  []provider.FileID // changed since the last takeDirty (may repeat)
	ndirty int
	// evictions counts evictions; a Badger read started before one may be
	// stale (the evicted value may be newer than what it read).
	evictions uint64
}

type genEntry struct {
	v      uint64
	dirty  bool // not yet in Badger
	queued bool // in the shard's queue
}

// genItem is one generation handed to the flusher.
type genItem struct {
	id provider.FileID
	v  uint64
}

func (g *generations) init(capacity int) {
	g.shardCap = max(capacity/generationShards, 1)
	for i := range g.shards {
		g.shards[i].m = make(map[provider.FileID]*genEntry)
	}
}

func (g *generations) shard(id provider.FileID) *generationShard {
	h := id.Ino*0x9e3779b97f4a7c15 ^ id.Dev
	return &g.shards[(h>>32)%generationShards]
}

// setLocked raises id's cached generation to v (never lowers it) and
// queues it for the flusher.
func (g *generations) setLocked(sh *generationShard, id provider.FileID, v uint64) {
	e := sh.m[id]
	if e == nil {
		g.evictLocked(sh, 1)
		e = &genEntry{}
		sh.m[id] = e
	}
	if v <= e.v {
		return
	}
	e.v = v
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
func (g *generations) evictLocked(sh *generationShard, room int) {
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

// takeDirty returns the generations changed since the last call; they stay
// dirty (never evicted) until flushed reports them written.
func (g *generations) takeDirty() []genItem {
	var items []genItem
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
			items = append(items, genItem{id: id, v: e.v})
		}
		sh.mu.Unlock()
	}
	return items
}

// flushed marks items as in Badger: entries unchanged since become clean,
// and shards over capacity shed clean entries.
func (g *generations) flushed(items []genItem) {
	for _, it := range items {
		sh := g.shard(it.id)
		sh.mu.Lock()
		if e := sh.m[it.id]; e != nil && e.dirty && e.v == it.v {
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

// requeue puts back generations whose flush failed.
func (g *generations) requeue(items []genItem) {
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

// size returns the number of cached generations and of dirty ones.
func (g *generations) size() (entries, dirty int) {
	for i := range g.shards {
		sh := &g.shards[i]
		sh.mu.Lock()
		entries += len(sh.m)
		dirty += sh.ndirty
		sh.mu.Unlock()
	}
	return entries, dirty
}

// Current implements provider.Generations: the generation of id, never below
// the crash floor. An identity never bumped reports the floor (zero on a
// store that never crashed).
func (s *Store) Current(id provider.FileID) uint64 {
	return max(s.cachedGeneration(id, 0), s.gens.floor)
}

// Bump implements provider.Generations: it gives id the next value of the
// one global counter, which never repeats, even across crashes. The new value
// is persisted by the next flush.
func (s *Store) Bump(id provider.FileID) uint64 {
	n := s.genSeq.next()
	s.cachedGeneration(id, n)
	s.buf.noteWrites(1)
	return n
}

// maxGenerationRetries bounds the Badger re-reads of one generation lookup
// that raced with evictions of its shard.
const maxGenerationRetries = 8

// cachedGeneration returns id's generation, loading it from Badger into the
// cache when it is not there, after raising it to bump (when non-zero). A
// Badger read is trusted only if its shard evicted nothing meanwhile: an
// evicted value may be newer than what the read saw.
func (s *Store) cachedGeneration(id provider.FileID, bump uint64) uint64 {
	sh := s.gens.shard(id)
	for range maxGenerationRetries {
		sh.mu.Lock()
		if e := sh.m[id]; e != nil {
			if bump != 0 {
				s.gens.setLocked(sh, id, bump)
			}
			v := e.v
			sh.mu.Unlock()
			return v
		}
		token := sh.evictions
		sh.mu.Unlock()

		v := s.loadGeneration(id)

		sh.mu.Lock()
		e := sh.m[id]
		if e == nil && sh.evictions != token {
			sh.mu.Unlock()
			continue // read again: the value may have been evicted meanwhile
		}
		if e == nil {
			s.gens.evictLocked(sh, 1)
			e = &genEntry{v: v}
			sh.m[id] = e
		}
		if bump != 0 {
			s.gens.setLocked(sh, id, bump)
		}
		v = e.v
		sh.mu.Unlock()
		return v
	}
	// Constant eviction races: answer a fresh value, the strict side (every
	// token issued for id so far is refused).
	n := s.genSeq.next()
	sh.mu.Lock()
	s.gens.setLocked(sh, id, max(n, bump))
	v := sh.m[id].v
	sh.mu.Unlock()
	s.log.Warn("generation cache kept evicting; treating the file as changed", "dev", id.Dev, "ino", id.Ino)
	return v
}

// loadGeneration reads the persisted generation of id (0 when none) from
// Badger. A read failure is logged and answers a fresh value of the global
// counter, so every token issued for id so far is refused: the strict side.
func (s *Store) loadGeneration(id provider.FileID) uint64 {
	var v uint64
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(generationKey(id))
		if err != nil {
			return err
		}
		return item.Value(func(b []byte) error {
			var derr error
			v, derr = decodeUint64(b)
			return derr
		})
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0
	}
	if err != nil {
		s.log.Error("read generation", "dev", id.Dev, "ino", id.Ino, "err", err)
		return s.genSeq.next()
	}
	return v
}
