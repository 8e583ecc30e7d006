package policy

import (
	"sync"

	"github.com/dshmount/dshmount/provider"
)

const generationShards = 64

// generations keeps every generation seen in memory, in sharded maps, and
// remembers which ones changed since the last flush.
type generations struct {
	shards [generationShards]generationShard
	// floor is the lowest generation any identity reports: raised after an
	// unclean shutdown above every generation issued before it.
	floor uint64
}

type generationShard struct {
	mu    sync.RWMutex
	m     map[provider.FileID]uint64
	dirty map[provider.FileID]uint64
}

func (g *generations) init() {
	for i := range g.shards {
		g.shards[i].m = make(map[provider.FileID]uint64)
		g.shards[i].dirty = make(map[provider.FileID]uint64)
	}
}

func (g *generations) shard(id provider.FileID) *generationShard {
	h := id.Ino*0x9e3779b97f4a7c15 ^ id.Dev
	return &g.shards[(h>>32)%generationShards]
}

// takeDirty returns and forgets the generations changed since the last call.
func (g *generations) takeDirty() map[provider.FileID]uint64 {
	var all map[provider.FileID]uint64
	for i := range g.shards {
		sh := &g.shards[i]
		sh.mu.Lock()
		if len(sh.dirty) > 0 {
			if all == nil {
				all = make(map[provider.FileID]uint64)
			}
			for id, v := range sh.dirty {
				all[id] = v
			}
			sh.dirty = make(map[provider.FileID]uint64)
		}
		sh.mu.Unlock()
	}
	return all
}

// restoreDirty puts back generations whose flush failed, unless they
// changed meanwhile.
func (g *generations) restoreDirty(gens map[provider.FileID]uint64) {
	for id, v := range gens {
		sh := g.shard(id)
		sh.mu.Lock()
		if _, ok := sh.dirty[id]; !ok {
			sh.dirty[id] = v
		}
		sh.mu.Unlock()
	}
}

// Current implements provider.Generations: the generation of id, never below
// the crash floor. An identity never bumped reports the floor (zero on a
// store that never crashed).
func (s *Store) Current(id provider.FileID) uint64 {
	sh := s.gens.shard(id)
	sh.mu.RLock()
	v, ok := sh.m[id]
	sh.mu.RUnlock()
	if !ok {
		v = s.loadGeneration(id)
		sh.mu.Lock()
		if cur, ok := sh.m[id]; ok {
			v = cur // bumped meanwhile
		} else {
			sh.m[id] = v
		}
		sh.mu.Unlock()
	}
	return max(v, s.gens.floor)
}

// Bump implements provider.Generations: it gives id the next value of the
// one global counter, which never repeats, even across crashes. The new value
// is persisted by the next flush.
func (s *Store) Bump(id provider.FileID) uint64 {
	n := s.genSeq.next()
	sh := s.gens.shard(id)
	sh.mu.Lock()
	if n > sh.m[id] {
		sh.m[id] = n
		sh.dirty[id] = n
	}
	sh.mu.Unlock()
	s.buf.noteWrites(1)
	return n
}

// loadGeneration reads the persisted generation of id (0 when none). A read
// failure is logged and answers a fresh value of the global counter, so
// every token issued for id so far is refused: the strict side.
func (s *Store) loadGeneration(id provider.FileID) uint64 {
	val, ok, err := s.lookup(generationKey(id))
	if err != nil {
		s.log.Error("read generation", "dev", id.Dev, "ino", id.Ino, "err", err)
		return s.genSeq.next()
	}
	if !ok {
		return 0
	}
	v, err := decodeUint64(val)
	if err != nil {
		s.log.Error("decode generation", "dev", id.Dev, "ino", id.Ino, "err", err)
		return s.genSeq.next()
	}
	return v
}
