package service

import (
	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/policy"
)

// A watch with branch follows what the branch shows (fs.watch {branch},
// or the connection's session defaulting to a branch): the changes made
// in the branch (through the socket or its mount), and the workspace's
// changes of the paths the branch has not changed (its base is live). A
// workspace change is judged against the branch as it is when the watch
// delivers it. The branch's own commit is not reported (the branch
// already showed those bytes). When the branch is committed without keep
// or discarded, the watch ends with a lost event at the next change the
// daemon records.

// watchBranch returns the scope of a watch (the branch name, or the
// session's default) and the branch its engine serves; nil for the
// workspace.
func (s *Service) watchBranch(c *Caller, name string) (Scope, *branch.Branch, error) {
	sc, err := s.requestScope(c, "", name)
	if err != nil || sc.Workspace() {
		return sc, nil, err
	}
	for b, e := range s.branchEngines() {
		if e == sc.engine {
			return sc, b, nil
		}
	}
	return sc, nil, nil
}

// branchEngines returns a copy of the branch engines.
func (s *Service) branchEngines() map[*branch.Branch]*policy.Engine {
	s.br.mu.Lock()
	defer s.br.mu.Unlock()
	out := make(map[*branch.Branch]*policy.Engine, len(s.br.engines))
	for b, e := range s.br.engines {
		out[b] = e
	}
	return out
}

// branchAlive reports whether the branch w follows still exists (always
// true for a workspace watch).
func (s *Service) branchAlive(w *watchState) bool {
	if w.br == nil {
		return true
	}
	cur, err := s.br.mgr.Get(w.br.Name())
	return err == nil && cur == w.br
}

// inBranchView maps a feed entry to what branch b shows: b's own changes
// as they are, another branch's never, a workspace change only for the
// paths b does not shadow (a rename half shadowed is a creation or a
// deletion), b's own commit never.
func inBranchView(b *branch.Branch, e policy.AuditEntry, ev ChangeEvent) (ChangeEvent, bool) {
	if branch.IsKey(e.Key) {
		return ev, branch.NameOfKey(e.Key) == b.Name()
	}
	if e.Detail == "branch "+b.Name()+" commit" {
		return ev, false
	}
	from := !b.Shadows(ev.Path)
	if ev.Kind != ChangeRenamed {
		return ev, from
	}
	to := !b.Shadows(ev.To)
	switch {
	case from && to:
		return ev, true
	case to:
		ev.Kind, ev.Path, ev.To = ChangeCreated, ev.To, ""
		return ev, true
	case from:
		ev.Kind, ev.To, ev.Version = ChangeDeleted, "", ""
		return ev, true
	}
	return ev, false
}
