package control

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

// editPair alternates the bench file between two contents.
var editPair = [2][2]string{{"alpha", "omega"}, {"omega", "alpha"}}

// reportLatency reports throughput (unit, e.g. "edits/s") and the p50/p99 of per-op durations.
func reportLatency(b *testing.B, d []time.Duration, unit string) {
	b.Helper()
	if len(d) == 0 {
		return
	}
	var total time.Duration
	for _, x := range d {
		total += x
	}
	slices.Sort(d)
	b.ReportMetric(float64(len(d))/total.Seconds(), unit)
	b.ReportMetric(float64(d[len(d)*50/100].Microseconds()), "p50-µs")
	b.ReportMetric(float64(d[min(len(d)-1, len(d)*99/100)].Microseconds()), "p99-µs")
}

// BenchmarkEdit_Socket measures guarded fs.edit round trips over the socket:
// one read, then each edit is guarded by the version the previous returned.
func BenchmarkEdit_Socket(b *testing.B) {
	env := newTestEnv(b)
	env.file(b, "bench.txt", "package bench\n\nconst word = \"alpha\"\n")
	c := env.client(b)
	ctx := context.Background()
	session, err := c.OpenSession(ctx, "bench")
	require.NoError(b, err)
	r, err := c.Read(ctx, ReadParams{Path: "bench.txt", Session: session})
	require.NoError(b, err)
	version := r.Version
	durations := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		pair := editPair[i%2]
		start := time.Now()
		out, err := c.Edit(ctx, EditParams{Path: "bench.txt", OldString: pair[0], NewString: pair[1],
			Session: session, Expected: &VersionExpected{Version: version}})
		durations = append(durations, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		version = out.Version
	}
	b.StopTimer()
	reportLatency(b, durations, "edits/s")
}

// BenchmarkEdit_InProcess is the same guarded edit through the Engine
// directly, the baseline for the socket's overhead.
func BenchmarkEdit_InProcess(b *testing.B) {
	env := newTestEnv(b)
	env.file(b, "bench.txt", "package bench\n\nconst word = \"alpha\"\n")
	ctx := context.Background()
	sess, err := env.store.OpenSession("bench")
	require.NoError(b, err)
	a := policy.Actor{Session: sess.ID, Channel: policy.ChannelSocket}
	t, err := env.engine.FS().Resolve(ctx, "bench.txt", provider.ResolveOptions{})
	require.NoError(b, err)
	_, info, err := env.engine.Read(ctx, a, t)
	require.NoError(b, err)
	version := info.Version
	durations := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		pair := editPair[i%2]
		start := time.Now()
		out, err := env.engine.Edit(ctx, a, t, provider.EditRequest{OldString: pair[0], NewString: pair[1]},
			policy.Guard{Version: &provider.VersionGuard{Version: version}})
		durations = append(durations, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		version = out.Version
	}
	b.StopTimer()
	reportLatency(b, durations, "edits/s")
}

// BenchmarkStat_Socket isolates the socket's per-request overhead: a
// recorded fs.stat round trip, which does no fsync.
func BenchmarkStat_Socket(b *testing.B) {
	env := newTestEnv(b)
	env.file(b, "bench.txt", "x\n")
	c := env.client(b)
	ctx := context.Background()
	session, err := c.OpenSession(ctx, "bench")
	require.NoError(b, err)
	durations := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		if _, err := c.Stat(ctx, StatParams{Path: "bench.txt", Session: session}); err != nil {
			b.Fatal(err)
		}
		durations = append(durations, time.Since(start))
	}
	reportLatency(b, durations, "stats/s")
}

// BenchmarkStat_InProcess is the same recorded stat through the Engine.
func BenchmarkStat_InProcess(b *testing.B) {
	env := newTestEnv(b)
	env.file(b, "bench.txt", "x\n")
	ctx := context.Background()
	sess, err := env.store.OpenSession("bench")
	require.NoError(b, err)
	a := policy.Actor{Session: sess.ID, Channel: policy.ChannelSocket}
	durations := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		t, err := env.engine.FS().Resolve(ctx, "bench.txt", provider.ResolveOptions{})
		if err == nil {
			_, err = env.engine.Stat(ctx, a, t)
		}
		if err != nil {
			b.Fatal(err)
		}
		durations = append(durations, time.Since(start))
	}
	reportLatency(b, durations, "stats/s")
}

// bigText is about 1 MiB of typical source-width lines.
func bigText() string {
	var b []byte
	for i := 0; len(b) < 1<<20; i++ {
		b = fmt.Appendf(b, "line %07d of the one-mebibyte read benchmark, padded to a typical width\n", i)
	}
	return string(b[:1<<20])
}

// BenchmarkRead1MiB_Socket measures a whole-file fs.read of 1 MiB over the
// socket (every line, numbered).
func BenchmarkRead1MiB_Socket(b *testing.B) {
	env := newTestEnv(b)
	env.file(b, "big.txt", bigText())
	c := env.client(b)
	ctx := context.Background()
	session, err := c.OpenSession(ctx, "bench")
	require.NoError(b, err)
	limit, maxBytes := 1<<20, int64(2<<20)
	durations := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		r, err := c.Read(ctx, ReadParams{Path: "big.txt", Session: session, Limit: &limit, MaxBytes: &maxBytes})
		durations = append(durations, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		if r.TruncatedByBytes {
			b.Fatal("read was truncated")
		}
	}
	reportLatency(b, durations, "reads/s")
}
