package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLoopbackRule_AppliesOnlyWhereTheLoopbackIsMoreThanTwiceNative(t *testing.T) {
	cases := []struct {
		name             string
		n, l, d          float64
		met, wantApplies bool
	}{
		{"loopback close to native: no rule", 1, 1.5, 10, true, false},
		{"loopback slow, dshmount twice as fast", 1, 10, 5, true, true},
		{"loopback slow, dshmount not twice as fast", 1, 10, 6, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			met, applies := loopbackRule(tc.n, tc.l, tc.d)
			assert.Equal(t, tc.met, met)
			assert.Equal(t, tc.wantApplies, applies)
		})
	}
}

func TestPrintTable_ShowsUnboundAndBothTargets(t *testing.T) {
	rep := func(target string, v float64) *Report {
		r := &Report{Target: target}
		r.add("gosrc_git_status", "s", false, v)
		r.finish()
		return r
	}
	res := &Results{Targets: map[string]*Report{
		"native": rep("native", 1), "loopback": rep("loopback", 10),
		"dshmount": rep("dshmount", 1.5), "dshmount-unbound": rep("dshmount-unbound", 1.2),
	}}
	var out bytes.Buffer
	printTable(&out, res)
	assert.Contains(t, out.String(), "unb/native")
	assert.Contains(t, out.String(), "1.20×", "the unbound ratio")
	assert.Contains(t, out.String(), "≤2 met; ≤½ loopback met")
	assert.Contains(t, out.String(), "bound 0.15× met; unbound 0.12× met", "the ratios to the loopback with their targets")
}

func TestPrintBranches_EachRowWithItsTarget(t *testing.T) {
	r := &Report{Target: "branches"}
	r.add("branch_create_100k", "ms", false, 2)
	r.add("branch_first_edit_1MiB", "ms", false, 40)
	r.add("branch_next_edit_1MiB", "ms", false, 25)
	r.add("branch_commit_200", "ms", false, 90)
	r.add("branch_diff_10k", "s", false, 2)
	r.add("branch_diff_rss_growth", "MiB", false, 8)
	r.finish()
	var out bytes.Buffer
	printTable(&out, &Results{Targets: map[string]*Report{"branches": r}})
	s := out.String()
	assert.Contains(t, s, "branch.create")
	assert.Regexp(t, `its copy-up .*15\.0\d* ms; target < 10 ms: NOT met`, s, "copy-up is the first edit minus the next")
	assert.Regexp(t, `200 changed files .*90\.0\d* ms; target < 1000 ms: met`, s)
	assert.Contains(t, s, "RSS +8.0 MiB")
}

func TestPrintMerge_EachRowWithItsTarget(t *testing.T) {
	cases := []struct {
		name        string
		rebase, p50 float64
		disk        float64
		wantRebase  string
		wantEdit    string
		wantCache   string
	}{
		{"all met", 300, 40, 20 << 20, "target < 1000 ms: met", "target p50 < 50 ms: met", "bound --merge-cache 256 MiB: met"},
		{"none met", 1200, 60, 300 << 20, "target < 1000 ms: NOT met", "target p50 < 50 ms: NOT met", "bound --merge-cache 256 MiB: NOT met"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &Report{Target: "merge"}
			r.add(rebaseMetric, "ms", false, tc.rebase)
			r.add(mergeEditP50Metric, "ms", false, tc.p50)
			r.add(mergeEditP99Metric, "ms", false, 70)
			r.add(mergeEditCPUMetric, "ms", false, 21)
			r.add(cacheDiskMetric, "bytes", false, tc.disk)
			r.add(cacheRSSBefore, "MiB", false, 40)
			r.add(cacheRSSAfter, "MiB", false, 52.5)
			r.finish()
			var out bytes.Buffer
			printTable(&out, &Results{Targets: map[string]*Report{"merge": r}})
			s := out.String()
			assert.Regexp(t, `200-file branch, 20 files merged .* ms; `+tc.wantRebase+`\n`, s)
			assert.Regexp(t, `1 MiB file, stale token, p50 .* ms \(p99 70\.0 ms; daemon CPU 21\.0 ms per edit, median\); `+tc.wantEdit+`\n`, s)
			assert.Regexp(t, `10000 reads of distinct files .* MiB; `+tc.wantCache+`\n`, s)
			assert.Contains(t, s, "52.5 MiB (+12.5 MiB across the reads")
		})
	}
}
