package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/eol"
	"github.com/dshmount/dshmount/patch"
)

// plannedOp is one patch operation after resolution and preflight.
type plannedOp struct {
	kind    patch.Kind
	target  provider.Target
	dest    *provider.Target // move destination
	content string           // add
	hunks   []patch.Hunk     // update
}

// simFile is the simulated state of one target during preflight.
type simFile struct {
	exists  bool
	content string // LF-normalized; valid when exists and loaded
	loaded  bool
}

// preflight is the state of one patch's preflight: the overlay of simulated
// contents and the targets earlier operations already used.
type preflight struct {
	s             *Service
	sc            Scope
	actor         policy.Actor
	unconditional bool
	files         map[provider.Key]*simFile
}

// Patch applies a whole apply_patch text: parse, preflight every operation
// (nothing is written when any fails), then commit in order with
// re-acquired guards. Its paths are in the patch text: preflight resolves
// them, and each operation is finished as it commits.
func (s *Service) Patch(ctx context.Context, c *Caller, p PatchParams) (PatchResult, error) {
	var ops []patch.Operation
	return mutate(ctx, s, c, mutation[PatchResult]{
		op: policy.OpPatch, session: p.Session, branch: p.Branch, cwd: p.Cwd,
		check: func() (err error) {
			if err := checkCwd(p.Cwd); err != nil {
				return err
			}
			if ops, err = patch.Parse(p.Patch); err != nil {
				return provider.NewError(provider.CodeInvalidArgument, "patch", "", err,
					"%s; fix the patch text and send it again (nothing was applied)", err.Error())
			}
			if len(ops) == 0 {
				return provider.NewError(provider.CodeInvalidArgument, "patch", "", nil,
					"no files were modified: the patch has no operations")
			}
			return nil
		},
		apply: func(ctx context.Context, m mutating) applied[PatchResult] {
			res, err := s.applyPatch(ctx, m.sc, m.actor, p, ops)
			return applied[PatchResult]{res: res, err: err, final: true}
		},
	})
}

// applyPatch preflights a parsed patch in sc, then merges it (a stale
// merge: true patch), applies it all or nothing (atomic, in the
// workspace) or commits it operation by operation.
func (s *Service) applyPatch(ctx context.Context, sc Scope, a policy.Actor, p PatchParams, ops []patch.Operation) (PatchResult, error) {
	_, mergeable := mergeableUpdate(ops, p)
	merging := p.Merge && mergeable && s.canMerge(sc)
	plan, err := s.preflightPatch(ctx, sc, a, ops, p.Cwd, p.Unconditional, merging)
	if p.Merge && provider.CodeOf(err) == provider.CodeStaleVersion {
		return s.mergePatch(ctx, sc, a, p, ops, err)
	}
	if err != nil {
		return PatchResult{}, err
	}
	if p.Atomic && sc.Workspace() {
		return s.atomicPatch(ctx, a, ops, p.Cwd, p.Unconditional)
	}
	return s.commitPatch(ctx, sc, a, plan, p.Unconditional), nil
}

// preflightPatch resolves every operation and checks its intent and hunks
// against the simulated state left by the operations before it. When
// merging, a stale refusal is left to the merge to audit.
func (s *Service) preflightPatch(ctx context.Context, sc Scope, a policy.Actor, ops []patch.Operation, cwd string, unconditional, merging bool) ([]plannedOp, error) {
	pf := &preflight{s: s, sc: sc, actor: a, unconditional: unconditional, files: make(map[provider.Key]*simFile)}
	plan := make([]plannedOp, 0, len(ops))
	for i, op := range ops {
		pl, err := pf.check(ctx, op, cwd)
		if err != nil {
			err = opError(i, op, err)
			if !merging || provider.CodeOf(err) != provider.CodeStaleVersion {
				s.auditPreflightRefusal(a, op, err)
			}
			return nil, err
		}
		plan = append(plan, pl)
	}
	return plan, nil
}

// guardRefusal marks a preflight error as the guard's decision, so that
// its FS_NOT_FOUND (the session saw the file absent) is audited as a
// refusal; other FS_NOT_FOUND errors of a patch are plain failures.
type guardRefusal struct{ error }

func (g guardRefusal) Unwrap() error { return g.error }

// auditPreflightRefusal audits a patch refused at preflight (nothing was
// applied) when its error is a refusal. Commit-time refusals are audited by
// the engine.
func (s *Service) auditPreflightRefusal(a policy.Actor, op patch.Operation, err error) {
	var gr guardRefusal
	if !policy.IsRefusal(provider.CodeOf(err)) && !errors.As(err, &gr) {
		return
	}
	path := op.OpPath()
	var pe *provider.Error
	if errors.As(err, &pe) && pe.Path != "" {
		path = pe.Path
	}
	s.engine.AuditRefusal(a, policy.OpPatch, provider.Target{DisplayPath: path}, err)
}

