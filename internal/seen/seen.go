// Package seen keeps the bytes an author saw: a content-addressed cache of
// file contents read over the control socket (and MCP), keyed by the
// content version ("c1-" and the SHA-256) the version tokens carry, so that
// a change made against bytes that moved can be re-applied by a three-way
// merge (control's merge: true).
//
// Entries are files named by their hash in one directory of the state
// directory; equal bytes are kept once. The cache is bounded in bytes and
// evicts the least recently used entry first. It is emptied when opened:
// after a daemon restart it is safely empty (a merge then answers
// FS_STALE_VERSION, as without the cache), never stale.
//
// The package must not know about sessions, guards, paths or merging.
package seen

import (
	"bytes"
	"container/list"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/version"
)

// MaxFileBytes is the largest content kept (text files up to 8 MiB).
const MaxFileBytes = 8 << 20

// DefaultMaxBytes is the default bound of a cache (serve --merge-cache).
const DefaultMaxBytes = 256 << 20

// versionPrefix is the prefix of content versions.
const versionPrefix = "c1-"

// Cache is a bounded, content-addressed store of seen bytes. A nil *Cache
// is a disabled cache: Put keeps nothing and Get finds nothing.
type Cache struct {
	dir string
	max int64

	mu    sync.Mutex
	lru   *list.List // of *entry, most recently used first
	index map[string]*list.Element
	size  int64 // bytes on disk, all entries
}

type entry struct {
	hash string
	size int64
}

// Open empties dir (creating it, 0700) and returns a cache bounded by
// maxBytes there. maxBytes <= 0 disables the cache: Open returns nil and
// removes dir's old entries.
func Open(dir string, maxBytes int64) (*Cache, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("seen: empty %s: %w", dir, err)
	}
	if maxBytes <= 0 {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("seen: create %s: %w", dir, err)
	}
	return &Cache{dir: dir, max: maxBytes, lru: list.New(), index: make(map[string]*list.Element)}, nil
}

// hashOf returns the hex hash of a content version, or false when v is not
// one.
func hashOf(v provider.Version) (string, bool) {
	h, ok := strings.CutPrefix(string(v), versionPrefix)
	if !ok || len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
		return "", false
	}
	return h, true
}

// Put keeps data as the bytes of version v and reports whether it is kept.
// Data that is not v's bytes, is larger than MaxFileBytes or the bound, or
// holds a NUL byte (not text) is not kept. Equal bytes are kept once; a
// Put of kept bytes makes them the most recently used.
func (c *Cache) Put(v provider.Version, data []byte) (bool, error) {
	if c == nil || len(data) > MaxFileBytes || int64(len(data)) > c.max || bytes.IndexByte(data, 0) >= 0 {
		return false, nil
	}
	h, ok := hashOf(v)
	if !ok || version.OfBytes(data) != v {
		return false, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.index[h]; ok {
		c.lru.MoveToFront(el)
		return true, nil
	}
	if err := c.writeFile(h, data); err != nil {
		return false, err
	}
	c.index[h] = c.lru.PushFront(&entry{hash: h, size: int64(len(data))})
	c.size += int64(len(data))
	c.evict()
	return true, nil
}

// writeFile writes data as entry h: a temporary file renamed into place.
func (c *Cache) writeFile(h string, data []byte) error {
	f, err := os.CreateTemp(c.dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("seen: keep %s: %w", h, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(c.dir, h))
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("seen: keep %s: %w", h, err)
	}
	return nil
}

// evict drops the least recently used entries until the bound holds.
func (c *Cache) evict() {
	for c.size > c.max {
		el := c.lru.Back()
		if el == nil {
			return
		}
		c.drop(el)
	}
}

// drop removes one entry and its file.
func (c *Cache) drop(el *list.Element) {
	e := c.lru.Remove(el).(*entry)
	delete(c.index, e.hash)
	c.size -= e.size
	os.Remove(filepath.Join(c.dir, e.hash))
}

// Touch makes the kept bytes of version v the most recently used and
// reports whether they are kept (as a Put of those bytes would, without
// the bytes).
func (c *Cache) Touch(v provider.Version) bool {
	if c == nil {
		return false
	}
	h, ok := hashOf(v)
	if !ok {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.index[h]
	if ok {
		c.lru.MoveToFront(el)
	}
	return ok
}

// Get returns the kept bytes of version v, if any, and makes them the most
// recently used. Bytes that no longer hash to v (the file was damaged) are
// dropped and not returned.
func (c *Cache) Get(v provider.Version) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	h, ok := hashOf(v)
	if !ok {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.index[h]
	if !ok {
		return nil, false
	}
	data, err := os.ReadFile(filepath.Join(c.dir, h))
	if err != nil || version.OfBytes(data) != v {
		c.drop(el)
		return nil, false
	}
	c.lru.MoveToFront(el)
	return data, true
}

// Stats reports the entries kept and their bytes on disk.
func (c *Cache) Stats() (entries int, size int64) {
	if c == nil {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.index), c.size
}
