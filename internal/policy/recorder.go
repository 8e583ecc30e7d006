package policy

import (
	"context"
	"fmt"
	"time"

	"github.com/dshmount/dshmount/internal/policy/kv"
	"github.com/dshmount/dshmount/internal/provider"
)

// recorder is how the store keeps its records on its engine, chosen once
// when the store opens from the engine's declared capability (kv.Store's
// Shared): a local engine is this daemon's alone, so records are buffered,
// cached and flushed in batches, with a clean-shutdown marker; a shared
// engine is written by other daemons too, so records are written through,
// nothing another daemon can change is cached, sessions are read from the
// engine on use and files are claimed before they change (see shared.go).
// No other code asks which kind of engine the store has.
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
	// auditComplete is the newest seq a read of the audit log can vouch
	// it has every entry up to (see Store.Audit).
	auditComplete() uint64
	// bindingPrefix is where this daemon's bindings live.
	bindingPrefix() string
	// recordMutation records e's mutation m (its resulting observation,
	// versions and audit entry); a failure is logged, never returned: the
	// mutation already happened.
	recordMutation(e *Engine, m mutation, result provider.Target, after provider.Version, now time.Time, entry AuditEntry)
	// attach joins the Engine e to the store (at most one does).
	attach(e *Engine)

	// loadDigest is the persisted digest of id (the zero one when none).
	loadDigest(id provider.FileID) provider.CachedDigest
	// digestOps are the writes that persist the changed digests items.
	digestOps(items []digestItem) []kv.Op

	// persistSession stores val, the record of session st.
	persistSession(st *sessionState, val []byte) error
	// fetchSession is session id as the store knows it now (nil when it
	// is not open), updating this daemon's copy; an error wraps
	// ErrStoreUnavailable.
	fetchSession(id SessionID) (*sessionState, error)
	// sessions lists the open sessions, oldest first.
	sessions() []Session

	// claim is Store.Claim of at least one key.
	claim(ctx context.Context, op, path string, keys []provider.Key) (*Claim, error)
	// claimCommit is Engine.ClaimCommit of at least one file.
	claimCommit(ctx context.Context, label string, files []CommitFile) (*Claim, error)
	// claimMount claims t for a bound session's change through e's mount.
	claimMount(e *Engine, op MutationOp, t provider.Target) error
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

// auditComplete: every entry up to the last seq was buffered before a
// read flushes (seqs are assigned and buffered under the feed's lock).
func (r localRecorder) auditComplete() uint64 { return r.s.LastSeq() }
func (localRecorder) bindingPrefix() string   { return prefixBinding }

func (r sharedRecorder) markChangesLost()  { r.s.markSharedChangesLost() }
func (r sharedRecorder) changeSeq() uint64 { return r.s.counterSeen.Load() }

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

// auditComplete: a shared engine also holds other daemons' entries, whose
// seqs this store does not order, so nothing caps a read.
func (sharedRecorder) auditComplete() uint64 { return ^uint64(0) }

// bindingPrefix: pids and cgroups name processes of one host only, so each
// host keeps its bindings apart.
func (r sharedRecorder) bindingPrefix() string { return prefixBinding + r.s.opts.Host + "/" }

func (localRecorder) recordMutation(e *Engine, m mutation, result provider.Target, after provider.Version, now time.Time, entry AuditEntry) {
	e.recordLocal(m, result, after, now, entry)
}

func (r sharedRecorder) recordMutation(e *Engine, m mutation, result provider.Target, after provider.Version, _ time.Time, entry AuditEntry) {
	e.logRecordErr(r.s.commitShared(m, result, after, entry), "record the mutation", result)
}

// attach does nothing: no other daemon changes a local store's files.
func (localRecorder) attach(*Engine) {}

// attach has the store tell e of every other daemon's change (see
// shared_feed.go) and lets e's watcher wait for the records of changes it
// sees before their daemon has recorded them.
func (r sharedRecorder) attach(e *Engine) {
	fn := e.remoteChange
	r.s.onRemote.Store(&fn)
	e.own.remoteWait = remoteRecordWait
}

func (r localRecorder) loadDigest(id provider.FileID) provider.CachedDigest {
	return r.s.loadDigestLocal(id)
}
func (localRecorder) digestOps(items []digestItem) []kv.Op {
	ops := make([]kv.Op, len(items))
	for i, d := range items {
		ops[i] = kv.Put(digestKey(d.id), encodeDigest(d.d))
	}
	return ops
}

// loadDigest and digestOps: a shared engine keeps no digests (see
// digests.go).
func (sharedRecorder) loadDigest(provider.FileID) provider.CachedDigest {
	return provider.CachedDigest{}
}
func (sharedRecorder) digestOps([]digestItem) []kv.Op { return nil }

// persistSession buffers the record: this daemon is the only writer.
func (r localRecorder) persistSession(st *sessionState, val []byte) error {
	r.s.buf.put(sessionKey(st.id), val, true)
	return nil
}

// fetchSession is this daemon's copy: nobody else opens or closes its
// sessions.
func (r localRecorder) fetchSession(id SessionID) (*sessionState, error) {
	s := r.s
	s.sessMu.RLock()
	defer s.sessMu.RUnlock()
	return s.sessions[id], nil
}
func (r localRecorder) sessions() []Session { return r.s.sessionsLocal() }

func (r sharedRecorder) persistSession(st *sessionState, val []byte) error {
	return r.s.persistSessionShared(st, val)
}
func (r sharedRecorder) fetchSession(id SessionID) (*sessionState, error) {
	return r.s.fetchSessionShared(id)
}
func (r sharedRecorder) sessions() []Session { return r.s.sessionsShared() }

// claim, claimCommit and claimMount claim nothing on a local store: the
// provider's per-target locks already serialize this daemon's mutations.
func (localRecorder) claim(context.Context, string, string, []provider.Key) (*Claim, error) {
	return nil, nil
}
func (localRecorder) claimCommit(context.Context, string, []CommitFile) (*Claim, error) {
	return nil, nil
}
func (localRecorder) claimMount(*Engine, MutationOp, provider.Target) error { return nil }

func (r sharedRecorder) claim(ctx context.Context, op, path string, keys []provider.Key) (*Claim, error) {
	return r.s.claimShared(ctx, op, path, keys)
}
func (r sharedRecorder) claimCommit(ctx context.Context, label string, files []CommitFile) (*Claim, error) {
	return r.s.claimCommitShared(ctx, label, files)
}
func (sharedRecorder) claimMount(e *Engine, op MutationOp, t provider.Target) error {
	return e.claimMountShared(op, t)
}
