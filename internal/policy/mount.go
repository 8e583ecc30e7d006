package policy

import (
	"context"
	"fmt"

	"github.com/dshmount/dshmount/internal/provider"
)

// Mount hooks. The FUSE layer calls them for processes bound to a session
// (Actor.Session set); unbound callers pass an empty Session and are never
// refused, but their changes are still recorded (last writer, audit,
// observers) by RecordMount.
//
// Which hook to call:
//
//	open for write / truncate / unlink of an existing file,
//	rename of a source, rename over an existing destination  → CheckMount
//	create of a file that is absent now (O_CREAT, mknod,
//	rename or link onto an absent name)                      → CheckMountCreate
//
// The errors are *provider.Error values; FUSE maps FS_NOT_OBSERVED to
// EACCES, FS_STALE_VERSION to ESTALE and FS_NOT_FOUND to ENOENT.

// CheckMount decides whether a's session may change the existing target t,
// whose version is *current (nil: t is absent now): the mount's columns of
// the guard table (guard.go). With current known, the baseline rule sees
// no ctime and no link count; the FUSE layer calls CheckMountFile.
//
//	no session                         → nil
//	unknown or closed session          → FS_NOT_OBSERVED (wrapping ErrUnknownSession)
//	outside the guard (Zones)          → nil
//	unseen                             → baseline rule, else FS_NOT_OBSERVED
//	observed absent                    → FS_NOT_FOUND, whether or not t exists now
//	present(v), t absent or not at v   → FS_STALE_VERSION
//	present(v), t at v                 → nil
//
// A refusal of a bound session is audited (see AuditRefusal).
//
// op names the system call being decided ("open", "unlink", "rename", …)
// in the error and the audit entry.
func (e *Engine) CheckMount(a Actor, op MutationOp, t provider.Target, current *provider.Version) error {
	if current == nil {
		return e.checkMountFile(a, op, reqMountChange, t, nil)
	}
	v := *current
	return e.CheckMountFile(a, op, t, FileNow{Version: func() (provider.Version, error) { return v, nil }})
}

// CheckMountFile is CheckMount for the existing file f: its version is
// hashed only when the decision needs it (never outside the guard, nor for
// a file the session may change as of its start).
func (e *Engine) CheckMountFile(a Actor, op MutationOp, t provider.Target, f FileNow) error {
	return e.checkMountFile(a, op, reqMountChange, t, &f)
}

// CheckMountCreate decides whether a's session may create t. When t exists
// now (current != nil) it is CheckMount. When t is absent, creating it is
// allowed if the session never saw it or saw it absent, and FS_STALE_VERSION
// if the session saw it present (someone removed what it read), as a guarded
// write would answer.
//
// A refusal of a bound session is audited (see AuditRefusal).
func (e *Engine) CheckMountCreate(a Actor, op MutationOp, t provider.Target, current *provider.Version) error {
	if current != nil {
		return e.CheckMount(a, op, t, current)
	}
	return e.checkMountFile(a, op, reqMountCreate, t, nil)
}

// checkMountFile decides, claims (shared store) and audits a refusal.
func (e *Engine) checkMountFile(a Actor, op MutationOp, req request, t provider.Target, f *FileNow) error {
	kind, err := e.decideMount(a, op, req, t, f)
	if err == nil && a.Session != "" && f != nil && kind != ruleAllow {
		err = e.claimMount(op, t)
	}
	e.auditMountRefusal(a, op, t, err)
	return err
}

// decideMount is the mount's decision: the guard table's cell, checked
// against the file now (f; nil: t is absent).
func (e *Engine) decideMount(a Actor, mop MutationOp, req request, t provider.Target, f *FileNow) (ruleKind, error) {
	op := string(mop)
	if a.Session == "" {
		return ruleAllow, nil
	}
	sess, ok := e.store.Session(a.Session)
	if !ok {
		return ruleRefuse, provider.NewError(provider.CodeNotObserved, op, t.DisplayPath, unknownSession(a.Session),
			"the session bound to this process is closed")
	}
	e.store.Touch(a.Session)
	r := e.guardTable().rule(a, sess, req, op, t, f)
	switch r.kind {
	case ruleAllow:
		return r.kind, nil
	case ruleRefuse:
		return r.kind, r.err
	case ruleUnchanged:
		if f == nil {
			return ruleRefuse, notObserved(op, t.DisplayPath)
		}
		return r.kind, e.guardTable().unchangedSince(a, sess, op, t, f)
	case ruleAt:
		if f == nil {
			return ruleRefuse, staleVersion(op, t.DisplayPath)
		}
		cur, err := f.Version()
		if err != nil {
			return ruleRefuse, err // the caller's own error (the mount maps it to its errno)
		}
		if cur != r.version {
			return ruleRefuse, staleVersion(op, t.DisplayPath)
		}
	}
	return r.kind, nil
}