// opError names the failing operation in a preflight error.
func opError(i int, op patch.Operation, err error) error {
	what := fmt.Sprintf("operation %d (%s %s)", i+1, op.OpKind(), op.OpPath())
	var pe *provider.Error
	if errors.As(err, &pe) {
		msg := pe.Message
		if msg == "" {
			msg = pe.Error()
		}
		return &provider.Error{Code: pe.Code, Op: "patch", Path: pe.Path, Err: err,
			Message: what + ": " + msg + " (nothing was applied)"}
	}
	var ce *callError
	if errors.As(err, &ce) {
		o := ce.obj
		o.Message = what + ": " + o.Message
		return &callError{obj: o}
	}
	return fmt.Errorf("%s: %w (nothing was applied)", what, err)
}

// check preflights one operation.
func (pf *preflight) check(ctx context.Context, op patch.Operation, cwd string) (plannedOp, error) {
	t, err := pf.sc.resolve(ctx, "path", op.OpPath(), cwd)
	if err != nil {
		return plannedOp{}, err
	}
	switch o := op.(type) {
	case *patch.Add:
		if err := pf.checkWrite(ctx, t); err != nil {
			return plannedOp{}, err
		}
		pf.files[t.Key] = &simFile{exists: true, content: o.Content, loaded: true}
		return plannedOp{kind: patch.KindAdd, target: t, content: o.Content}, nil
	case *patch.Delete:
		f, err := pf.checkExisting(ctx, t, false)
		if err != nil {
			return plannedOp{}, err
		}
		*f = simFile{}
		return plannedOp{kind: patch.KindDelete, target: t}, nil
	case *patch.Update:
		f, err := pf.checkExisting(ctx, t, true)
		if err != nil {
			return plannedOp{}, err
		}
		after, fail := patch.ApplyHunks(f.content, o.Hunks)
		if fail != nil {
			return plannedOp{}, provider.NewError(provider.CodePatchMismatch, "patch", t.DisplayPath, fail,
				"%s; read the file again and rebuild the hunk", fail.Error())
		}
		pl := plannedOp{kind: patch.KindUpdate, target: t, hunks: o.Hunks}
		if o.MoveTo == "" {
			f.content = after
			return pl, nil
		}
		dst, err := pf.sc.resolve(ctx, "moveTo", o.MoveTo, cwd)
		if err != nil {
			return plannedOp{}, err
		}
		if dst.Key == t.Key {
			return plannedOp{}, provider.NewError(provider.CodeSameTarget, "patch", t.DisplayPath, nil,
				"*** Move to: names the file itself (%s); drop the Move to line to update it in place", dst.DisplayPath)
		}
		if err := pf.checkWrite(ctx, dst); err != nil {
			return plannedOp{}, err
		}
		*f = simFile{}
		pf.files[dst.Key] = &simFile{exists: true, content: after, loaded: true}
		pl.dest = &dst
		return pl, nil
	}
	return plannedOp{}, invalidParams("unsupported patch operation %T", op)
}

// state returns the simulated state of t, loading it from disk on first use
// (first reports whether this is the first use).
func (pf *preflight) state(ctx context.Context, t provider.Target) (f *simFile, info *provider.Info, first bool, err error) {
	if f, ok := pf.files[t.Key]; ok {
		return f, nil, false, nil
	}
	info, err = pf.sc.fs.Stat(ctx, t)
	if err != nil {
		return nil, nil, true, fmt.Errorf("stat %s: %w", t.DisplayPath, err)
	}
	f = &simFile{exists: info != nil}
	pf.files[t.Key] = f
	return f, info, true, nil
}

// checkWrite preflights a write intent (add, move destination).
func (pf *preflight) checkWrite(ctx context.Context, t provider.Target) error {
	_, info, first, err := pf.state(ctx, t)
	if err != nil || !first {
		return err
	}
	if info != nil && info.Type != provider.TypeFile {
		return provider.NewError(provider.CodeNotRegularFile, "patch", t.DisplayPath, nil,
			"%s is a %s, not a regular file; choose another path", t.DisplayPath, info.Type)
	}
	if pf.unconditional {
		return nil
	}
	intent, err := pf.sc.engine.WriteIntent(ctx, pf.actor, t)
	if err != nil {
		return pf.s.explain(err, t)
	}
	if intent == nil {
		return nil
	}
	switch intent.Kind {
	case provider.CreateIfAbsent:
		if info != nil {
			return provider.NewError(provider.CodeNotObserved, "patch", t.DisplayPath, nil,
				"%s already exists and this session has not read it; read it first, then patch it", t.DisplayPath)
		}
	case provider.ReplaceIfVersion:
		if info == nil || info.Version != intent.Version {
			return pf.s.explain(provider.NewError(provider.CodeStaleVersion, "patch", t.DisplayPath, nil,
				"%s changed since you read it; read it again", t.DisplayPath), t)
		}
	}
	return nil
}

