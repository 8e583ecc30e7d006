package fuse

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/unix"
)

func TestPrivsToKill_SUIDAlwaysSGIDOnlyWhenGroupExecutable(t *testing.T) {
	assert.Equal(t, uint32(unix.S_ISUID), privsToKill(unix.S_IFREG|0o4755))
	assert.Equal(t, uint32(unix.S_ISUID|unix.S_ISGID), privsToKill(unix.S_IFREG|0o6777))
	assert.Equal(t, uint32(unix.S_ISGID), privsToKill(unix.S_IFREG|0o2777))
	assert.Zero(t, privsToKill(unix.S_IFREG|0o2767), "set-group-ID without group execute is mandatory locking")
	assert.Zero(t, privsToKill(unix.S_IFREG|0o0777))
	assert.Zero(t, privsToKill(unix.S_IFDIR|0o4777))
}

func TestEffectiveCaps_ParsesCapEff(t *testing.T) {
	caps, ok := effectiveCaps("Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\nCapBnd:\t0\n")
	assert.True(t, ok)
	assert.NotZero(t, caps&(1<<capFsetid))
	caps, ok = effectiveCaps("CapEff:\t0000000000000000\n")
	assert.True(t, ok)
	assert.Zero(t, caps&(1<<capFsetid))
	_, ok = effectiveCaps("Name:\tx\n")
	assert.False(t, ok)
}
