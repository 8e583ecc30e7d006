package service

import (
	"context"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

// mutation is what one fs.* mutation states; mutate runs the checklist
// every mutation shares around it, in one order:
//
//  1. the scope: the workspace, or a branch the caller owns
//     (requestScope);
//  2. the params: check validates them and turns the explicit guards
//     (expected, unconditional) into policy.Guard values;
//  3. the actor: the caller's session, or the one it names, which must be
//     its own (Caller.actorFor); a refusal is audited (refusedEarly);
//  4. the targets: each path parameter resolved in the scope, where the
//     view's rules apply; a refusal is audited;
//  5. apply: the engine call, which decides the guard and changes the file
//     under its lock;
//  6. the outcome: an observer's failure is logged, the records are
//     flushed and a stale refusal names who changed the file
//     (mutationDone).
type mutation[R any] struct {
	op      policy.MutationOp // audited with an early refusal; names the outcome's log
	session policy.SessionID  // the params' session ("": the caller's own)
	branch  string            // the params' branch ("": the session's default)
	cwd     string            // the directory the paths are relative to
	// paths are the path parameters the change acts on, resolved in order
	// into mutating.targets.
	paths []pathParam
	// check validates the params before anything is resolved (nil: none).
	check func() error
	// apply makes the change through the scope's engine.
	apply func(ctx context.Context, m mutating) applied[R]
}

// pathParam is one path parameter of a mutation: its field name (for the
// error that names it) and value.
type pathParam struct{ field, path string }

// mutating is what the checklist resolved for apply.
type mutating struct {
	sc      Scope
	actor   policy.Actor
	targets []provider.Target // one per mutation.paths, in order
}

// applied is what a mutation's engine call left.
type applied[R any] struct {
	res    R
	target provider.Target // the target the outcome is about (logs, the stale refusal's author)
	err    error           // the engine's error
	// final says the outcome was finished already (a merge, which ran
	// mutationDone on its own write; a patch, each of whose operations
	// is finished as it commits): err is returned as is.
	final bool
}

// mutate runs the checklist of m (see mutation) and returns its result.
func mutate[R any](ctx context.Context, s *Service, c *Caller, m mutation[R]) (R, error) {
	var zero R
	sc, err := s.requestScope(c, m.session, m.branch)
	if err != nil {
		return zero, err
	}
	if m.check != nil {
		if err := m.check(); err != nil {
			return zero, err
		}
	}
	a, err := c.actorFor(m.session)
	if err != nil {
		path := ""
		if len(m.paths) > 0 {
			path = m.paths[0].path
		}
		return zero, s.refusedEarly(c.refusalActor(m.session), m.op, path, err)
	}
	targets := make([]provider.Target, len(m.paths))
	for i, p := range m.paths {
		if targets[i], err = sc.resolve(ctx, p.field, p.path, m.cwd); err != nil {
			return zero, s.refusedEarly(a, m.op, p.path, err)
		}
	}
	out := m.apply(ctx, mutating{sc: sc, actor: a, targets: targets})
	if out.final {
		if out.err != nil {
			return zero, out.err
		}
		return out.res, nil
	}
	if err := s.mutationDone(string(m.op), out.target, out.err); err != nil {
		return zero, err
	}
	return out.res, nil
}
