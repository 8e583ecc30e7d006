package service

import (
	"context"
	"fmt"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

// Scope is where a request acts: the workspace, or a named branch. An fs.*
// method builds it once, in its first step (Service.requestScope), and
// passes it to every step after; nothing else carries it (not the
// context). Only the service builds one: its engine and filesystem are
// the resolved scope's.
type Scope struct {
	// Branch names the branch the request acts in; "" is the workspace.
	Branch string

	engine *policy.Engine
	fs     provider.FileSystem
}

// Workspace reports whether the scope is the workspace (not a branch).
func (sc Scope) Workspace() bool { return sc.Branch == "" }

// workspace returns the workspace's scope.
func (s *Service) workspace() Scope { return Scope{engine: s.engine, fs: s.fs} }

// requestScope returns the scope of a request: the named branch, or the
// session's default branch when name is empty (the workspace when it has
// none). The caller's peer must own the branch.
func (s *Service) requestScope(c *Caller, session policy.SessionID, name string) (Scope, error) {
	session = c.asBound(session)
	if name == "" {
		if session == "" {
			c.smu.Lock()
			session = c.implicit
			c.smu.Unlock()
		}
		if s.br.mgr != nil {
			name = s.br.mgr.SessionBranch(string(session))
		}
		if name == "" {
			return s.workspace(), nil
		}
	}
	if _, err := s.ownedBranch(c, name); err != nil {
		return Scope{}, err
	}
	eng, err := s.BranchEngine(name)
	if err != nil {
		return Scope{}, err
	}
	return Scope{Branch: name, engine: eng, fs: eng.FS()}, nil
}

// resolve checks and resolves a path parameter against cwd in the scope.
func (sc Scope) resolve(ctx context.Context, field, path, cwd string) (provider.Target, error) {
	if err := checkPath(field, path); err != nil {
		return provider.Target{}, err
	}
	if err := checkCwd(cwd); err != nil {
		return provider.Target{}, err
	}
	t, err := sc.fs.Resolve(ctx, path, provider.ResolveOptions{Cwd: cwd})
	if err != nil {
		return provider.Target{}, fmt.Errorf("resolve %s: %w", path, err)
	}
	return t, nil
}
