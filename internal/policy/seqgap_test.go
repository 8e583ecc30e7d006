package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSequence_ARestartSkipsTheRestOfTheReservation pins what the README
// says of the feed's seq ("Watching changes"): seqs are reserved on disk
// LeaseBandwidth (10,000) at a time, so after a restart the next seq is
// past the old reservation, at most that far ahead, and never repeats.
func TestSequence_ARestartSkipsTheRestOfTheReservation(t *testing.T) {
	dir := t.TempDir()
	require.Equal(t, uint64(10000), DefaultOptions().LeaseBandwidth, "the README's number")
	s, err := openDir(dir, quietOptions())
	require.NoError(t, err)
	before := s.LastSeq()
	require.NoError(t, s.Close())
	s, err = openDir(dir, quietOptions())
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	after := s.LastSeq()
	t.Logf("seq before the restart %d, after %d", before, after)
	assert.Greater(t, after, before, "a seq never repeats")
	assert.LessOrEqual(t, after-before, uint64(10001), "the jump is at most one reservation")
	assert.Greater(t, after-before, uint64(1), "the unused rest of the reservation is skipped")
}
