package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestReqCounter_CountsOpcodesAcrossSplitWritesWithoutForget(t *testing.T) {
	var c reqCounter
	log := "2026/12/03 rx 12: LOOKUP n1 [\"f1\"] 3b p7\n" +
		"time=x level=DEBUG msg=\"rx 13: CREATE n1 {...} p7\"\n" +
		"rx 14: FORGET n5 {Nlookup=1}\n" +
		"tx 12:     OK, {n5 g1}\n" +
		"rx 15: LOOKUP n1 [\"f2\"] 3b p7\n"
	_, _ = c.Write([]byte(log[:30]))
	_, _ = c.Write([]byte(log[30:]))
	counts, total := c.snapshot()
	assert.Equal(t, map[string]int{"LOOKUP": 2, "CREATE": 1}, counts)
	assert.Equal(t, 3, total)
}

func TestPrintRequests_RatioToTheLoopbackWithEachTarget(t *testing.T) {
	rows := []*RequestRow{
		{Step: "create", Target: reqLoopback, Units: 10, PerUnit: map[string]float64{"CREATE": 1, "LOOKUP": 1}, CPUus: []float64{20}, Wall: []float64{1, 1}},
		{Step: "create", Target: reqUnbound, Units: 10, PerUnit: map[string]float64{"CREATE": 1, "LOOKUP": 1, "GETATTR": 1}, CPUus: []float64{30}, Wall: []float64{1.2, 1.2}},
		{Step: "create", Target: reqBound, Units: 10, PerUnit: map[string]float64{"CREATE": 1}, CPUus: []float64{40}, Wall: []float64{1.4, 1.4}},
	}
	var out bytes.Buffer
	fprintRequests(&out, rows)
	s := out.String()
	assert.Regexp(t, `create +unbound +3\.00 +30\.0 +1\.200 +1\.20× +≤1\.1 NOT met +CREATE 1\.00, GETATTR 1\.00, LOOKUP 1\.00`, s)
	assert.Regexp(t, `create +bound +1\.00 +40\.0 +1\.400 +1\.40× +≤1\.5 met`, s)
	assert.Contains(t, s, "10 files")
}
