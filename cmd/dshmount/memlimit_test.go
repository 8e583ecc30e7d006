package main

import (
	"context"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMemoryLimitFor_NeverSitsAtWhatTheHeapHolds pins the soft limit's rule: the
// floor while the heap is small, else 32 MiB above what it holds, so the
// collector never runs back to back.
func TestMemoryLimitFor_NeverSitsAtWhatTheHeapHolds(t *testing.T) {
	const floor = 128 << 20
	for _, c := range []struct {
		held uint64
		want int64
	}{
		{0, floor},
		{32 << 20, floor},
		{64 << 20, floor},
		{96 << 20, floor},
		{100 << 20, 132 << 20},
		{1 << 30, 1<<30 + 32<<20},
	} {
		got := memoryLimitFor(floor, c.held)
		assert.Equal(t, c.want, got, "held %d MiB", c.held>>20)
		assert.GreaterOrEqual(t, got-int64(c.held), int64(32<<20), "headroom at held %d MiB", c.held>>20)
	}
}

// TestFollowHeldMemory_TheLimitFollowsTheHeapUpAndDown pins that the limit is
// set at once, follows a heap that grows and shrinks, and is left alone
// while the heap holds steady.
func TestFollowHeldMemory_TheLimitFollowsTheHeapUpAndDown(t *testing.T) {
	var mu sync.Mutex
	held := uint64(10 << 20)
	var sets []int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		followHeldMemory(ctx, 128<<20, time.Millisecond,
			func() uint64 { mu.Lock(); defer mu.Unlock(); return held },
			func(l int64) int64 { mu.Lock(); defer mu.Unlock(); sets = append(sets, l); return 0 })
	}()
	waitFor := func(want int64) {
		t.Helper()
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(sets) > 0 && sets[len(sets)-1] == want
		}, 5*time.Second, time.Millisecond, "limit %d MiB", want>>20)
	}
	waitFor(128 << 20)
	mu.Lock()
	held = 200 << 20
	mu.Unlock()
	waitFor(232 << 20)
	time.Sleep(20 * time.Millisecond) // a steady heap sets nothing more
	mu.Lock()
	steady := append([]int64(nil), sets...)
	held = 20 << 20
	mu.Unlock()
	assert.Len(t, steady, 2, "sets while the heap held steady: %v", steady)
	waitFor(128 << 20)
	cancel()
	<-done
}

// TestHeldMemory_CountsTheLiveHeapAndWhatTheRuntimeKeepsAroundIt pins the
// measure the limit follows: at least the live heap, never more than the
// runtime holds from the system, and it grows with live objects.
func TestHeldMemory_CountsTheLiveHeapAndWhatTheRuntimeKeepsAroundIt(t *testing.T) {
	total := func() uint64 {
		s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64() - s[1].Value.Uint64()
	}
	runtime.GC()
	before := heldMemory()
	assert.Positive(t, before)
	assert.LessOrEqual(t, before, total())

	keep := make([][]byte, 64)
	for i := range keep {
		keep[i] = make([]byte, 1<<20)
	}
	runtime.GC()
	after := heldMemory()
	assert.GreaterOrEqual(t, after, before+48<<20, "64 MiB kept live")
	assert.LessOrEqual(t, after, total())
	runtime.KeepAlive(keep)
}
