package seen

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider/version"
)

func open(t *testing.T, max int64) (*Cache, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "seen")
	c, err := Open(dir, max)
	require.NoError(t, err)
	return c, dir
}

func put(t *testing.T, c *Cache, s string) bool {
	t.Helper()
	ok, err := c.Put(version.OfBytes([]byte(s)), []byte(s))
	require.NoError(t, err)
	return ok
}

func has(c *Cache, s string) bool {
	_, ok := c.Get(version.OfBytes([]byte(s)))
	return ok
}

func files(t *testing.T, dir string) int {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	return len(es)
}

func TestSeen_KeepsOnlyWhatItMayKeep(t *testing.T) {
	c, _ := open(t, 1<<30)
	big := strings.Repeat("x", MaxFileBytes+1)
	cases := []struct {
		name string
		v    string
		data string
		kept bool
	}{
		{"text under its own version", string(version.OfBytes([]byte("a\n"))), "a\n", true},
		{"empty file", string(version.OfBytes(nil)), "", true},
		{"bytes that are not the version's", string(version.OfBytes([]byte("b\n"))), "c\n", false},
		{"metadata version", "m1-0123456789abcdef", "d\n", false},
		{"binary (NUL byte)", string(version.OfBytes([]byte("e\x00"))), "e\x00", false},
		{"over 8 MiB", string(version.OfBytes([]byte(big))), big, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ok, err := c.Put(providerVersion(tc.v), []byte(tc.data))
			require.NoError(t, err)
			assert.Equal(t, tc.kept, ok)
			got, found := c.Get(providerVersion(tc.v))
			assert.Equal(t, tc.kept, found)
			if tc.kept {
				assert.Equal(t, tc.data, string(got))
			}
		})
	}
}

func TestSeen_EqualBytesKeptOnce(t *testing.T) {
	c, dir := open(t, 1<<20)
	for i := 0; i < 5; i++ {
		require.True(t, put(t, c, "same\n"))
	}
	n, size := c.Stats()
	assert.Equal(t, 1, n)
	assert.Equal(t, int64(5), size)
	assert.Equal(t, 1, files(t, dir))
}

func TestSeen_BoundEvictsLeastRecentlyUsedFirst(t *testing.T) {
	c, dir := open(t, 30) // three 10-byte entries
	for _, s := range []string{"aaaaaaaaa\n", "bbbbbbbbb\n", "ccccccccc\n"} {
		require.True(t, put(t, c, s))
	}
	require.True(t, has(c, "aaaaaaaaa\n")) // a is now the most recent; b the least
	require.True(t, put(t, c, "ddddddddd\n"))
	assert.False(t, has(c, "bbbbbbbbb\n"), "the least recently used entry is evicted")
	assert.True(t, has(c, "aaaaaaaaa\n"))
	assert.True(t, has(c, "ccccccccc\n"))
	assert.True(t, has(c, "ddddddddd\n"))
	n, size := c.Stats()
	assert.Equal(t, 3, n)
	assert.Equal(t, int64(30), size)
	assert.Equal(t, 3, files(t, dir), "an evicted entry's file is removed")
}

func TestSeen_LargerThanBoundNotKept(t *testing.T) {
	c, _ := open(t, 4)
	assert.False(t, put(t, c, "12345\n"))
}

func TestSeen_RestartIsSafelyEmpty(t *testing.T) {
	c, dir := open(t, 1<<20)
	require.True(t, put(t, c, "seen before\n"))
	c2, err := Open(dir, 1<<20)
	require.NoError(t, err)
	assert.False(t, has(c2, "seen before\n"))
	assert.Equal(t, 0, files(t, dir), "old entries are removed, not left unaccounted on disk")
}

func TestSeen_DisabledKeepsNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "seen")
	c, err := Open(dir, 0)
	require.NoError(t, err)
	assert.Nil(t, c)
	assert.False(t, put(t, c, "x\n"))
	assert.False(t, has(c, "x\n"))
	_, err = os.Stat(dir)
	assert.True(t, os.IsNotExist(err))
}

func TestSeen_DamagedEntryDropped(t *testing.T) {
	c, dir := open(t, 1<<20)
	require.True(t, put(t, c, "good\n"))
	h, _ := hashOf(version.OfBytes([]byte("good\n")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, h), []byte("bad\n"), 0o600))
	assert.False(t, has(c, "good\n"))
	n, _ := c.Stats()
	assert.Equal(t, 0, n)
}

// BenchmarkSeen_10000DistinctReads keeps the bytes of at least 10,000
// distinct ~4 KiB files (one op is one kept file; b.N beyond 10,000 keeps
// more) and reports the cache's disk use and the heap its index holds.
func BenchmarkSeen_10000DistinctReads(b *testing.B) {
	c, err := Open(filepath.Join(b.TempDir(), "seen"), DefaultMaxBytes)
	require.NoError(b, err)
	n := max(b.N, 10000)
	var before, after runtimeMem
	before.read()
	b.ResetTimer()
	for j := 0; j < n; j++ {
		data := []byte(fmt.Sprintf("file %d\n%s", j, strings.Repeat("line of text\n", 315)))
		if _, err := c.Put(version.OfBytes(data), data); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	after.read()
	entries, size := c.Stats()
	b.ReportMetric(float64(entries), "entries")
	b.ReportMetric(float64(size)/(1<<20), "disk-MiB")
	b.ReportMetric(float64(after.heap-before.heap)/(1<<20), "heap-MiB")
}

func TestSeen_TouchReportsKeptBytesAndMakesThemRecent(t *testing.T) {
	c, _ := open(t, 30) // three 10-byte entries
	assert.False(t, c.Touch(version.OfBytes([]byte("aaaaaaaaa\n"))), "nothing kept yet")
	for _, s := range []string{"aaaaaaaaa\n", "bbbbbbbbb\n", "ccccccccc\n"} {
		require.True(t, put(t, c, s))
	}
	require.True(t, c.Touch(version.OfBytes([]byte("aaaaaaaaa\n")))) // a is now the most recent; b the least
	require.True(t, put(t, c, "ddddddddd\n"))
	assert.False(t, has(c, "bbbbbbbbb\n"), "the least recently used entry is evicted")
	assert.True(t, has(c, "aaaaaaaaa\n"))
	var none *Cache
	assert.False(t, none.Touch(version.OfBytes([]byte("x"))), "a disabled cache keeps nothing")
}
