package policy

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

// BenchmarkDecideAndRecord measures the policy hot path: decide a write
// intent, record the resulting observation, remember a digest.
// decisions/s = 1e9 / ns_per_op.
func BenchmarkDecideAndRecord(b *testing.B) {
	s := openStore(b, b.TempDir(), quietOptions())
	d := NewObservationDecider(s)
	const nsessions, nkeys = 16, 4096
	actors := make([]Actor, nsessions)
	for i := range actors {
		actors[i] = openSession(b, s)
	}
	keys := make([]provider.Target, nkeys)
	for i := range keys {
		keys[i] = provider.Target{Key: provider.Key(fmt.Sprintf("/ws/dir/file-%d.go", i)), DisplayPath: fmt.Sprintf("dir/file-%d.go", i)}
	}
	var worker atomic.Int64
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := int(worker.Add(1))
		a := actors[w%nsessions]
		for i := w * 7919; pb.Next(); i++ {
			t := keys[i%nkeys]
			if _, err := d.WriteIntent(ctx, a, t); err != nil {
				b.Fatal(err)
			}
			d := digestFor(provider.FileID{Dev: 1, Ino: uint64(i % nkeys)}, i)
			s.RememberDigest(provider.FileID{Dev: 1, Ino: uint64(i % nkeys)}, d)
			if err := s.Record(a.Session, t.Key, Present(d.Version)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// BenchmarkOpenMemory reports the resident memory added by Open (MiB) and
// after 100k observations, cached digests and audit entries.
func BenchmarkOpenMemory(b *testing.B) {
	for i := 0; i < b.N; i++ {
		before := vmRSS(b)
		s, err := openDir(b.TempDir(), quietOptions())
		require.NoError(b, err)
		opened := vmRSS(b)
		sess, err := s.OpenSession("mem")
		require.NoError(b, err)
		for j := 0; j < 100_000; j++ {
			key := provider.Key(fmt.Sprintf("/ws/dir/file-%d.go", j))
			d := digestFor(provider.FileID{Dev: 1, Ino: uint64(j)}, j)
			s.RememberDigest(provider.FileID{Dev: 1, Ino: uint64(j)}, d)
			require.NoError(b, s.Record(sess.ID, key, Present(d.Version)))
			require.NoError(b, s.AppendAudit(AuditEntry{Key: key, Path: string(key), Op: OpWrite}))
		}
		require.NoError(b, s.Flush())
		loaded := vmRSS(b)
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		require.NoError(b, s.Close())
		b.ReportMetric(float64(opened-before)/(1<<20), "MiB-open")
		b.ReportMetric(float64(loaded-before)/(1<<20), "MiB-100k")
		b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "MiB-heap-100k")
	}
}

// vmRSS reads the process's resident set size in bytes, after returning
// garbage to the OS so only live memory counts.
func vmRSS(tb testing.TB) int64 {
	runtime.GC()
	debug.FreeOSMemory()
	f, err := os.Open("/proc/self/status")
	require.NoError(tb, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			require.NoError(tb, err)
			return kb << 10
		}
	}
	tb.Fatal("no VmRSS in /proc/self/status")
	return 0
}