// OutsideGuard reports whether a's changes of t through the mount are
// outside the guard (Zones): the mount then neither hashes nor records
// observations for it.
func (e *Engine) OutsideGuard(a Actor, t provider.Target) bool {
	return a.Session != "" && e.guardTable().outside(t.DisplayPath, false)
}

// ObserveMount records what a bound process saw (open for read → present at
// the version it opened; a failed lookup → absent). No session: nothing.
func (e *Engine) ObserveMount(a Actor, t provider.Target, obs Observation) error {
	if a.Session == "" {
		return nil
	}
	if _, ok := e.store.Session(a.Session); !ok {
		return nil // a closed session's processes stay bound and learn nothing
	}
	e.store.Touch(a.Session)
	if err := e.store.Record(a.Session, t.Key, obs); err != nil {
		return fmt.Errorf("record mount observation of %s: %w", t.DisplayPath, err)
	}
	return nil
}

// RecordMount records a mutation made through the mount: last writer, audit
// entry, the bound session's observation, then the observers. For
// OpUnlink/OpDelete the session records t absent; with a destination (to,
// for OpRename/OpMove) it records the destination present at after and t
// absent; OpSetattr and OpLink change no observation; otherwise t present
// at after (nothing when after is empty, which leaves an older observation
// that is stale: the strict side). An observer
// failure is returned wrapping ErrObserverFailed.
func (e *Engine) RecordMount(ctx context.Context, a Actor, op MutationOp, t provider.Target, before, after provider.Version, to *provider.Target) error {
	if a.Channel == "" {
		a.Channel = ChannelMount
	}
	if a.Session != "" {
		e.store.Touch(a.Session)
	}
	obs := Present(after)
	switch op {
	case OpUnlink, OpDelete:
		obs = Absent()
	case OpSetattr, OpLink:
		// Metadata changes and new names grant nothing: the session keeps
		// what it had (see CopyMount for a link).
		obs = Present("")
	}
	keys := []provider.Key{t.Key}
	if to != nil {
		keys = append(keys, to.Key)
	}
	return e.commit(ctx, mutation{
		actor: a, op: op, target: t, before: before, after: after, obs: obs,
		to: to, sourceDeleted: to != nil, claim: e.mclaims.take(keys...),
	})
}

// CopyMount gives the new name to of a file (a hard link made by a's
// session through the mount) the observation a's session has of from, if
// any. A link changes no bytes: a fresh observation stays fresh under both
// names, a stale one stale, and an unseen file stays unseen.
func (e *Engine) CopyMount(a Actor, from, to provider.Target) error {
	if a.Session == "" {
		return nil
	}
	obs, ok := e.store.Observation(a.Session, from.Key)
	if !ok {
		return nil
	}
	if err := e.store.Record(a.Session, to.Key, obs); err != nil {
		return fmt.Errorf("carry observation of %s to %s: %w", from.DisplayPath, to.DisplayPath, err)
	}
	return nil
}

// CarryMount moves a's observations of everything below the directory from
// to the same paths below to (a directory renamed by a's session through
// the mount changes no bytes).
func (e *Engine) CarryMount(a Actor, from, to provider.Target) error {
	if a.Session == "" {
		return nil
	}
	return e.store.CarryObservations(a.Session, from.Key, to.Key)
}

// KeepMount carries a's observation of t across a's own metadata change
// (chmod, chown, utimes, an extended attribute) of an object without bytes
// (a symbolic link, a FIFO, a device, a directory), whose metadata version
// moved from before to after: a session that had seen t at before now sees
// it at after. Any other observation (unseen, absent, another version: the
// object changed before this change) stays as it was, so everyone else's
// changes still make it stale.
func (e *Engine) KeepMount(a Actor, t provider.Target, before, after provider.Version) error {
	if a.Session == "" || before == after || after == "" {
		return nil
	}
	obs, ok := e.store.Observation(a.Session, t.Key)
	if !ok || obs.Kind != ObservedPresent || obs.Version != before {
		return nil
	}
	if err := e.store.Record(a.Session, t.Key, Present(after)); err != nil {
		return fmt.Errorf("keep the observation of %s across its own change: %w", t.DisplayPath, err)
	}
	return nil
}

// CheckMountBelow is CheckMount for an entry t below a directory a's
// session renames (the rename moves t out from under its name): the same
// decision and audit, without the claim a change of t itself takes.
func (e *Engine) CheckMountBelow(a Actor, op MutationOp, t provider.Target, f FileNow) error {
	_, err := e.decideMount(a, op, reqMountChange, t, &f)
	e.auditMountRefusal(a, op, t, err)
	return err
}
