package fuse

import (
	"sync/atomic"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"
)

// releaseGate counts the RELEASE requests being served, so that a new
// passthrough registration never races one (ioModes.choose asks it).
//
// go-fuse (v2.12.1, and its master as of 2026-06) drops one reference to a
// node's backing-file registration on every RELEASE, also of a handle that
// was not opened with passthrough and never took one. The daemon uncounts
// a cached handle in its Release, before go-fuse drops that reference; an
// open that chose passthrough in between registers a backing file, and the
// cached handle's release then unregisters it under the kernel's feet: the
// open fails with EIO, or the next passthrough open of the inode does
// (another backing file for the same inode). Choosing passthrough only
// while no RELEASE is in flight keeps go-fuse's count exact.
type releaseGate struct {
	gofuse.RawFileSystem
	inFlight atomic.Int64
}

// Release implements gofuse.RawFileSystem: the request counts as in flight
// from before the daemon's Release until after go-fuse's bookkeeping.
func (g *releaseGate) Release(cancel <-chan struct{}, in *gofuse.ReleaseIn) {
	g.inFlight.Add(1)
	defer g.inFlight.Add(-1)
	g.RawFileSystem.Release(cancel, in)
}

// releasing reports whether a RELEASE is being served now.
func (g *releaseGate) releasing() bool { return g != nil && g.inFlight.Load() > 0 }
