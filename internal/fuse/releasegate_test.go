package fuse

import (
	"testing"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"
	"github.com/stretchr/testify/assert"
)

// releaseProbe is a RawFileSystem whose Release runs a function where
// go-fuse's release bookkeeping would run.
type releaseProbe struct {
	gofuse.RawFileSystem
	during func()
}

func (p *releaseProbe) Release(<-chan struct{}, *gofuse.ReleaseIn) { p.during() }

func TestReleaseGate_AReleaseEndsOnlyWhenEveryReleaseInFlightHasEnded(t *testing.T) {
	probe := &releaseProbe{RawFileSystem: gofuse.NewDefaultRawFileSystem()}
	gate := &releaseGate{RawFileSystem: probe}
	var first, second uint64
	probe.during = func() {
		first = gate.now() // a cached handle released inside the first RELEASE
		assert.False(t, gate.ended(first), "not ended while its RELEASE is served")
		probe.during = func() {
			second = gate.now() // a second RELEASE overlapping the first
			assert.False(t, gate.ended(first))
		}
		gate.Release(nil, &gofuse.ReleaseIn{})
		assert.False(t, gate.ended(first), "the first RELEASE is still in flight")
		assert.False(t, gate.ended(second), "a release is in flight: nothing has ended")
	}
	gate.Release(nil, &gofuse.ReleaseIn{})
	assert.True(t, gate.ended(first), "ended once no RELEASE is in flight")
	assert.True(t, gate.ended(second))
	var none *releaseGate
	assert.True(t, none.ended(none.now()), "no gate (not mounted yet): nothing is in flight")
}

func TestIOModes_PassthroughStartsOnlyOnceTheLastCachedReleaseHasEnded(t *testing.T) {
	probe := &releaseProbe{RawFileSystem: gofuse.NewDefaultRawFileSystem()}
	gate := &releaseGate{RawFileSystem: probe}
	var io ioModes
	pt, _, _ := io.choose(true, true, false, gate) // a bound reader: cached
	assert.False(t, pt)
	probe.during = func() {
		io.release(false, gate)
		pt, _, ok := io.choose(true, false, true, gate)
		assert.True(t, ok)
		assert.False(t, pt, "a person's open while the node's cached release is in flight")
		io.release(false, gate)
	}
	gate.Release(nil, &gofuse.ReleaseIn{})
	pt, _, ok := io.choose(true, false, true, gate)
	assert.True(t, ok)
	assert.True(t, pt, "once that release has ended, passthrough")
	var other ioModes
	pt, _, _ = other.choose(true, false, true, gate)
	assert.True(t, pt, "another node's releases do not matter")
}

func TestIOModes_Choose(t *testing.T) {
	cases := []struct {
		name                       string
		pt, other                  int
		bound, writable            bool
		wantPT, wantDirect, wantOK bool
	}{
		{name: "a person on an idle file", wantPT: true, wantOK: true},
		{name: "a person joins an open passthrough handle", pt: 1, wantPT: true, wantOK: true},
		{name: "a person while a cached handle is open", other: 1, wantOK: true},
		{name: "a bound reader", bound: true, wantOK: true},
		{name: "a bound writer", bound: true, writable: true, wantDirect: true, wantOK: true},
		{name: "a bound writer while a passthrough handle is open", pt: 1, bound: true, writable: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			io := ioModes{pt: c.pt, other: c.other}
			pt, direct, ok := io.choose(true, c.bound, c.writable, nil)
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
