package policy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dshmount/dshmount/internal/provider"
)

// mutation is a completed mutation waiting to be recorded.
type mutation struct {
	actor         Actor
	op            MutationOp
	target        provider.Target
	before, after provider.Version
	obs           Observation      // what the actor's session now knows of the result
	to            *provider.Target // move/rename destination; obs is about it
	sourceDeleted bool             // move/rename: the source is gone
	unconditional bool
	detail        string
	own           uint64 // the announcement (ownChanges.begin) this ends; 0: none
	announced     bool   // without own: ends the oldest open announcement of the path (Announce)
	claim         *Claim // shared store: released by the commit's transaction
}

// commit records a completed mutation: the session's observation, the last
// writer, an audit entry, then the observers. Store failures are logged (the
// mutation is on disk either way); an observer failure is returned wrapping
// ErrObserverFailed.
func (e *Engine) commit(ctx context.Context, m mutation) error {
	s := e.store
	now := s.opts.Now()
	result := m.target
	if m.to != nil {
		result = *m.to
	}
	after := m.after
	if m.obs.Kind == ObservedAbsent {
		after = ""
	}
	entry := AuditEntry{
		Time: now, Key: m.target.Key, Path: m.target.DisplayPath, Op: m.op, Actor: m.actor,
		Before: m.before, After: after, Unconditional: m.unconditional, Detail: m.detail,
	}
	if m.to != nil {
		entry.To = m.to.DisplayPath
	}
	s.rec.recordMutation(e, m, result, after, now, entry)
	if m.actor.Channel != ChannelExternal {
		e.own.commit(m)
	}
	return e.notify(ctx, Event{
		Actor: m.actor, Op: m.op, Target: m.target, Observation: m.obs,
		Before: m.before, After: after, To: m.to,
	})
}

// recordLocal records a mutation in a store that is not shared: each
// record buffered on its own.
func (e *Engine) recordLocal(m mutation, result provider.Target, after provider.Version, now time.Time, entry AuditEntry) {
	s := e.store
	if m.actor.Session != "" {
		if m.obs.Kind != ObservedPresent || m.obs.Version != "" {
			e.logRecordErr(s.Record(m.actor.Session, result.Key, m.obs), "record observation", result)
		}
		if m.to != nil && m.sourceDeleted {
			e.logRecordErr(s.Record(m.actor.Session, m.target.Key, Absent()), "record observation", m.target)
		}
	}
	// The audit entry first: the last writer records carry its seq.
	seq, err := s.appendAudit(entry)
	e.logRecordErr(err, "append audit entry", m.target)
	e.logRecordErr(s.SetLastWrite(result.Key, WriteRecord{
		Actor: m.actor, Op: m.op, Time: now, Version: after, Path: result.DisplayPath, Seq: seq,
	}), "record last writer", result)
	if m.to != nil && m.sourceDeleted {
		e.logRecordErr(s.SetLastWrite(m.target.Key, WriteRecord{
			Actor: m.actor, Op: m.op, Time: now, Path: m.target.DisplayPath, Seq: seq,
		}), "record last writer", m.target)
	}
}

func (e *Engine) logRecordErr(err error, what string, t provider.Target) {
	if err != nil {
		e.store.log.Error(what+" after a successful mutation", "path", t.DisplayPath, "err", err)
	}
}

// notify runs every observer; all run even if one fails.
func (e *Engine) notify(ctx context.Context, ev Event) error {
	e.mu.RLock()
	observers := e.observers
	e.mu.RUnlock()
	var errs []error
	for _, o := range observers {
		if err := o(ctx, ev); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s %s is done, but %w: %w", ev.Op, ev.Target.DisplayPath, ErrObserverFailed, errors.Join(errs...))
}
