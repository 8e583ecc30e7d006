package fsx

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Remote replaces files by another path than the directory (dshmount's
// control socket). Names are slash paths relative to Config.Dir. Each call
// returns once the change is acknowledged: a later open through the
// directory must see it.
type Remote interface {
	// Write creates or replaces rel with content.
	Write(ctx context.Context, rel, content string) error
	// Edit replaces the one occurrence of old in rel by new, guarded by the
	// version the remote reads just before.
	Edit(ctx context.Context, rel, old, new string) error
}

// Config describes one run.
type Config struct {
	// Dir is the directory the workers operate in; it is created if
	// missing. Worker w uses Dir/wN, the concurrent remote file set
	// Dir/remote.
	Dir string
	// Backing, when set, is the same directory seen another way (the
	// mount's backing directory); at the end every file is compared with
	// the model there too, and no other names may exist there.
	Backing string
	// Seed makes the run reproducible; it is printed on every mismatch.
	Seed uint64
	// Ops is the total number of operations over all workers.
	Ops int
	// Workers is the number of concurrent workers (default 4).
	Workers int
	// Files is the number of names each worker plays with (default 4).
	Files int
	// MaxSize bounds a file's size (default 256 KiB).
	MaxSize int
	// MaxIO bounds one write or read (default 16 KiB).
	MaxIO int
	// LogLen is the number of operations kept for a mismatch report
	// (default 64).
	LogLen int
	// Mmap enables mmap reads and mmap writes; the first ENODEV disables
	// the kind and the reason is reported in Result.Unsupported (and, for
	// reads, Result.MmapUnsupported).
	Mmap bool
	// Remote, when set, adds inline remote writes and edits on closed
	// worker files and a concurrent remote writer on RemoteFiles files.
	Remote Remote
	// RemoteFiles is the size of the concurrent remote file set (default
	// 3 when Remote is set).
	RemoteFiles int

	// tamper, for this package's tests, runs after every operation with
	// the path of the file the operation touched.
	tamper func(path string)
	// fault, for this package's tests, names an operation kind whose
	// system call is made slightly wrong (another offset, length or
	// name) while the model records the intended call: planted corruption
	// the exerciser must report.
	fault string
}

func (c *Config) withDefaults() Config {
	out := *c
	if out.Workers <= 0 {
		out.Workers = 4
	}
	if out.Files <= 0 {
		out.Files = 4
	}
	if out.MaxSize <= 0 {
		out.MaxSize = 256 << 10
	}
	if out.MaxIO <= 0 {
		out.MaxIO = 16 << 10
	}
	if out.MaxIO > out.MaxSize {
		out.MaxIO = out.MaxSize
	}
	if out.LogLen <= 0 {
		out.LogLen = 64
	}
	if out.Remote != nil && out.RemoteFiles <= 0 {
		out.RemoteFiles = 3
	}
	return out
}

// Result summarises a run.
type Result struct {
	Ops             int               // operations performed by the workers
	Elapsed         time.Duration     // wall time of the workers
	Counts          map[string]int    // operations per kind (picked)
	Skipped         map[string]int    // picked operations that found nothing to act on and did a stat
	RemoteWrites    int               // acknowledged concurrent remote mutations
	MmapUnsupported string            // why mmap reads were disabled, "" if they ran
	Unsupported     map[string]string // kinds the file system does not support → why
}

// Performed is the number of operations of kind that did their own work
// (picked and not skipped).
func (r Result) Performed(kind string) int { return r.Counts[kind] - r.Skipped[kind] }

// OpsPerSecond is the workers' throughput.
func (r Result) OpsPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Elapsed.Seconds()
}

// String renders "fsx: N ops in D (X ops/s)" followed by the counts.
func (r Result) String() string {
	kinds := make([]string, 0, len(r.Counts))
	for k := range r.Counts {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var b strings.Builder
	fmt.Fprintf(&b, "fsx: %d ops in %s (%.0f ops/s)", r.Ops, r.Elapsed.Round(time.Millisecond), r.OpsPerSecond())
	for _, k := range kinds {
		fmt.Fprintf(&b, " %s=%d", k, r.Counts[k])
		if n := r.Skipped[k]; n > 0 {
			fmt.Fprintf(&b, "(%d skipped)", n)
		}
	}
	if r.RemoteWrites > 0 {
		fmt.Fprintf(&b, " concurrent-remote=%d", r.RemoteWrites)
	}
	off := make([]string, 0, len(r.Unsupported))
	for k := range r.Unsupported {
		off = append(off, k)
	}
	sort.Strings(off)
	for _, k := range off {
		fmt.Fprintf(&b, " (%s off: %s)", k, r.Unsupported[k])
	}
	return b.String()
}

// MismatchError reports a read that disagreed with the model, or an
// operation that failed when the model said it must succeed (or the
// reverse). It carries what is needed to replay the run.
type MismatchError struct {
	Seed   uint64   // the run's seed
	Worker int      // worker index, -1 for the final check or the remote writer
	Op     int      // index of the failing operation within the worker
	Detail string   // what differed
	Log    []string // the last operations of the worker, oldest first
}

// Error renders the seed, the detail and the operation log.
func (e *MismatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fsx mismatch (seed %d, worker %d, op %d): %s", e.Seed, e.Worker, e.Op, e.Detail)
	if len(e.Log) > 0 {
		fmt.Fprintf(&b, "\nlast %d operations of the worker (replay with DSH_FSX_SEED=%d):", len(e.Log), e.Seed)
		for _, l := range e.Log {
			b.WriteString("\n  ")
			b.WriteString(l)
		}
	}
	return b.String()
}
