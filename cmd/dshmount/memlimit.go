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

// memoryLimitPeriod is how often the soft limit follows what the heap holds.
const memoryLimitPeriod = time.Second

// memoryLimitFor is the soft limit for a heap that needs held bytes (its
// live objects and what the runtime holds around them, heldMemory): the
// floor, or held plus a quarter of the floor (32 MiB) once that is larger.
// A limit at or below what the heap holds makes the collector run back to
// back (up to the half of the CPU its limiter allows): a workspace whose
// files the kernel holds (tens of thousands of inodes, the tree watcher's
// snapshot) has a live heap near 100 MiB, and tens of MiB more held in
// partly used spans once files come and go (git add after tar -x). The
// headroom lets the collector run about once per 32 MiB allocated, and
// 100,000 files created through the mount end below the 200 MiB of RSS the
// bench holds the daemon to.
func memoryLimitFor(floor int64, held uint64) int64 {
	return max(floor, int64(held)+memoryHeadroom(floor))
}

// memoryHeadroom is how far above what the heap holds the limit sits.
func memoryHeadroom(floor int64) int64 { return floor / 4 }

// followHeldMemory keeps the runtime's soft memory limit at
// memoryLimitFor(floor, held) until ctx ends, checking every period; held
// reads what the heap holds (heldMemory), set sets the limit. The limit
// rises at once and falls only by more than an eighth, so a steady heap
// sets nothing.
func followHeldMemory(ctx context.Context, floor int64, period time.Duration, held func() uint64, set func(int64) int64) {
	limit := memoryLimitFor(floor, held())
	set(limit)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		want := memoryLimitFor(floor, held())
		if want > limit+1<<20 || limit-want > limit/8 {
			limit = want
			set(limit)
		}
	}
}

// heldMemory is what the heap holds with no garbage: the objects the last
// collection found live, plus what the runtime keeps around objects (the
// unused room of partly used spans, stacks, its metadata); free pages it
// could return are not counted.
func heldMemory() uint64 {
	s := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
	}
	metrics.Read(s)
	var v [5]uint64
	for i := range s {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		v[i] = s[i].Value.Uint64()
	}
	live, total, released, free, objects := v[0], v[1], v[2], v[3], v[4]
	around := total - released - free - objects // unused span room, stacks, metadata
	return live + around
}

// startMemoryLimit applies the daemon's soft memory limit rule unless
// GOMEMLIMIT is set; it follows the heap until ctx ends.
func startMemoryLimit(ctx context.Context, gomemlimitSet bool) {
	if gomemlimitSet {
		return
	}
	go followHeldMemory(ctx, defaultMemoryLimit, memoryLimitPeriod, heldMemory, debug.SetMemoryLimit)
}
