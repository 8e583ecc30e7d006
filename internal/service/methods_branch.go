package service

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/viewrules"
)

// branchScopes holds, per branch, the engine that serves the fs.* methods
// in it (the sessions' default branches are kept by the manager).
type branchScopes struct {
	mgr   *branch.Manager
	rules viewrules.Rules

	mu      sync.Mutex
	engines map[*branch.Branch]*policy.Engine
	views   map[*branch.Branch]*viewrules.View // each engine's view of its branch

	mounts *branchMounts
}

// newBranchScopes returns the scopes of mgr (nil: branches unsupported)
// under the workspace view's rules, mounted through mounter (nil: branch
// mounts unsupported).
func newBranchScopes(mgr *branch.Manager, rules viewrules.Rules, mounter BranchMounter) *branchScopes {
	return &branchScopes{mgr: mgr, rules: rules, engines: map[*branch.Branch]*policy.Engine{},
		views:  map[*branch.Branch]*viewrules.View{},
		mounts: &branchMounts{mounter: mounter, live: map[string]*branchMount{}}}
}

// BranchEngine returns the engine of branch name, making it on first use:
// the branch under the daemon's hide and read-only rules, guarded by the
// same observation store (its keys are the branch's own).
func (s *Service) BranchEngine(name string) (*policy.Engine, error) {
	if s.br.mgr == nil {
		return nil, errNoBranches
	}
	b, err := s.br.mgr.Get(name)
	if err != nil {
		return nil, err
	}
	s.br.mu.Lock()
	defer s.br.mu.Unlock()
	if e, ok := s.br.engines[b]; ok {
		return e, nil
	}
	v, err := viewrules.New(b, s.br.rules)
	if err != nil {
		return nil, fmt.Errorf("branch %s: %w", name, err)
	}
	e := policy.NewEngine(s.store, v)
	e.SetZones(s.engine.Zones()) // a branch's mount has the workspace's unguarded paths
	s.br.engines[b], s.br.views[b] = e, v
	return e, nil
}

// forget drops the engine of a branch that is gone.
func (bs *branchScopes) forget(name string) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	for b := range bs.engines {
		if b.Name() == name {
			delete(bs.engines, b)
			delete(bs.views, b)
		}
	}
}

// errNoBranches answers branch requests to a daemon without branches.
var errNoBranches = &callError{obj: ErrorObject{Code: CodeUnavailable,
	Message: "this daemon keeps no branches (it was started without a state directory for them)"}}

// setSessionBranch makes name the default branch of session.
func (s *Service) setSessionBranch(session policy.SessionID, name string) error {
	if _, err := s.BranchEngine(name); err != nil {
		return err
	}
	return s.br.mgr.SetSessionBranch(string(session), name)
}

// BranchCreate makes a branch, and mounts it when asked to: a mount
// directory refused or a mount that fails leaves no branch.
func (s *Service) BranchCreate(ctx context.Context, c *Caller, p BranchCreateParams) (BranchInfo, error) {
	if s.br.mgr == nil {
		return BranchInfo{}, errNoBranches
	}
	if p.Mount == "" {
		b, err := s.br.mgr.CreateFor(p.Name, c.peer().UID)
		if err != nil {
			return BranchInfo{}, err
		}
		s.log.Info("branch created", "branch", p.Name, "owner", b.Owner())
		return BranchInfo{Name: b.Name(), Created: b.Created(), Owner: b.Owner()}, nil
	}
	if s.br.mounts.mounter == nil {
		return BranchInfo{}, errNoBranchMounts
	}
	if err := branch.ValidateName(p.Name); err != nil {
		return BranchInfo{}, err
	}
	bm := s.br.mounts
	bm.ops.Lock()
	defer bm.ops.Unlock()
	dir, err := s.checkMountDir(c.peer().UID, p.Mount, p.Cwd)
	if err != nil {
		return BranchInfo{}, err
	}
	b, err := s.br.mgr.CreateFor(p.Name, c.peer().UID)
	if err != nil {
		return BranchInfo{}, err
	}
	if err := s.mountRecorded(ctx, b, dir); err != nil {
		if derr := s.br.mgr.Discard(p.Name); derr != nil {
			s.log.Error("branch whose mount failed not removed", "branch", p.Name, "err", derr)
		}
		s.br.forget(p.Name)
		return BranchInfo{}, err
	}
	s.log.Info("branch created", "branch", p.Name, "mount", dir, "owner", b.Owner())
	return BranchInfo{Name: b.Name(), Created: b.Created(), Mount: dir, Owner: b.Owner()}, nil
}

