package shardcache

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newTest(capacity int) *Cache[int, string] {
	return New(Config[int, string]{Shards: 1, Capacity: capacity, Hash: func(k int) uint64 { return uint64(k) },
		Equal: func(a, b string) bool { return a == b }})
}

func TestCache_Rules(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, c *Cache[int, string])
	}{
		{"dirty entries are never evicted", func(t *testing.T, c *Cache[int, string]) {
			for k := range 10 {
				c.Put(k, "v", true)
			}
			n, dirty := c.Size()
			assert.Equal(t, 10, n)
			assert.Equal(t, 10, dirty)
			c.Flushed(c.TakeDirty())
			n, dirty = c.Size()
			assert.LessOrEqual(t, n, 2, "clean entries shrink to the capacity")
			assert.Zero(t, dirty)
		}},
		{"a write after TakeDirty stays dirty through Flushed", func(t *testing.T, c *Cache[int, string]) {
			c.Put(1, "a", true)
			items := c.TakeDirty()
			c.Put(1, "b", true)
			c.Flushed(items)
			_, dirty := c.Size()
			assert.Equal(t, 1, dirty)
			again := c.TakeDirty()
			require.Len(t, again, 1)
			assert.Equal(t, "b", again[0].Val)
		}},
		{"an entry not kept leaves once flushed", func(t *testing.T, c *Cache[int, string]) {
			c.Put(1, "a", false)
			c.Flushed(c.TakeDirty())
			_, found, _ := c.Get(1)
			assert.False(t, found)
		}},
		{"an equal write is a no-op", func(t *testing.T, c *Cache[int, string]) {
			c.Put(1, "a", true)
			c.Flushed(c.TakeDirty())
			assert.False(t, c.Put(1, "a", true))
			assert.Empty(t, c.TakeDirty())
		}},
		{"a failed flush is requeued", func(t *testing.T, c *Cache[int, string]) {
			c.Put(1, "a", true)
			c.Requeue(c.TakeDirty())
			assert.Len(t, c.TakeDirty(), 1)
		}},
		{"a fill racing a removal is refused, one racing a write keeps the write", func(t *testing.T, c *Cache[int, string]) {
			_, _, token := c.Get(1)
			c.Put(2, "x", false)
			c.Flushed(c.TakeDirty()) // removes 2
			_, ok := c.Fill(1, "old", token)
			assert.False(t, ok)
			_, _, token = c.Get(1)
			c.Put(1, "new", true)
			got, ok := c.Fill(1, "old", token)
			assert.True(t, ok)
			assert.Equal(t, "new", got)
		}},
		{"DropIf forgets dirty entries too", func(t *testing.T, c *Cache[int, string]) {
			c.Put(1, "a", true)
			c.Put(2, "b", true)
			c.DropIf(func(k int) bool { return k == 1 })
			n, dirty := c.Size()
			assert.Equal(t, 1, n)
			assert.Equal(t, 1, dirty)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, newTest(2)) })
	}
}
