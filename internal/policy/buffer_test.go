package policy

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuffer_FillNeverOverwritesANewerWrite(t *testing.T) {
	tests := []struct {
		name    string
		between func(b *writeBuffer, key []byte)
		want    string
	}{
		{"write while reading Badger", func(b *writeBuffer, key []byte) {
			b.put(key, []byte("new"), true)
		}, "new"},
		{"write, flush and eviction while reading Badger", func(b *writeBuffer, key []byte) {
			b.put(key, []byte("new"), true)
			b.flushed(b.takeDirty())
			for i := 0; i < 10*64; i++ { // push key out of the cache (capacity 64)
				k := []byte(fmt.Sprintf("other-%d", i))
				_, _, _, tok := b.get(k)
				b.fill(k, []byte("x"), false, tok)
			}
		}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newWriteBuffer(1<<20, 64)
			key := []byte("o/s-1\x00/ws/f")
			_, _, found, token := b.get(key)
			require.False(t, found)
			tc.between(b, key)
			b.fill(key, []byte("old"), false, token) // the stale Badger answer

			val, _, found, _ := b.get(key)
			if tc.want == "" {
				assert.False(t, found, "a stale fill must not be cached; the reader goes to Badger again")
				return
			}
			require.True(t, found)
			assert.Equal(t, tc.want, string(val))
		})
	}
}

func TestBuffer_FlushedKeepsNewerDirtyWrites(t *testing.T) {
	b := newWriteBuffer(1<<20, 64)
	key := []byte("w//ws/f")
	b.put(key, []byte("v1"), true)
	items := b.takeDirty()
	b.put(key, []byte("v2"), true) // arrives while v1 is being written
	b.flushed(items)

	again := b.takeDirty()
	require.Len(t, again, 1, "the newer write must still be flushed")
	assert.Equal(t, "v2", string(again[0].val))
}
