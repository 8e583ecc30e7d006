package service

import (
	"context"

	"github.com/dshmount/dshmount/internal/provider"
)

// awaitCommit makes a read of t wait while a branch commit or an atomic
// patch that changes t (or, for a directory, one of its entries) is being
// applied, so a reader through the socket sees the workspace entirely
// before or entirely after it. Reads in a branch wait too: what the branch
// has not changed is the workspace's.
func (s *Service) awaitCommit(ctx context.Context, t provider.Target) error {
	if s.br == nil || s.br.mgr == nil {
		return nil
	}
	if err := s.br.mgr.AwaitCommit(ctx, t.DisplayPath); err != nil {
		return provider.NewError(provider.CodeAborted, "read", t.DisplayPath, err,
			"cancelled while waiting for a commit that changes %s", t.DisplayPath)
	}
	return nil
}
