package provider

import "sync"

// MemoryGenerations is a Generations kept in memory only, for tests and for a
// daemon run without a state directory.
type MemoryGenerations struct {
	mu   sync.Mutex
	next uint64
	gens map[FileID]uint64
}

// NewMemoryGenerations returns an empty in-memory Generations.
func NewMemoryGenerations() *MemoryGenerations {
	return &MemoryGenerations{gens: make(map[FileID]uint64)}
}

// Current implements Generations.
func (m *MemoryGenerations) Current(id FileID) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gens[id]
}

// Bump implements Generations. Values come from one counter shared by all
// identities, so a recycled inode number never returns to an old value.
func (m *MemoryGenerations) Bump(id FileID) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next++
	m.gens[id] = m.next
	return m.next
}
