package control

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy"
)

// BenchmarkMergeEdit1MiB_Socket measures a merge: true fs.edit of a 1 MiB
// file over the socket whose version another session moved (a change far
// from the edit): the merge's read of the kept and current bytes, the
// three-way merge and the guarded write. Setup per op (the file, the
// reads, the other session's edit) is not timed.
func BenchmarkMergeEdit1MiB_Socket(b *testing.B) {
	env := newTestEnv(b, withSeen(b, 64<<20))
	c := env.client(b)
	ctx := context.Background()
	sa, err := c.OpenSession(ctx, "a")
	require.NoError(b, err)
	sb, err := c.OpenSession(ctx, "b")
	require.NoError(b, err)
	content := numbered(1<<20/10, "\n")
	require.Greater(b, len(content), 1<<20-64)
	d := make([]time.Duration, 0, b.N)
	var cpu time.Duration
	b.SetBytes(int64(len(content)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		env.file(b, "big.txt", content)
		for _, s := range []policy.SessionID{sa, sb} {
			_, err := c.Read(ctx, ReadParams{Path: "big.txt", Session: s})
			require.NoError(b, err)
		}
		_, err := c.Edit(ctx, EditParams{Path: "big.txt", OldString: "line 80000\n", NewString: "line 80000 by b\n", Session: sb})
		require.NoError(b, err)
		b.StartTimer()
		cpu0 := processCPU(b)
		t0 := time.Now()
		res, err := c.Edit(ctx, EditParams{Path: "big.txt", OldString: "line 10\n", NewString: "line 10 by a\n", Session: sa, Merge: true})
		d = append(d, time.Since(t0))
		cpu += processCPU(b) - cpu0
		b.StopTimer()
		require.NoError(b, err)
		require.True(b, res.Merged)
		got, _ := env.content(b, "big.txt")
		require.True(b, strings.Contains(got, "line 10 by a\n") && strings.Contains(got, "line 80000 by b\n"))
		b.StartTimer()
	}
	b.StopTimer()
	reportLatency(b, d, "merges/s")
	// The CPU the process (client and daemon) spent in the merge edits: on
	// a machine shared with other work it shows the cost that the wall
	// clock latency hides behind waiting for a core.
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
}

// processCPU is the user and system CPU time the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
