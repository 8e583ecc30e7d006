package fuse

import (
	"time"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"
)

// Kernel caching. The kernel caches names (entry timeout), attributes
// (attribute timeout), missing names (negative timeout) and, with
// Config.CacheDirs, directory listings. Changes made through the mount are
// the kernel's own and update its caches as they happen (a create, unlink
// or rename through the mount drops the directory's cached listing: the
// kernel bumps the directory's version). Changes made through the control
// socket and, with the backing-tree watcher, out of band reach the
// invalidator, which drops the path's name, attributes and pages and its
// directory's listing (and a missing ancestor's cached absence) before the
// socket answers. So the timeouts only bound what nothing reports; see
// WatchedTimeout.

// negativeTimeout is go-fuse's option for d (nil: missing names are not
// cached).
func negativeTimeout(d time.Duration) *time.Duration {
	if d <= 0 {
		return nil
	}
	return &d
}

// dirOpenFlags are the FOPEN flags of an opened directory: with CacheDirs
// the kernel keeps the listing (FOPEN_CACHE_DIR needs FOPEN_KEEP_CACHE, or
// the kernel drops it at every open).
func (m *mountState) dirOpenFlags() uint32 {
	if m.cfg.CacheDirs {
		return gofuse.FOPEN_CACHE_DIR | gofuse.FOPEN_KEEP_CACHE
	}
	return 0
}