// checkExisting preflights an operation on an existing file (update,
// delete, move source); load reads its content into the overlay.
func (pf *preflight) checkExisting(ctx context.Context, t provider.Target, load bool) (*simFile, error) {
	f, info, first, err := pf.state(ctx, t)
	if err != nil {
		return nil, err
	}
	if !first {
		if !f.exists {
			return nil, provider.NewError(provider.CodeNotFound, "patch", t.DisplayPath, nil,
				"%s does not exist at this point of the patch (an earlier operation removed or moved it)", t.DisplayPath)
		}
		return f, nil
	}
	if !pf.unconditional {
		var guard *provider.VersionGuard
		if load {
			guard, err = pf.sc.engine.EditIntent(ctx, pf.actor, t)
		} else {
			guard, err = pf.sc.engine.DeleteIntent(ctx, pf.actor, t)
		}
		if err != nil {
			return nil, guardRefusal{pf.s.explain(err, t)}
		}
		if guard != nil && (info == nil || info.Version != guard.Version) {
			return nil, pf.s.explain(provider.NewError(provider.CodeStaleVersion, "patch", t.DisplayPath, nil,
				"%s changed since you read it; read it again", t.DisplayPath), t)
		}
	}
	if info == nil {
		return nil, provider.NewError(provider.CodeStaleVersion, "patch", t.DisplayPath, nil,
			"%s does not exist; read the directory again", t.DisplayPath)
	}
	if info.Type != provider.TypeFile {
		return nil, provider.NewError(provider.CodeNotRegularFile, "patch", t.DisplayPath, nil,
			"%s is a %s, not a regular file", t.DisplayPath, info.Type)
	}
	if load {
		text, err := pf.sc.fs.ReadText(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", t.DisplayPath, err)
		}
		f.content, f.loaded = eol.ToLF(text), true
	}
	return f, nil
}

// commitPatch runs the planned operations in order, each re-acquiring its
// guard; the first failure stops the rest.
func (s *Service) commitPatch(ctx context.Context, sc Scope, a policy.Actor, plan []plannedOp, unconditional bool) PatchResult {
	res := PatchResult{Operations: make([]PatchOpResult, len(plan)), Complete: true}
	for i, pl := range plan {
		r := &res.Operations[i]
		r.Kind, r.Path, r.Status = pl.kind, pl.target.DisplayPath, PatchNotRun
		if pl.dest != nil {
			r.MoveTo = pl.dest.DisplayPath
		}
	}
	g := policy.Guard{Unconditional: unconditional}
	for i, pl := range plan {
		if s.hooks.BeforeCommitOp != nil {
			s.hooks.BeforeCommitOp(i)
		}
		r := &res.Operations[i]
		var err error
		failed := false
		switch {
		case pl.kind == patch.KindAdd: // the provider creates missing parents
			var out provider.WriteOutcome
			out, err = sc.engine.Write(ctx, a, pl.target, pl.content, g)
			r.Version = out.Version
		case pl.kind == patch.KindDelete:
			_, err = sc.engine.Delete(ctx, a, pl.target, g)
		case pl.dest != nil:
			var out provider.MoveOutcome
			out, err = sc.engine.Move(ctx, a, pl.target, *pl.dest, pl.hunks, g, g)
			r.Version = out.Destination.Version
			if err == nil && !out.SourceDeleted && out.SourceFailure != nil {
				failed = true
				r.Error = &ErrorData{Code: out.SourceFailure.Code, Path: pl.target.DisplayPath,
					Message: "moved, but the source could not be removed: " + out.SourceFailure.Message + "; later operations were not run"}
			}
		default:
			var out provider.EditOutcome
			out, err = sc.engine.Patch(ctx, a, pl.target, pl.hunks, g)
			r.Version = out.Version
		}
		target := pl.target
		if pl.dest != nil {
			target = pickTarget(err, pl.target, *pl.dest)
		}
		if err = s.mutationDone("patch", target, err); err != nil {
			r.Status, r.Version = PatchFailed, ""
			r.Error = errorData(err, target.DisplayPath)
			res.Complete = false
			break
		}
		r.Status = PatchApplied
		if failed {
			res.Complete = false
			break
		}
	}
	return res
}

// errorData renders an error for a per-operation result.
func errorData(err error, path string) *ErrorData {
	o := errorObject(err)
	if o.Data != nil {
		d := *o.Data
		if d.Path == "" {
			d.Path = path
		}
		return &d
	}
	return &ErrorData{Code: provider.CodeIOError, Path: path, Message: o.Message}
}
