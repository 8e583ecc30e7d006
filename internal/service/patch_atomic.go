package service

import (
	"context"

	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/journal"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/eol"
	"github.com/dshmount/dshmount/internal/provider/version"
	"github.com/dshmount/dshmount/internal/viewrules"
	"github.com/dshmount/dshmount/patch"
)

// Committer applies a change set to the workspace all or nothing, a kill
// -9 included (*journal.Journal).
type Committer interface {
	Apply(ctx context.Context, cs journal.ChangeSet, hooks journal.Hooks) ([]journal.AppliedFile, error)
}

// errNoJournal answers an atomic patch to a daemon without a journal.
var errNoJournal = &callError{obj: ErrorObject{Code: CodeUnavailable,
	Message: "atomic patches are not available: this daemon has no commit journal"}}

// atomicFile is the simulated state of one path of an atomic patch.
type atomicFile struct {
	target  provider.Target
	base    provider.Version // what the workspace held when first read: a version or branch.BaseAbsent
	exists  bool
	content string // LF-normalized
	crlf    bool
	touched bool
}

// atomicPatch applies a whole patch through one journaled commit: every
// operation's guard is checked against the bytes read here, the results
// are computed in memory, and the commit applies them all only if the
// workspace still holds those bytes (else FS_STALE_VERSION naming the
// conflicts), a kill -9 included.
func (s *Service) atomicPatch(ctx context.Context, a policy.Actor, ops []patch.Operation, cwd string, unconditional bool) (PatchResult, error) {
	if s.journal == nil {
		return PatchResult{}, errNoJournal
	}
	files := map[provider.Key]*atomicFile{}
	var order []*atomicFile
	load := func(t provider.Target) (*atomicFile, bool, error) {
		if f, ok := files[t.Key]; ok {
			return f, false, nil
		}
		f := &atomicFile{target: t, base: branch.BaseAbsent}
		data, err := s.fs.ReadBytes(ctx, t, 1<<30)
		switch {
		case provider.CodeOf(err) == provider.CodeNotFound:
		case err != nil:
			return nil, true, err
		default:
			f.exists, f.base = true, version.OfBytes(data)
			f.crlf = eol.IsCRLF(data)
			f.content = eol.ToLF(string(data))
		}
		files[t.Key] = f
		order = append(order, f)
		return f, true, nil
	}
	guardExisting := func(f *atomicFile, first bool, del bool) error {
		if !f.exists {
			return provider.NewError(provider.CodeStaleVersion, "patch", f.target.DisplayPath, nil,
				"%s does not exist; read the directory again (nothing was applied)", f.target.DisplayPath)
		}
		if !first || unconditional {
			return nil
		}
		var g *provider.VersionGuard
		var err error
		if del {
			g, err = s.engine.DeleteIntent(ctx, a, f.target)
		} else {
			g, err = s.engine.EditIntent(ctx, a, f.target)
		}
		if err != nil {
			return s.explain(err, f.target)
		}
		if g != nil && g.Version != f.base {
			return s.explain(provider.NewError(provider.CodeStaleVersion, "patch", f.target.DisplayPath, nil,
				"%s changed since you read it; read it again (nothing was applied)", f.target.DisplayPath), f.target)
		}
		return nil
	}
	guardWrite := func(f *atomicFile, first bool) error {
		if !first || unconditional {
			return nil
		}
		intent, err := s.engine.WriteIntent(ctx, a, f.target)
		if err != nil || intent == nil {
			return s.explain(err, f.target)
		}
		if intent.Kind == provider.CreateIfAbsent && f.exists ||
			intent.Kind == provider.ReplaceIfVersion && (!f.exists || intent.Version != f.base) {
			return s.explain(provider.NewError(provider.CodeStaleVersion, "patch", f.target.DisplayPath, nil,
				"%s changed since you read it; read it again (nothing was applied)", f.target.DisplayPath), f.target)
		}
		return nil
	}
	res := PatchResult{Operations: make([]PatchOpResult, len(ops)), Complete: true}
	for i, op := range ops {
		t, err := s.workspace().resolve(ctx, "path", op.OpPath(), cwd)
		if err == nil {
			err = s.denyReadOnly(t)
		}
		if err != nil {
			return PatchResult{}, opError(i, op, err)
		}
		f, first, err := load(t)
		if err != nil {
			return PatchResult{}, opError(i, op, err)
		}
		r := &res.Operations[i]
		r.Kind, r.Path, r.Status = op.OpKind(), t.DisplayPath, PatchApplied
		switch o := op.(type) {
		case *patch.Add:
			if err := guardWrite(f, first); err != nil {
				return PatchResult{}, opError(i, op, err)
			}
			f.exists, f.content, f.touched = true, o.Content, true
		case *patch.Delete:
			if err := guardExisting(f, first, true); err != nil {
				return PatchResult{}, opError(i, op, err)
			}
			f.exists, f.content, f.touched = false, "", true
		case *patch.Update:
			if err := guardExisting(f, first, false); err != nil {
				return PatchResult{}, opError(i, op, err)
			}
			after, fail := patch.ApplyHunks(f.content, o.Hunks)
			if fail != nil {
				return PatchResult{}, opError(i, op, provider.NewError(provider.CodePatchMismatch, "patch", t.DisplayPath, fail,
					"%s; read the file again and rebuild the hunk", fail.Error()))
			}
			if o.MoveTo == "" {
				f.content, f.touched = after, true
				continue
			}
			dst, err := s.workspace().resolve(ctx, "moveTo", o.MoveTo, cwd)
			if err == nil {
				err = s.denyReadOnly(dst)
			}
			if err != nil {
				return PatchResult{}, opError(i, op, err)
			}
			if dst.Key == t.Key {
				return PatchResult{}, opError(i, op, provider.NewError(provider.CodeSameTarget, "patch", t.DisplayPath, nil,
					"*** Move to: names the file itself (%s); drop the Move to line to update it in place", dst.DisplayPath))
			}
			df, dfirst, err := load(dst)
			if err != nil {
				return PatchResult{}, opError(i, op, err)
			}
			if err := guardWrite(df, dfirst); err != nil {
				return PatchResult{}, opError(i, op, err)
			}
			df.exists, df.content, df.crlf, df.touched = true, after, f.crlf, true
			f.exists, f.content, f.touched = false, "", true
			r.MoveTo = dst.DisplayPath
		}
	}
	cs := branch.ChangeSet{Label: "the atomic patch", Origin: commitOrigin{actor: a, detail: "atomic patch"}}
	for _, f := range order {
		if !f.touched || !f.exists && f.base == branch.BaseAbsent {
			continue
		}
		if !f.exists {
			cs.Changes = append(cs.Changes, branch.Change{Path: f.target.DisplayPath, Base: f.base, Delete: true})
			continue
		}
		content := eol.Restore(f.content, f.crlf)
		cs.Changes = append(cs.Changes, branch.Change{Path: f.target.DisplayPath, Base: f.base, Data: []byte(content)})
	}
	applied, err := s.journal.Apply(ctx, cs, s.commitHooks)
	if err != nil {
		return PatchResult{}, conflictError(err)
	}
	versions := map[string]provider.Version{}
	for _, f := range applied {
		versions[f.Target.DisplayPath] = f.After
	}
	for i := range res.Operations {
		r := &res.Operations[i]
		p := r.Path
		if r.MoveTo != "" {
			p = r.MoveTo
		}
		if r.Kind != patch.KindDelete {
			r.Version = versions[p]
		}
	}
	return res, nil
}

// denyReadOnly refuses a path the view keeps read-only (the journal writes
// the workspace directly, not through the view).
func (s *Service) denyReadOnly(t provider.Target) error {
	if s.viewAccess(t.DisplayPath) != viewrules.Visible {
		return provider.NewError(provider.CodeSandboxDenied, "patch", t.DisplayPath, nil,
			"%s is read-only in this workspace view; change it outside dshmount or restart without that rule", t.DisplayPath)
	}
	return nil
}
