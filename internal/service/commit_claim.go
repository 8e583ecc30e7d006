package service

import (
	"context"
	"errors"

	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

// claimCommit claims the files of a multi-file commit (atomic patch,
// branch commit) on a shared policy store before it publishes (see
// policy.Engine.ClaimCommit), under its origin's detail; the release
// records the applied versions. A claim another daemon holds refuses the
// commit as a conflict naming the files.
func (s *Service) claimCommit(ctx context.Context, origin any, files []branch.ClaimFile) (func([]branch.AppliedFile), error) {
	label := originOf(origin).detail
	cf := make([]policy.CommitFile, len(files))
	for i, f := range files {
		cf[i] = policy.CommitFile{Target: f.Target, Base: f.Base}
	}
	c, err := s.engine.ClaimCommit(ctx, label, cf)
	if err != nil {
		var ce *policy.ClaimConflictError
		if errors.As(err, &ce) {
			return nil, &branch.ConflictError{Label: label, Paths: ce.Paths}
		}
		return nil, err
	}
	return func(applied []branch.AppliedFile) {
		after := make(map[provider.Key]provider.Version, len(applied))
		for _, f := range applied {
			after[f.Target.Key] = f.After
		}
		c.Release(after)
	}, nil
}