// BranchList lists the branches the peer may act on.
func (s *Service) BranchList(_ context.Context, c *Caller, p Empty) (BranchListResult, error) {
	if s.br.mgr == nil {
		return BranchListResult{}, errNoBranches
	}
	res := BranchListResult{Branches: []BranchInfo{}}
	for _, i := range s.br.mgr.List() {
		if !s.owns(c.peer().UID, i.Owner) {
			continue
		}
		res.Branches = append(res.Branches, BranchInfo{Name: i.Name, Created: i.Created, Changed: i.Changed,
			Mount: s.br.mounts.mountedAt(i.Name), Owner: i.Owner})
	}
	return res, nil
}

// BranchDiff returns one page of a branch's changes and their diff.
func (s *Service) BranchDiff(ctx context.Context, c *Caller, p BranchDiffParams) (BranchDiffResult, error) {
	if p.Offset < 0 || p.Limit < 0 {
		return BranchDiffResult{}, invalidParams("offset and limit must not be negative")
	}
	if p.Limit == 0 {
		p.Limit = DefaultDiffLimit
	}
	b, err := s.ownedBranch(c, p.Name)
	if err != nil {
		return BranchDiffResult{}, err
	}
	// The daemon's rules of this run, which may be newer than the branch.
	hidden := func(rel string) bool { return s.viewAccess(rel) == viewrules.Hidden }
	page, err := b.DiffWith(ctx, p.Offset, p.Limit, hidden)
	if err != nil {
		return BranchDiffResult{}, fmt.Errorf("diff branch %s: %w", p.Name, err)
	}
	res := BranchDiffResult{Files: make([]BranchFile, 0, len(page.Files)), Diff: page.Diff, Total: page.Total}
	for _, f := range page.Files {
		bf := BranchFile{Path: f.Path, Status: f.Status, From: f.From, Binary: f.Binary,
			Conflict: f.Conflict, NoBase: f.NoBase}
		for _, rel := range []string{f.From, f.Path} {
			if a := s.viewAccess(rel); rel != "" && a != viewrules.Visible && (bf.Access == "" || a == viewrules.Hidden) {
				bf.Access = a.String()
			}
		}
		res.Files = append(res.Files, bf)
	}
	if next := p.Offset + len(page.Files); next < page.Total {
		res.Next = &next
	}
	return res, nil
}

