package policy

import (
	"context"

	"github.com/dshmount/dshmount/internal/provider"
)

// Announce tells the engine the daemon is about to change ts by itself,
// outside a provider mutation (a branch commit renaming staged files into
// place): the preparers run (the mount's dirty pages of ts are written
// back) and the backing-tree watcher waits for the change instead of
// recording it as external. Each announced target is ended by RecordApplied.
func (e *Engine) Announce(ctx context.Context, ts ...provider.Target) { e.prepare(ctx, ts...) }

// AppliedChange is one file the daemon changed by itself (see Announce).
type AppliedChange struct {
	Actor   Actor
	Op      MutationOp // OpWrite or OpDelete
	Target  provider.Target
	Before  provider.Version // "" when the file was created
	After   provider.Version // "" when deleted
	Deleted bool
	Detail  string // what made the change, e.g. "branch NAME commit"
}

// RecordApplied records a change the daemon applied itself as every
// mutation is recorded: the actor's observation of the result, the last
// writer, an audit entry (with Detail), the end of its announcement, and
// the observers (the mount drops its caches of the file).
func (e *Engine) RecordApplied(ctx context.Context, c AppliedChange) error {
	obs := Present(c.After)
	if c.Deleted {
		obs = Absent()
	}
	return e.commit(ctx, mutation{
		actor: c.Actor, op: c.Op, target: c.Target, before: c.Before, after: c.After,
		obs: obs, detail: c.Detail, announced: true,
	})
}
