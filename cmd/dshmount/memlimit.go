package main

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// defaultMemoryLimit is the floor of the daemon's soft heap limit (GOMEMLIMIT
// overrides the whole rule): below it the collector runs more often and
// returns freed memory to the system, so transient peaks (Badger flushing
// memtables and compacting) do not leave a small daemon's RSS at twice its
// live heap.
const defaultMemoryLimit = 128 << 20

// memoryLimitPeriod is how often the soft limit follows the live heap.
const memoryLimitPeriod = time.Second

// memoryLimitFor is the soft limit for a live heap of live bytes: the
// floor, or the live heap plus three eighths of the floor (48 MiB) once
// that is larger. A fixed limit near the live heap makes the collector run
// back to back (up to the half of the CPU its limiter allows): a workspace
// whose files the kernel holds (tens of thousands of inodes, the tree
// watcher's snapshot) has a live heap past 100 MiB, and removing it then
// cost three times the CPU. The limit counts all of the runtime's memory,
// so the heap's own headroom is about half of that: 100,000 files held
// (110 MiB live) end near 180 MiB of RSS, where half the floor ended past
// the 200 MiB the bench holds the daemon to.
func memoryLimitFor(floor int64, live uint64) int64 {
	return max(floor, int64(live)+memoryHeadroom(floor))
}

// memoryHeadroom is how far above the live heap the limit sits.
func memoryHeadroom(floor int64) int64 { return floor * 3 / 8 }

// followLiveHeap keeps the runtime's soft memory limit at
// memoryLimitFor(floor, live heap) until ctx ends, checking every period;
// live reads the live heap, set sets the limit.
func followLiveHeap(ctx context.Context, floor int64, period time.Duration, live func() uint64, set func(int64) int64) {
	limit := memoryLimitFor(floor, live())
	set(limit)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		want := memoryLimitFor(floor, live())
		// Move only by more than an eighth, so a steady heap sets nothing.
		if diff := want - limit; diff > limit/8 || -diff > limit/8 {
			limit = want
			set(limit)
		}
	}
}

// liveHeap is the heap the last collection found live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// startMemoryLimit applies the daemon's soft memory limit rule unless
// GOMEMLIMIT is set; it follows the live heap until ctx ends.
func startMemoryLimit(ctx context.Context, gomemlimitSet bool) {
	if gomemlimitSet {
		return
	}
	go followLiveHeap(ctx, defaultMemoryLimit, memoryLimitPeriod, liveHeap, debug.SetMemoryLimit)
}
