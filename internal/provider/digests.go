package provider

import "sync"

// StatKey is the stat identity under which a content digest was computed:
// the file's storage identity, size and change times. A cached digest is
// used only while the file's stat still has exactly this key.
type StatKey struct {
	Dev, Ino uint64
	Size     int64
	MtimeNs  int64
	CtimeNs  int64
}

// CachedDigest is one remembered content version.
type CachedDigest struct {
	Key     StatKey
	Version Version
	// HashedAtNs is the wall-clock time (Unix ns) at which reading the
	// bytes began. Together with Key's times it decides whether the entry
	// can be trusted (the racy-clean rule of provider/version.Versioner).
	HashedAtNs int64
}

// DigestCache remembers the content version of files by storage identity,
// so that stat and listing calls need not read every file's bytes. It is a
// cache: a lost or evicted entry only costs a rehash, and entries are never
// consulted on a guard's decision path. The policy store implements it
// persistently; NewMemoryDigests is the in-memory one.
type DigestCache interface {
	// Digest returns the entry remembered for id, if any.
	Digest(id FileID) (CachedDigest, bool)
	// RememberDigest replaces the entry of id.
	RememberDigest(id FileID, d CachedDigest)
}

// MemoryDigests is a DigestCache kept in memory only, for tests and for a
// daemon run without a state directory. It is unbounded.
type MemoryDigests struct {
	mu sync.Mutex
	m  map[FileID]CachedDigest
}

// NewMemoryDigests returns an empty in-memory DigestCache.
func NewMemoryDigests() *MemoryDigests {
	return &MemoryDigests{m: make(map[FileID]CachedDigest)}
}

// Digest implements DigestCache.
func (c *MemoryDigests) Digest(id FileID) (CachedDigest, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.m[id]
	return d, ok
}

// RememberDigest implements DigestCache.
func (c *MemoryDigests) RememberDigest(id FileID, d CachedDigest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[id] = d
}
