package fuse

import (
	"context"
	"time"
)

// interruptGrace is how long a wait goes on once the calling program is
// interrupted. The kernel sends FUSE_INTERRUPT for every signal a program
// receives while its request is served, and a Go program receives SIGURG
// (the runtime's preemption) all the time: answering EINTR to each would
// turn quick metadata operations (a chmod waiting a moment for a file's
// lock) into spurious errors. A wait that lasts longer than this past the
// interrupt really blocks (a lock held by a slow peer, a branch commit
// being applied), and the program gets EINTR (a killed program's request
// must end, or the kill waits for it).
const interruptGrace = time.Second

// patiently runs wait, a wait that ends early with an error when its
// context ends. When the calling program is interrupted (ctx ends) before
// the wait is over, it waits on for interruptGrace more; the error it
// returns then means the wait really blocked.
func patiently(ctx context.Context, wait func(context.Context) error) error {
	err := wait(ctx)
	if err == nil || ctx.Err() == nil {
		return err
	}
	grace, cancel := context.WithTimeout(context.WithoutCancel(ctx), interruptGrace)
	defer cancel()
	return wait(grace)
}