// BranchCommit applies a branch to the workspace, all or nothing.
func (s *Service) BranchCommit(ctx context.Context, c *Caller, p BranchCommitParams) (BranchCommitResult, error) {
	if s.br.mgr == nil {
		return BranchCommitResult{}, errNoBranches
	}
	a, err := c.actorFor(policy.SessionID(p.Session))
	if err != nil {
		return BranchCommitResult{}, err
	}
	if _, err := s.ownedBranch(c, p.Name); err != nil {
		return BranchCommitResult{}, err
	}
	if p.Rebase && p.Keep {
		if _, err := s.rebaseAside(ctx, p.Name, false); err != nil {
			return BranchCommitResult{}, err
		}
	}
	mounted := ""
	if !p.Keep {
		// The branch goes with the commit: its mount goes first, and comes
		// back when the commit is refused.
		bm := s.br.mounts
		bm.ops.Lock()
		defer bm.ops.Unlock()
		if _, err := s.br.mgr.Get(p.Name); err != nil {
			return BranchCommitResult{}, err
		}
		if mounted, err = s.unmountBranch(ctx, p.Name); err != nil {
			return BranchCommitResult{}, err
		}
	}
	if p.Rebase && !p.Keep { // the mount is down already
		if _, err := s.rebase(ctx, p.Name, false); err != nil {
			if mounted != "" {
				s.remount(ctx, p.Name, mounted)
			}
			return BranchCommitResult{}, err
		}
	}
	files, err := s.br.mgr.Commit(ctx, p.Name, p.Keep,
		commitOrigin{actor: a, detail: "branch " + p.Name + " commit"}, s.commitHooks)
	if err != nil {
		if mounted != "" {
			s.remount(ctx, p.Name, mounted)
		}
		return BranchCommitResult{}, conflictError(err)
	}
	if !p.Keep {
		s.br.forget(p.Name)
	}
	s.log.Info("branch committed", "branch", p.Name, "files", len(files), "keep", p.Keep)
	return BranchCommitResult{Files: committedFiles(files), Kept: p.Keep}, nil
}

// committedFiles converts a commit's files.
func committedFiles(files []branch.AppliedFile) []CommittedFile {
	out := make([]CommittedFile, 0, len(files))
	for _, f := range files {
		out = append(out, CommittedFile{Path: f.Target.DisplayPath, Deleted: f.Deleted, Version: string(f.After)})
	}
	return out
}

// commitOrigin is who asked for a journaled commit: the journal carries
// it, uninterpreted, as the change set's Origin and hands it to the
// commit hooks (newCommitHooks).
type commitOrigin struct {
	actor  policy.Actor
	detail string // "branch NAME commit", "atomic patch": in audit entries and refusals
}

// originOf is the commit origin the journal hands back (the zero origin
// for a change set this service did not make).
func originOf(origin any) commitOrigin {
	o, _ := origin.(commitOrigin)
	return o
}

// newCommitHooks ties every journaled commit to the workspace engine, once
// for the service: its paths are announced (mount write-back, the watcher
// waits), vetted against the view, claimed on a shared store, and each
// file it changed is recorded for the origin's actor with its detail.
func (s *Service) newCommitHooks() branch.Hooks {
	return branch.Hooks{
		Announce: s.announceCommit,
		Allow:    s.allowCommit,
		Claim:    s.claimCommit,
		Applied:  s.recordCommit,
	}
}

// announceCommit announces the paths a commit will change.
func (s *Service) announceCommit(ctx context.Context, _ any, ts []provider.Target) {
	s.engine.Announce(ctx, ts...)
}

// allowCommit refuses a commit that would change a path the view hides
// or keeps read-only.
func (s *Service) allowCommit(origin any, rel string) error {
	if a := s.viewAccess(rel); a != viewrules.Visible {
		return provider.NewError(provider.CodeSandboxDenied, "commit", rel, nil,
			"%s is %s in this workspace view, and %s would change it; nothing was applied", rel, a, originOf(origin).detail)
	}
	return nil
}

// recordCommit records each file a commit changed for its origin.
func (s *Service) recordCommit(ctx context.Context, origin any, files []branch.AppliedFile) {
	o := originOf(origin)
	for _, f := range files {
		op := policy.OpWrite
		if f.Deleted {
			op = policy.OpDelete
		}
		err := s.engine.RecordApplied(ctx, policy.AppliedChange{Actor: o.actor, Op: op, Target: f.Target,
			Before: f.Before, After: f.After, Deleted: f.Deleted, Detail: o.detail})
		if err != nil {
			s.log.Warn("commit applied but an observer failed", "path", f.Target.DisplayPath, "err", err)
		}
	}
	if err := s.store.Flush(); err != nil {
		s.log.Warn("commit applied but its records are not written yet", "err", err)
	}
	if s.hooks.CommitApplied != nil {
		s.hooks.CommitApplied()
	}
}

