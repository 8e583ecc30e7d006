package fuse

import (
	"context"
	"syscall"
)

// awaitCommit waits while a branch commit or an atomic patch changes rel
// (Config.Commits). Only opens wait: a lookup or a readdir would hold the
// directory's lock in the kernel while waiting, and the commit's own cache
// invalidations need that lock. An interrupt of the caller ends the wait
// (EINTR) once it has gone on for interruptGrace past it.
func (m *mountState) awaitCommit(ctx context.Context, rel string) syscall.Errno {
	if m.cfg.Commits == nil {
		return 0
	}
	if err := patiently(ctx, func(ctx context.Context) error { return m.cfg.Commits.AwaitCommit(ctx, rel) }); err != nil {
		return syscall.EINTR
	}
	return 0
}
