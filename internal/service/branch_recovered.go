package service

import (
	"context"
	"strings"

	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

// auditRecovered writes the audit entries of the commits the branch
// manager settled when it opened (a daemon killed mid-commit): each file a
// finished commit changed is recorded as the commit would have recorded it
// (detail "branch NAME commit, finished at daemon start"), unless the
// killed daemon recorded them already (Audited); each change made on top
// of a finished commit while the daemon was down is recorded as an
// out-of-band change (channel external); each file of an undone commit
// gets an FS_ABORTED entry with the same detail naming the branch and why
// it was undone (an undone atomic patch is reported so too). The
// committing session is not known after a restart: the entries name the
// daemon's uid on the socket channel.
func (s *Service) auditRecovered(recs []branch.Recovered) {
	ctx := context.Background()
	actor := policy.Actor{UID: s.uid, Channel: policy.ChannelSocket}
	for _, r := range recs {
		detail := strings.TrimPrefix(r.Label, "the ")
		if r.Branch != "" {
			detail += " commit"
		}
		if r.Forward {
			detail += ", finished at daemon start"
		} else {
			detail += ", undone at daemon start"
		}
		files := r.Files
		if r.Forward && r.Audited {
			files = nil
		}
		for _, f := range files {
			op := policy.OpWrite
			if f.Deleted {
				op = policy.OpDelete
			}
			if r.Forward {
				err := s.engine.RecordApplied(ctx, policy.AppliedChange{Actor: actor, Op: op, Target: f.Target,
					Before: f.Before, After: f.After, Deleted: f.Deleted, Detail: detail})
				if err != nil {
					s.log.Warn("recovered commit applied but an observer failed", "path", f.Target.DisplayPath, "err", err)
				}
				continue
			}
			err := s.store.AppendAudit(policy.AuditEntry{Key: f.Target.Key, Path: f.Target.DisplayPath, Op: op, Actor: actor,
				Before: f.Before, After: f.After, Detail: detail, Refused: provider.CodeAborted, Reason: r.Reason})
			if err != nil {
				s.log.Warn("could not audit an undone commit", "commit", r.Label, "path", f.Target.DisplayPath, "err", err)
			}
		}
		for _, f := range r.OutOfBand {
			op := policy.OpWrite
			switch {
			case f.Deleted:
				op = policy.OpDelete
			case f.Before == "":
				op = policy.OpCreate
			}
			if _, err := s.engine.RecordExternal(ctx, policy.ExternalChange{Op: op, Target: f.Target, After: f.After}); err != nil {
				s.log.Warn("could not record a change made while the daemon was down", "path", f.Target.DisplayPath, "err", err)
			}
		}
		s.log.Info("audited a commit settled at start", "commit", r.Label, "finished", r.Forward,
			"files", len(r.Files), "changed_while_down", len(r.OutOfBand))
	}
	if len(recs) > 0 {
		if err := s.store.Flush(); err != nil {
			s.log.Warn("recovered commits audited but not written yet", "err", err)
		}
	}
}
