package main

import (
	"bytes"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLoopbackStats_ReadsCountsAndCPUAndRequestsSkipForget pins the
// loopback's -stats reply format and that FORGET is no request of a step.
func TestLoopbackStats_ReadsCountsAndCPUAndRequestsSkipForget(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "stats.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_, _ = c.Write([]byte(`{"fuseRequests":{"LOOKUP":2,"CREATE":1,"FORGET":5},"cpuSeconds":0.25}` + "\n"))
		_ = c.Close()
	}()
	counts, cpu, err := loopbackStats(sock)()
	require.NoError(t, err)
	assert.Equal(t, map[string]uint64{"LOOKUP": 2, "CREATE": 1, "FORGET": 5}, counts)
	assert.Equal(t, 0.25, cpu)
	assert.Equal(t, uint64(3), requestsOf(counts))
}

func TestPrintRequests_RatioToTheLoopbackWithEachTarget(t *testing.T) {
	rows := []*RequestRow{
		{Step: "create", Target: reqLoopback, Units: 10, PerUnit: map[string]float64{"CREATE": 1, "LOOKUP": 1}, CPUus: []float64{20}, Wall: []float64{1, 1}},
		{Step: "create", Target: reqUnbound, Units: 10, PerUnit: map[string]float64{"CREATE": 1, "LOOKUP": 1, "GETATTR": 1}, CPUus: []float64{30}, Wall: []float64{1.2, 1.2}},
		{Step: "create", Target: reqBound, Units: 10, PerUnit: map[string]float64{"CREATE": 1}, CPUus: []float64{40}, Wall: []float64{1.4, 1.4}},
		{Step: "tar_x", Target: reqLoopback, Units: 7, PerUnit: map[string]float64{"CREATE": 1}, CPUus: []float64{10}, Wall: []float64{2, 2}},
		{Step: "tar_x", Target: reqUnbound, Units: 7, PerUnit: map[string]float64{"CREATE": 1}, CPUus: []float64{15}, Wall: []float64{2, 2}},
	}
	var out bytes.Buffer
	fprintRequests(&out, rows)
	s := out.String()
	// CPU per file: requests per file × CPU per request, against the loopback's.
	assert.Regexp(t, `create +unbound +3\.00 +30\.0 +2\.25× +1\.200 +1\.20× +≤1\.1 NOT met +CREATE 1\.00, GETATTR 1\.00, LOOKUP 1\.00`, s)
	assert.Regexp(t, `create +bound +1\.00 +40\.0 +1\.00× +1\.400 +1\.40× +≤1\.5 met`, s)
	assert.Regexp(t, `tar_x +unbound +1\.00 +15\.0 +1\.50× +2\.000 +1\.00× +≤1\.1 met`, s)
	assert.Contains(t, s, "10 files / 0 MiB / 7 entries")
}

// TestPassOrder_EachTargetLeadsInTurn pins that the interleaved passes
// rotate which target runs a step first, keeping every target once per
// pass and the first pass in print order.
func TestPassOrder_EachTargetLeadsInTurn(t *testing.T) {
	assert.Equal(t, reqTargets, passOrder(1))
	for pass := 1; pass <= 2*len(reqTargets); pass++ {
		got := passOrder(pass)
		assert.ElementsMatch(t, reqTargets, got, "pass %d", pass)
		assert.Equal(t, reqTargets[(pass-1)%len(reqTargets)], got[0], "pass %d", pass)
	}
}

// TestQuiet_WaitsForTheDaemonsCPUToSettle pins that a step's counters are
// read once the daemon stopped both receiving requests and working: the
// work a step leaves behind (a store batch, a compaction) is its own.
func TestQuiet_WaitsForTheDaemonsCPUToSettle(t *testing.T) {
	calls, busy := 0, 12 // the daemon works for its first 12 reads (~600 ms)
	r := statsReader(func() (map[string]uint64, float64, error) {
		calls++
		cpu := 0.05 * float64(min(calls, busy)) // 50 ms per 50 ms poll: a busy core
		return map[string]uint64{"LOOKUP": 7}, cpu, nil
	})
	start := time.Now()
	counts, cpu, err := r.quiet()
	require.NoError(t, err)
	assert.Equal(t, uint64(7), counts["LOOKUP"])
	assert.InDelta(t, 0.05*float64(busy), cpu, 1e-9, "read before the daemon's work ended")
	assert.GreaterOrEqual(t, calls, busy+int(quietWindow/(50*time.Millisecond)))
	assert.Less(t, time.Since(start), 10*time.Second)
}
