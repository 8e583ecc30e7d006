package fuse

import (
	"testing"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"
	"github.com/stretchr/testify/assert"
)

// releaseProbe is a RawFileSystem whose Release reports what the gate said
// while go-fuse's release bookkeeping would run.
type releaseProbe struct {
	gofuse.RawFileSystem
	gate   *releaseGate
	during bool
}

func (p *releaseProbe) Release(<-chan struct{}, *gofuse.ReleaseIn) { p.during = p.gate.releasing() }

func TestReleaseGate_AReleaseIsInFlightUntilGoFuseHasDoneItsBookkeeping(t *testing.T) {
	probe := &releaseProbe{RawFileSystem: gofuse.NewDefaultRawFileSystem()}
	gate := &releaseGate{RawFileSystem: probe}
	probe.gate = gate
	assert.False(t, gate.releasing())
	gate.Release(nil, &gofuse.ReleaseIn{})
	assert.True(t, probe.during, "in flight while the wrapped Release runs")
	assert.False(t, gate.releasing(), "done once it returned")
	var none *releaseGate
	assert.False(t, none.releasing(), "no gate (not mounted yet): nothing in flight")
}

func TestIOModes_PassthroughStartsOnlyWhileNoReleaseIsInFlight(t *testing.T) {
	cases := []struct {
		name                       string
		pt, other                  int
		bound, writable, releasing bool
		wantPT, wantDirect, wantOK bool
	}{
		{name: "a person on an idle file", wantPT: true, wantOK: true},
		{name: "a person while a release is served", releasing: true, wantOK: true},
		{name: "a person joins an open passthrough handle during a release", pt: 1, releasing: true, wantPT: true, wantOK: true},
		{name: "a person while a cached handle is open", other: 1, wantOK: true},
		{name: "a bound reader", bound: true, wantOK: true},
		{name: "a bound writer", bound: true, writable: true, wantDirect: true, wantOK: true},
		{name: "a bound writer while a passthrough handle is open", pt: 1, bound: true, writable: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			io := ioModes{pt: c.pt, other: c.other}
			pt, direct, ok := io.choose(true, c.bound, c.writable, c.releasing)
			assert.Equal(t, c.wantPT, pt, "passthrough")
			assert.Equal(t, c.wantDirect, direct, "direct I/O")
			assert.Equal(t, c.wantOK, ok, "allowed")
			if ok && pt {
				assert.Equal(t, c.pt+1, io.pt)
			}
			if ok && !pt {
				assert.Equal(t, c.other+1, io.other)
			}
		})
	}
}
