package control

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/proctest"
	"github.com/dshmount/dshmount/internal/provider"
)

// peakRSSGrowth runs f and returns how far this process's resident set
// grew above what it was before f, at its peak (VmHWM after resetting it
// through /proc/self/clear_refs).
func peakRSSGrowth(t *testing.T, f func()) int64 {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	before, err := proctest.StatusBytes(os.Getpid(), "VmRSS")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile("/proc/self/clear_refs", []byte("5"), 0), "reset the peak resident set")
	f()
	peak, err := proctest.StatusBytes(os.Getpid(), "VmHWM")
	require.NoError(t, err)
	return peak - before
}

// concurrentReads runs n fs.read calls of p at once over a few connections
// and returns their results and errors.
func concurrentReads(t *testing.T, env *testEnv, n int, p ReadParams) ([]*ReadResult, []error) {
	clients := make([]*Client, 4)
	for i := range clients {
		clients[i] = env.client(t)
	}
	res, errs := make([]*ReadResult, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = clients[i%len(clients)].Read(context.Background(), p)
		}()
	}
	wg.Wait()
	return res, errs
}

// memoryBound is what a batch of reads may add to the daemon's resident
// set: the windows, a read buffer per read and the runtime's slack, far
// below one copy of the files read.
const memoryBound = 64 << 20

func TestRead_64ConcurrentReadsOfA1GiBFileKeepMemoryBounded(t *testing.T) {
	env := newTestEnv(t)
	// 1 GiB: 1 MiB of text lines, then a hole (NUL bytes: not text).
	p := filepath.Join(env.root, "big.log")
	f, err := os.Create(p)
	require.NoError(t, err)
	w := bufio.NewWriter(f)
	for i := 1; i <= 1<<20/16; i++ {
		fmt.Fprintf(w, "line %010d\n", i) // 16 bytes
	}
	require.NoError(t, w.Flush())
	require.NoError(t, f.Truncate(1<<30))
	require.NoError(t, f.Close())

	one := 1
	var errs []error
	grew := peakRSSGrowth(t, func() {
		_, errs = concurrentReads(t, env, 64, ReadParams{Path: "big.log", Limit: &one})
	})
	for _, err := range errs {
		require.Error(t, err)
		assert.Equal(t, provider.CodeNotText, provider.CodeOf(err), "the hole is NUL bytes: %v", err)
	}
	t.Logf("64 reads of a 1 GiB file: peak RSS grew by %d MiB", grew>>20)
	assert.Less(t, grew, int64(memoryBound), "64 concurrent reads of a 1 GiB file must not hold it in memory")
}

func TestRead_AWholeTextFileIsStreamedHashedAndCounted(t *testing.T) {
	env := newTestEnv(t)
	p := filepath.Join(env.root, "big.txt")
	f, err := os.Create(p)
	require.NoError(t, err)
	w := bufio.NewWriterSize(f, 1<<20)
	const lines = 64 << 20 / 16 // 64 MiB
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(w, "line %010d\n", i)
	}
	require.NoError(t, w.Flush())
	require.NoError(t, f.Close())

	offset, two := lines-1, 2
	var res []*ReadResult
	var errs []error
	start := time.Now()
	grew := peakRSSGrowth(t, func() {
		res, errs = concurrentReads(t, env, 8, ReadParams{Path: "big.txt", Offset: &offset, Limit: &two})
	})
	took := time.Since(start)
	c := env.client(t)
	st, err := c.Stat(context.Background(), StatParams{Path: "big.txt"})
	require.NoError(t, err)
	for i, err := range errs {
		require.NoError(t, err)
		assert.Equal(t, []Line{{Number: lines - 1, Text: fmt.Sprintf("line %010d", lines-1)}, {Number: lines, Text: fmt.Sprintf("line %010d", lines)}}, res[i].Lines)
		assert.Equal(t, lines, res[i].TotalLines)
		assert.Equal(t, st.Version, res[i].Version, "the version hashes every byte")
		assert.True(t, res[i].Observed)
	}
	t.Logf("8 reads of a 64 MiB text file: peak RSS grew by %d MiB, %v (%.0f MiB/s read, checked and hashed)",
		grew>>20, took.Round(time.Millisecond), 8*64/took.Seconds())
	assert.Less(t, grew, int64(memoryBound), "8 concurrent reads of a 64 MiB file must not hold it in memory")
}

func TestRead_WindowOverTheCapsIsTooLarge(t *testing.T) {
	env := newTestEnv(t)
	env.file(t, "f.txt", "x\n")
	c := env.client(t)
	big, many := int64(MaxReadMaxBytes+1), MaxReadLimit+1
	for _, p := range []ReadParams{{Path: "f.txt", MaxBytes: &big}, {Path: "f.txt", Limit: &many}} {
		_, err := c.Read(context.Background(), p)
		require.Error(t, err)
		assert.Equal(t, provider.CodeTooLarge, provider.CodeOf(err))
		assert.Contains(t, err.Error(), "offset")
		assert.Contains(t, err.Error(), "limit")
	}
}
