package fuse

import (
	"sync"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"
)

// releaseGate tells when the RELEASE requests being served now have all
// ended, so that a new passthrough registration never races the release of
// a cached handle of the same node (ioModes.choose asks it).
//
// go-fuse (v2.12.1, and its master as of 2026-06) drops one reference to a
// node's backing-file registration on every RELEASE, also of a handle that
// was not opened with passthrough and never took one. The daemon uncounts
// a cached handle in its Release, before go-fuse drops that reference; an
// open that chose passthrough in between registers a backing file, and the
// cached handle's release then unregisters it under the kernel's feet: the
// open fails with EIO, or the next passthrough open of the inode does
// (another backing file for the same inode).
//
// The gate counts RELEASE requests in flight and numbers the moments when
// none is (epochs). A node whose cached handle was released in epoch e
// starts passthrough only once the epoch is past e: by then every release
// in flight at e, its own included, has left go-fuse's bookkeeping.
type releaseGate struct {
	gofuse.RawFileSystem

	mu       sync.Mutex
	inFlight int
	epoch    uint64 // incremented each time inFlight drops to zero
}

// Release implements gofuse.RawFileSystem: the request counts as in flight
// from before the daemon's Release until after go-fuse's bookkeeping.
func (g *releaseGate) Release(cancel <-chan struct{}, in *gofuse.ReleaseIn) {
	g.mu.Lock()
	g.inFlight++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		if g.inFlight--; g.inFlight == 0 {
			g.epoch++
		}
		g.mu.Unlock()
	}()
	g.RawFileSystem.Release(cancel, in)
}

// now returns the current epoch (zero without a gate: before mounting).
func (g *releaseGate) now() uint64 {
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.epoch
}

// ended reports whether every release in flight during epoch e has ended.
func (g *releaseGate) ended(e uint64) bool {
	if g == nil {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.epoch > e
}
