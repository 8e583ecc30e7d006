package policy

import (
	"container/list"
	"errors"
	"sync"
	"time"

	"github.com/dshmount/dshmount/internal/provider"
)

// Refusals. Every guarded change the engine refuses, on the socket (Write,
// Edit, Patch, Delete, Move) or on the mount (CheckMount,
// CheckMountCreate), becomes an audit entry with the actor, the op, the
// FS_… code and the reason, so "why was my write refused?" has an answer
// outside the daemon's stderr. Refusal entries change nothing: the engine
// sends them to no observer (they never reach a change feed or fs.watch),
// and AuditQuery{Kind: AuditChanges} leaves them out.
//
// Refusals on the mount are rate-limited per (session, path, code): the
// kernel retries an ESTALE open, and a program may loop on EACCES. At most
// one entry per key per Options.RefusalInterval is written; the next entry
// written for the key carries the number left out in between (Suppressed).
// A refusal on the socket (or over MCP) is one request an agent made and
// may look for: each is written.

// IsRefusal reports whether code means a change was refused rather than
// failed: by the guard (FS_NOT_OBSERVED, FS_STALE_VERSION), by the caller's
// permissions (FS_PERMISSION_DENIED) or by the workspace view
// (FS_SANDBOX_DENIED). FS_NOT_FOUND is a refusal only when the guard decides
// it (the session saw the file absent), which AuditRefusal's caller asserts;
// from the filesystem it is an ordinary failure.
func IsRefusal(code provider.Code) bool {
	switch code {
	case provider.CodeNotObserved, provider.CodeStaleVersion,
		provider.CodePermissionDenied, provider.CodeSandboxDenied:
		return true
	}
	return false
}

// AuditRefusal records that a was refused op on t because of err, when err
// is a refusal: its code satisfies IsRefusal, or is FS_NOT_FOUND (the caller
// asserts err is the guard's decision, not a failed lookup). Other errors
// and nil record nothing. The entry is rate-limited (see
// Options.RefusalInterval) and reaches no observer. It reports whether an
// entry was written.
func (e *Engine) AuditRefusal(a Actor, op MutationOp, t provider.Target, err error) bool {
	return e.auditRefusal(a, op, t, err, true)
}

// auditGuardRefusal is auditRefusal for a change made under g: the stale
// refusal of a change its caller merges (g.Merge) is the caller's to audit.
func (e *Engine) auditGuardRefusal(a Actor, op MutationOp, t provider.Target, err error, guardDecided bool, g Guard) {
	if g.Merge && provider.CodeOf(err) == provider.CodeStaleVersion {
		return
	}
	e.auditRefusal(a, op, t, err, guardDecided)
}

// auditRefusal is AuditRefusal; guardDecided says whether FS_NOT_FOUND is
// the guard's answer (a decision) or the filesystem's (a provider call).
func (e *Engine) auditRefusal(a Actor, op MutationOp, t provider.Target, err error, guardDecided bool) bool {
	return e.auditRefusalTo(a, op, t, nil, err, guardDecided)
}

// auditRefusalTo is auditRefusal with the destination of a move or rename.
// The rate limit counts by t, or by to when the error names it.
func (e *Engine) auditRefusalTo(a Actor, op MutationOp, t provider.Target, to *provider.Target, err error, guardDecided bool) bool {
	if err == nil {
		return false
	}
	code := provider.CodeOf(err)
	if !IsRefusal(code) && (code != provider.CodeNotFound || !guardDecided) {
		return false
	}
	keyPath := t.DisplayPath
	var pe *provider.Error
	if to != nil && errors.As(err, &pe) && pe.Path == to.DisplayPath {
		keyPath = to.DisplayPath // the destination was refused
	}
	s := e.store
	now := s.opts.Now()
	ok, suppressed := true, uint64(0)
	if a.Channel == ChannelMount {
		ok, suppressed = e.refusals.admit(refusalKey{session: a.Session, path: keyPath, code: code}, now)
	}
	if !ok {
		return false
	}
	entry := AuditEntry{
		Time: now, Key: t.Key, Path: t.DisplayPath, Op: op, Actor: a,
		Refused: code, Reason: provider.MessageOf(err), Suppressed: suppressed,
	}
	if to != nil {
		entry.To = to.DisplayPath
	}
	if err := s.AppendAudit(entry); err != nil {
		s.log.Error("append refusal audit entry", "path", t.DisplayPath, "code", code, "err", err)
		return false
	}
	return true
}

// auditMountRefusal audits a mount hook's refusal of a bound session.
func (e *Engine) auditMountRefusal(a Actor, op MutationOp, t provider.Target, err error) {
	if err == nil || a.Session == "" {
		return
	}
	if a.Channel == "" {
		a.Channel = ChannelMount
	}
	e.auditRefusal(a, op, t, err, true)
}

// refusalKey is what the refusal rate limit counts by.
type refusalKey struct {
	session SessionID
	path    string
	code    provider.Code
}

// refusalCount is one key's state: when its last entry was written and how
// many refusals were left out since.
type refusalCount struct {
	key        refusalKey
	last       time.Time
	suppressed uint64
}

// refusalLimiter admits at most one refusal entry per key per interval. It
// remembers at most maxKeys keys, in the order their last entry was
// written, so making room is O(1).
type refusalLimiter struct {
	interval time.Duration // <= 0: admit everything
	maxKeys  int

	mu    sync.Mutex
	keys  map[refusalKey]*list.Element // of *refusalCount
	order *list.List                   // least recently written first
}

func newRefusalLimiter(interval time.Duration, maxKeys int) *refusalLimiter {
	return &refusalLimiter{interval: interval, maxKeys: max(maxKeys, 1),
		keys: make(map[refusalKey]*list.Element), order: list.New()}
}

// admit reports whether a refusal of k at now gets an entry and, if so, how
// many refusals of k were left out since its previous entry.
func (l *refusalLimiter) admit(k refusalKey, now time.Time) (bool, uint64) {
	if l.interval <= 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	el, ok := l.keys[k]
	if ok {
		c := el.Value.(*refusalCount)
		if now.Sub(c.last) < l.interval {
			c.suppressed++
			return false, 0
		}
		suppressed := c.suppressed
		c.last, c.suppressed = now, 0
		l.order.MoveToBack(el)
		return true, suppressed
	}
	for l.order.Len() >= l.maxKeys {
		// The least recently written key goes: quiet for a whole interval,
		// a later refusal of it is admitted anyway; otherwise the count left
		// out for it is lost (the limiter is full of busier keys).
		front := l.order.Front()
		delete(l.keys, front.Value.(*refusalCount).key)
		l.order.Remove(front)
	}
	l.keys[k] = l.order.PushBack(&refusalCount{key: k, last: now})
	return true, 0
}
