package policy

import (
	"context"
	"fmt"
	"time"

	"github.com/dshmount/dshmount/policy/kv"
	"github.com/dshmount/dshmount/provider"
)

// recorder is how the store keeps its records on its engine, chosen once
// when the store opens from the engine's declared capability (kv.Engine's
// Shared): a local engine is this daemon's alone, so records are buffered,
// cached and flushed in batches, with a clean-shutdown marker; a shared
// engine is written by other daemons too, so records are written through
// and nothing another daemon can change is cached.
type recorder interface {
	// start loads the meta records and sessions and applies the crash
	// rule.
	start() error
	// lookup reads key: (value, true) or (nil, false) when absent.
	lookup(key []byte) ([]byte, bool, error)
	// put stores key=val (keep: stay cached once flushed).
	put(key, val []byte, keep bool) error
	// del removes key.
	del(key []byte) error
	// markClean records a clean shutdown, before the final sync.
	markClean(ctx context.Context) error
	// markChangesLost is MarkChangesLost.
	markChangesLost()
	// changeSeq is the seq of the newest change the store knows of.
	changeSeq() uint64
	// appendAudit stores the audit entry e (stored: as the engine keeps
	// it) and returns its seq.
	appendAudit(e, stored AuditEntry) (uint64, error)
	// bindingPrefix is where this daemon's bindings live.
	bindingPrefix() string
	// recordMutation records e's mutation m (its resulting observation,
	// versions and audit entry); a failure is logged, never returned: the
	// mutation already happened.
	recordMutation(e *Engine, m mutation, result provider.Target, after provider.Version, now time.Time, entry AuditEntry)
}

// newRecorder is the recorder for s's engine.
func newRecorder(s *Store) recorder {
	if s.db.Shared() {
		return sharedRecorder{s}
	}
	return localRecorder{s}
}

// localRecorder keeps the records of a store whose engine only this daemon
// writes.
type localRecorder struct{ s *Store }

func (r localRecorder) start() error                            { return r.s.startLocal() }
func (r localRecorder) lookup(key []byte) ([]byte, bool, error) { return r.s.lookupLocal(key) }
func (r localRecorder) put(key, val []byte, keep bool) error {
	r.s.buf.put(key, val, keep)
	return nil
}
func (r localRecorder) del(key []byte) error {
	r.s.buf.del(key)
	return nil
}
func (r localRecorder) markClean(ctx context.Context) error {
	return r.s.db.Write(ctx, []kv.Op{kv.Put([]byte(keyClean), []byte{1})})
}

// sharedRecorder keeps the records of a store whose engine other daemons
// write too.
type sharedRecorder struct{ s *Store }

func (r sharedRecorder) start() error                            { return r.s.startShared() }
func (r sharedRecorder) lookup(key []byte) ([]byte, bool, error) { return r.s.lookupShared(key) }
func (r sharedRecorder) put(key, val []byte, _ bool) error {
	return r.s.writeThrough(kv.Put(key, val))
}
func (r sharedRecorder) del(key []byte) error { return r.s.writeThrough(kv.Delete(key)) }

// markClean does nothing: a shared store has no clean-shutdown marker (other
// daemons go on using it).
func (sharedRecorder) markClean(context.Context) error { return nil }

func (r localRecorder) markChangesLost()  { r.s.markLocalChangesLost() }
func (r localRecorder) changeSeq() uint64 { return r.s.LastSeq() }
func (r localRecorder) appendAudit(e, stored AuditEntry) (uint64, error) {
	return r.s.appendLocalAudit(e, stored)
}
func (localRecorder) bindingPrefix() string { return prefixBinding }

func (r sharedRecorder) markChangesLost()  { r.s.markSharedChangesLost() }
func (r sharedRecorder) changeSeq() uint64 { return r.s.sharedSeq.Load() }

// appendAudit appends to the shared log; subscribers get the entry from the
// engine's watch, in seq order with every other daemon's entries (see
// shared_feed.go).
func (r sharedRecorder) appendAudit(e, stored AuditEntry) (uint64, error) {
	s := r.s
	stored.Daemon = s.owner
	s.seqMu.Lock()
	defer s.seqMu.Unlock()
	seq, err := s.appendShared(stored)
	if err != nil {
		return 0, fmt.Errorf("append audit entry for %s: %w", e.Path, err)
	}
	return seq, nil
}

// bindingPrefix: pids and cgroups name processes of one host only, so each
// host keeps its bindings apart.
func (r sharedRecorder) bindingPrefix() string { return prefixBinding + r.s.opts.Host + "/" }

func (localRecorder) recordMutation(e *Engine, m mutation, result provider.Target, after provider.Version, now time.Time, entry AuditEntry) {
	e.recordLocal(m, result, after, now, entry)
}

func (r sharedRecorder) recordMutation(e *Engine, m mutation, result provider.Target, after provider.Version, _ time.Time, entry AuditEntry) {
	e.logRecordErr(r.s.commitShared(m, result, after, entry), "record the mutation", result)
}
