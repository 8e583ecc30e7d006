package mounttest

import (
	"testing"
)

// TestSuite_PassesOnTheDisk runs every case on a host directory: the disk
// is the reference the mounts are held to, so a case that fails here is a
// wrong case, not a wrong mount.
func TestSuite_PassesOnTheDisk(t *testing.T) {
	Run(t, t.TempDir(), Mount{Backend: Disk})
}