// BranchRebase merges the workspace's later changes into a branch.
func (s *Service) BranchRebase(ctx context.Context, c *Caller, p BranchRebaseParams) (BranchRebaseResult, error) {
	if s.br.mgr == nil {
		return BranchRebaseResult{}, errNoBranches
	}
	if _, err := s.ownedBranch(c, p.Name); err != nil {
		return BranchRebaseResult{}, err
	}
	return s.rebaseAside(ctx, p.Name, p.Markers)
}

// rebaseAside rebases branch name with its mount down: a rebase replaces
// the branch's files, which a mount would go on showing from its caches.
// The mount comes back at the same place afterwards.
func (s *Service) rebaseAside(ctx context.Context, name string, markers bool) (BranchRebaseResult, error) {
	bm := s.br.mounts
	bm.ops.Lock()
	defer bm.ops.Unlock()
	if _, err := s.br.mgr.Get(name); err != nil {
		return BranchRebaseResult{}, err
	}
	mounted, err := s.unmountBranch(ctx, name)
	if err != nil {
		return BranchRebaseResult{}, err
	}
	if mounted != "" {
		defer s.remount(ctx, name, mounted)
	}
	return s.rebase(ctx, name, markers)
}

// rebase runs one rebase and logs it.
func (s *Service) rebase(ctx context.Context, name string, markers bool) (BranchRebaseResult, error) {
	res, err := s.br.mgr.Rebase(ctx, name, markers)
	if err != nil {
		return BranchRebaseResult{}, conflictError(err)
	}
	s.log.Info("branch rebased", "branch", name, "merged", len(res.Merged), "flagged", len(res.Flagged))
	return BranchRebaseResult{Merged: res.Merged, Flagged: res.Flagged}, nil
}

// viewAccess is what the daemon's workspace view (its rules of this run)
// allows on rel: the one rule branch.diff and branch.commit apply to a
// branch made under older rules.
func (s *Service) viewAccess(rel string) viewrules.Access {
	if s.view == nil {
		return viewrules.Visible
	}
	return s.view.Access(rel)
}

// conflictError turns a commit conflict into an FS_STALE_VERSION error
// whose data names the conflicting paths, and a merge conflict into an
// FS_MERGE_CONFLICT error whose data also carries the hunks.
func conflictError(err error) error {
	var me *branch.MergeConflictError
	if errors.As(err, &me) {
		msg := provider.MessageOf(me.Unwrap())
		return &callError{obj: ErrorObject{Code: CodeFilesystem, Message: string(provider.CodeMergeConflict) + ": " + msg,
			Data: &ErrorData{Code: provider.CodeMergeConflict, Message: msg, Conflicts: me.Paths, ConflictHunks: me.Hunks}}}
	}
	var ce *branch.ConflictError
	if !errors.As(err, &ce) {
		return err
	}
	msg := provider.MessageOf(ce.Unwrap())
	return &callError{obj: ErrorObject{Code: CodeFilesystem, Message: string(provider.CodeStaleVersion) + ": " + msg,
		Data: &ErrorData{Code: provider.CodeStaleVersion, Message: msg, Conflicts: ce.Paths}}}
}

// BranchDiscard drops a branch.
func (s *Service) BranchDiscard(ctx context.Context, c *Caller, p BranchNameParams) (Empty, error) {
	if s.br.mgr == nil {
		return Empty{}, errNoBranches
	}
	bm := s.br.mounts
	bm.ops.Lock()
	defer bm.ops.Unlock()
	if _, err := s.ownedBranch(c, p.Name); err != nil {
		return Empty{}, err
	}
	mounted, err := s.unmountBranch(ctx, p.Name)
	if err != nil {
		return Empty{}, err
	}
	if err := s.br.mgr.Discard(p.Name); err != nil {
		if mounted != "" {
			s.remount(ctx, p.Name, mounted)
		}
		return Empty{}, err
	}
	s.br.forget(p.Name) // a session defaulting to it now gets "no branch named"
	s.log.Info("branch discarded", "branch", p.Name)
	return Empty{}, nil
}
