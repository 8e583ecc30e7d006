package policy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/patch"
)

// Event describes one completed mutation, for observers.
type Event struct {
	Actor       Actor
	Op          MutationOp
	Target      provider.Target
	Observation Observation // what the actor's session now knows of Target
	Before      provider.Version
	After       provider.Version
	To          *provider.Target // destination of a move or rename
}

// Preparer runs before a socket mutation's guard reads the target's bytes:
// the FUSE layer writes back the mount's dirty pages of that file (a
// person's mmap stores through the mount), so the guard hashes the bytes
// everyone sees.
type Preparer func(ctx context.Context, t provider.Target)

// Observer runs after a mutation is on disk. Its error is reported to the
// caller (wrapping ErrObserverFailed) but never undoes the mutation.
type Observer func(ctx context.Context, ev Event) error

// Guard is an explicit per-call override of the decider. Write or Version
// replaces the decider's guard; Unconditional skips guarding (and is
// audited). The zero Guard asks the decider.
type Guard struct {
	Write         *provider.WriteIntent
	Version       *provider.VersionGuard
	Unconditional bool
	// Detail, when set, is the audit entry's detail of the change (a
	// merged change names what it merged over and whose bytes those were).
	Detail string
	// Merge says the caller merges a change refused as stale over the
	// current bytes (merge: true): the engine leaves that FS_STALE_VERSION
	// out of the audit log, so that a merged change is one entry; the
	// caller audits the refusal (AuditRefusal) when no merge follows.
	Merge bool
}

// Engine is the one guarded path for every mutation: decide the guard →
// provider call → record the outcome (observation, last writer, audit entry)
// → observers. The control socket and the FUSE layer both go through it.
type Engine struct {
	store    *Store
	fs       provider.FileSystem
	refusals *refusalLimiter
	own      *ownChanges // the daemon's own changes, for the watcher
	mclaims  mountClaims // shared store: claims held for bound mount changes

	mu        sync.RWMutex
	zones     Zones
	decider   Decider
	observers []Observer
	preparers []Preparer
}

// NewEngine returns an Engine over store and fs with the observation decider
// registered in the decider slot.
func NewEngine(store *Store, fs provider.FileSystem) *Engine {
	e := newEngine(store, fs)
	e.RegisterDecider(NewObservationDecider(store))
	return e
}

// newEngine returns an Engine with an empty decider slot (unguarded until a
// decider registers).
func newEngine(store *Store, fs provider.FileSystem) *Engine {
	e := &Engine{store: store, fs: fs,
		refusals: newRefusalLimiter(store.opts.RefusalInterval, store.opts.RefusalKeys),
		own:      newOwnChanges(store.opts.Now)}
	store.rec.attach(e)
	return e
}

// RegisterDecider puts d in the single decider slot. It returns false, and
// changes nothing, when the slot is already taken: the first wins.
func (e *Engine) RegisterDecider(d Decider) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.decider != nil || d == nil {
		return false
	}
	e.decider = d
	return true
}

// AddObserver adds an observer; observers run in the order added.
func (e *Engine) AddObserver(o Observer) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.observers = append(e.observers, o)
}

// AddPreparer adds a preparer; preparers run in the order added.
func (e *Engine) AddPreparer(p Preparer) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.preparers = append(e.preparers, p)
}

// prepare announces the change of ts (see ownChanges) and runs the
// preparers for them; it returns the announcement's id, which the
// mutation's commit or abort ends.
func (e *Engine) prepare(ctx context.Context, ts ...provider.Target) uint64 {
	own := e.own.begin(ts...)
	e.mu.RLock()
	preparers := e.preparers
	e.mu.RUnlock()
	for _, p := range preparers {
		for _, t := range ts {
			p(ctx, t)
		}
	}
	return own
}

// SetZones sets the paths outside the guard for bound processes on the
// mount (see Zones).
func (e *Engine) SetZones(z Zones) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.zones = z
}

// Zones returns the paths outside the guard (SetZones).
func (e *Engine) Zones() Zones {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.zones
}

// guardTable is the guard table over the store and the zones.
func (e *Engine) guardTable() guardTable {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return guardTable{store: e.store, zones: e.zones}
}

// FS returns the provider the Engine drives.
func (e *Engine) FS() provider.FileSystem { return e.fs }

// Store returns the observation store.
func (e *Engine) Store() *Store { return e.store }

// Flush writes the store's pending records out.
func (e *Engine) Flush() error { return e.store.Flush() }

func (e *Engine) currentDecider() Decider {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.decider
}

// begin checks that a's session is open and marks it used. A shared store
// that cannot be reached is FS_IO_ERROR.
func (e *Engine) begin(a Actor) error {
	err := e.useSession(a)
	if errors.Is(err, ErrStoreUnavailable) {
		return storeError("session", "", err)
	}
	return err
}

func (e *Engine) useSession(a Actor) error {
	if a.Session == "" {
		return nil
	}
	return e.store.UseSession(a.Session)
}

// beginRead is begin for a read: when the store cannot be reached the read
// is still answered, as the actor without a session (it records nothing,
// so a later guarded change needs a new read).
func (e *Engine) beginRead(a Actor) (Actor, error) {
	err := e.useSession(a)
	if errors.Is(err, ErrStoreUnavailable) {
		e.store.log.Warn("answering a read without recording it: the policy store is unavailable", "session", a.Session, "err", err)
		a.Session = ""
		return a, nil
	}
	return a, err
}

// claim claims ts on a shared store before a mutation publishes (see
// Store.Claim); the refusal is audited like a guard's.
func (e *Engine) claim(ctx context.Context, a Actor, op MutationOp, ts ...provider.Target) (*Claim, error) {
	keys := make([]provider.Key, len(ts))
	for i, t := range ts {
		keys[i] = t.Key
	}
	e.mclaims.release(keys...) // this daemon's own mount claims give way
	c, err := e.store.Claim(ctx, string(op), ts[0].DisplayPath, keys...)
	if err != nil {
		if len(ts) > 1 {
			e.auditMoveRefusal(a, ts[0], ts[1], err, true)
		} else {
			e.auditRefusal(a, op, ts[0], err, true)
		}
	}
	return c, err
}

// WriteIntent is the preflight of a write: the guard the decider would use,
// without recording anything.
func (e *Engine) WriteIntent(ctx context.Context, a Actor, t provider.Target) (*provider.WriteIntent, error) {
	if err := e.begin(a); err != nil {
		return nil, err
	}
	return e.decideWrite(ctx, a, t, Guard{})
}

// EditIntent is the preflight of an edit, a patch or a move source.
func (e *Engine) EditIntent(ctx context.Context, a Actor, t provider.Target) (*provider.VersionGuard, error) {
	if err := e.begin(a); err != nil {
		return nil, err
	}
	return e.decideEdit(ctx, a, t, Guard{}, "edit")
}

// DeleteIntent is the preflight of a delete.
func (e *Engine) DeleteIntent(ctx context.Context, a Actor, t provider.Target) (*provider.VersionGuard, error) {
	if err := e.begin(a); err != nil {
		return nil, err
	}
	return e.decideDelete(ctx, a, t, Guard{})
}

// boundUnconditional refuses an unconditional change asked by a process
// bound to a session: on every channel a bound process is its session,
// which is guarded. Unbound callers may skip the guard (they can write
// through the mount anyway); their unconditional changes are audited.
func boundUnconditional(a Actor, t provider.Target, op string) error {
	return provider.NewError(provider.CodePermissionDenied, op, t.DisplayPath, nil,
		"a process bound to session %s cannot skip the guard; read the file, or pass the version you read", a.Session)
}

func (e *Engine) decideWrite(ctx context.Context, a Actor, t provider.Target, g Guard) (*provider.WriteIntent, error) {
	switch {
	case g.Unconditional && a.Bound:
		return nil, boundUnconditional(a, t, "write")
	case g.Unconditional:
		return nil, nil
	case g.Write != nil:
		return g.Write, nil
	case g.Version != nil:
		return &provider.WriteIntent{Kind: provider.ReplaceIfVersion, Version: g.Version.Version}, nil
	}
	d := e.currentDecider()
	if d == nil {
		return nil, nil
	}
	return d.WriteIntent(ctx, a, t)
}

func (e *Engine) decideEdit(ctx context.Context, a Actor, t provider.Target, g Guard, op string) (*provider.VersionGuard, error) {
	switch {
	case g.Unconditional && a.Bound:
		return nil, boundUnconditional(a, t, op)
	case g.Unconditional:
		return nil, nil
	case g.Version != nil:
		return g.Version, nil
	case g.Write != nil:
		if g.Write.Kind != provider.ReplaceIfVersion {
			return nil, provider.NewError(provider.CodeInvalidArgument, op, t.DisplayPath, nil,
				"an %s needs a version guard, not %s", op, g.Write.Kind)
		}
		return &provider.VersionGuard{Version: g.Write.Version}, nil
	}
	d := e.currentDecider()
	if d == nil {
		return nil, nil
	}
	vg, err := d.EditIntent(ctx, a, t)
	return vg, withOp(err, op)
}

func (e *Engine) decideDelete(ctx context.Context, a Actor, t provider.Target, g Guard) (*provider.VersionGuard, error) {
	if g.Unconditional || g.Version != nil || g.Write != nil {
		return e.decideEdit(ctx, a, t, g, "delete")
	}
	d := e.currentDecider()
	if d == nil {
		return nil, nil
	}
	vg, err := d.DeleteIntent(ctx, a, t)
	return vg, withOp(err, "delete")
}

// withOp relabels a decider's *provider.Error with the real operation.
func withOp(err error, op string) error {
	var pe *provider.Error
	if err == nil || !errors.As(err, &pe) || pe.Op == op {
		return err
	}
	c := *pe
	c.Op = op
	return &c
}

// Stat returns t's metadata. It records nothing: an observation comes
// from bytes (a read, or the session's own change), never from metadata, so
// a stat does not let a token-less change replace bytes nobody read. The
// version it reports stays a valid explicit guard (the caller asserts what
// it replaces).
func (e *Engine) Stat(ctx context.Context, a Actor, t provider.Target) (*provider.Info, error) {
	if _, err := e.beginRead(a); err != nil {
		return nil, err
	}
	return e.fs.Stat(ctx, t)
}

// Read reads t's text and records present at the version of the bytes it
// read (provider.TextVersionReader; other backends: the version of a Stat
// taken just before). A missing target records absent and fails with
// FS_NOT_FOUND, so a later guarded write may create it but an edit may not.
func (e *Engine) Read(ctx context.Context, a Actor, t provider.Target) (string, provider.Info, error) {
	a, err := e.beginRead(a)
	if err != nil {
		return "", provider.Info{}, err
	}
	if r, ok := e.fs.(provider.TextVersionReader); ok {
		text, info, err := r.ReadTextVersion(ctx, t)
		if provider.CodeOf(err) == provider.CodeNotFound {
			return "", provider.Info{}, e.readAbsent(a, t)
		}
		if err != nil {
			return "", info, err
		}
		_, err = e.observe(a, t, Present(info.Version))
		return text, info, err
	}
	info, err := e.fs.Stat(ctx, t)
	if err != nil {
		return "", provider.Info{}, err
	}
	if info == nil {
		return "", provider.Info{}, e.readAbsent(a, t)
	}
	text, err := e.fs.ReadText(ctx, t)
	if err != nil {
		return "", *info, err
	}
	if _, err := e.observe(a, t, Present(info.Version)); err != nil {
		return text, *info, err
	}
	return text, *info, nil
}

// WindowRead is what Engine.ReadWindow read: the window, the Info of the
// bytes it was cut from, and whether a's session recorded the read. It
// did not when the read had no session or a shared store could not be
// reached: the session's next guarded change then needs a new read.
type WindowRead struct {
	provider.WindowedText
	Info     provider.Info
	Observed bool
}

// ReadWindow is Read keeping only window w of the text (see
// provider.ReadWindow: streamed, memory bounded by the window, when the
// backend can).
func (e *Engine) ReadWindow(ctx context.Context, a Actor, t provider.Target, w provider.TextWindow) (WindowRead, error) {
	a, err := e.beginRead(a)
	if err != nil {
		return WindowRead{}, err
	}
	win, info, err := provider.ReadWindow(ctx, e.fs, t, w)
	if provider.CodeOf(err) == provider.CodeNotFound {
		return WindowRead{}, e.readAbsent(a, t)
	}
	if err != nil {
		return WindowRead{Info: info}, err
	}
	observed, err := e.observe(a, t, Present(info.Version))
	return WindowRead{WindowedText: win, Info: info, Observed: observed}, err
}

// readAbsent records that a's read found no t and returns the read's error.
func (e *Engine) readAbsent(a Actor, t provider.Target) error {
	if _, err := e.observe(a, t, Absent()); err != nil {
		return err
	}
	return provider.NewError(provider.CodeNotFound, "read", t.DisplayPath, nil,
		"no such file; check the path, or write it to create it")
}

// observe records what a's session saw of t and reports whether it did:
// not without a session, nor when a shared store cannot be reached.
func (e *Engine) observe(a Actor, t provider.Target, obs Observation) (bool, error) {
	if a.Session == "" {
		return false, nil
	}
	err := e.store.Record(a.Session, t.Key, obs)
	if errors.Is(err, ErrStoreUnavailable) {
		// The answer goes out unrecorded: the session has not seen it, so
		// a guarded change needs a new read (stricter, never looser).
		e.store.log.Warn("a read was not recorded: the policy store is unavailable", "path", t.DisplayPath, "err", err)
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("record observation of %s: %w", t.DisplayPath, err)
	}
	return true, nil
}

// Write writes content to t under the decided (or explicit) write intent.
func (e *Engine) Write(ctx context.Context, a Actor, t provider.Target, content string, g Guard) (provider.WriteOutcome, error) {
	if err := e.begin(a); err != nil {
		return provider.WriteOutcome{}, err
	}
	intent, err := e.decideWrite(ctx, a, t, g)
	if err != nil {
		e.auditGuardRefusal(a, OpWrite, t, err, true, g)
		return provider.WriteOutcome{}, err
	}
	c, err := e.claim(ctx, a, OpWrite, t)
	if err != nil {
		return provider.WriteOutcome{}, err
	}
	own := e.prepare(ctx, t)
	out, err := e.fs.WriteText(ctx, t, content, intent)
	if err != nil {
		c.Release(nil)
		e.own.abort(own, t)
		e.auditGuardRefusal(a, OpWrite, t, err, false, g)
		return out, err
	}
	var before provider.Version
	if intent != nil {
		before = intent.Version
	}
	return out, e.commit(ctx, mutation{
		actor: a, op: OpWrite, target: t, before: before, after: out.Version,
		obs: Present(out.Version), unconditional: g.Unconditional, detail: cmp.Or(g.Detail, string(out.Operation)), claim: c, own: own,
	})
}

// Edit applies a literal edit to t under the decided (or explicit) guard.
func (e *Engine) Edit(ctx context.Context, a Actor, t provider.Target, req provider.EditRequest, g Guard) (provider.EditOutcome, error) {
	if err := e.begin(a); err != nil {
		return provider.EditOutcome{}, err
	}
	vg, err := e.decideEdit(ctx, a, t, g, "edit")
	if err != nil {
		e.auditGuardRefusal(a, OpEdit, t, err, true, g)
		return provider.EditOutcome{}, err
	}
	c, err := e.claim(ctx, a, OpEdit, t)
	if err != nil {
		return provider.EditOutcome{}, err
	}
	own := e.prepare(ctx, t)
	out, err := e.fs.EditText(ctx, t, req, vg)
	if err != nil {
		c.Release(nil)
		e.own.abort(own, t)
		e.auditGuardRefusal(a, OpEdit, t, err, false, g)
		return out, err
	}
	return out, e.commit(ctx, mutation{
		actor: a, op: OpEdit, target: t, before: guardVersion(vg), after: out.Version,
		obs: Present(out.Version), unconditional: g.Unconditional, claim: c, own: own,
	})
}

// Patch applies parsed hunks to t under the decided (or explicit) guard.
func (e *Engine) Patch(ctx context.Context, a Actor, t provider.Target, hunks []patch.Hunk, g Guard) (provider.EditOutcome, error) {
	if err := e.begin(a); err != nil {
		return provider.EditOutcome{}, err
	}
	vg, err := e.decideEdit(ctx, a, t, g, "patch")
	if err != nil {
		e.auditGuardRefusal(a, OpPatch, t, err, true, g)
		return provider.EditOutcome{}, err
	}
	c, err := e.claim(ctx, a, OpPatch, t)
	if err != nil {
		return provider.EditOutcome{}, err
	}
	own := e.prepare(ctx, t)
	out, err := e.fs.PatchText(ctx, t, hunks, vg)
	if err != nil {
		c.Release(nil)
		e.own.abort(own, t)
		e.auditGuardRefusal(a, OpPatch, t, err, false, g)
		return out, err
	}
	return out, e.commit(ctx, mutation{
		actor: a, op: OpPatch, target: t, before: guardVersion(vg), after: out.Version,
		obs: Present(out.Version), unconditional: g.Unconditional, claim: c, own: own,
	})
}

// Delete removes t under the decided (or explicit) guard.
func (e *Engine) Delete(ctx context.Context, a Actor, t provider.Target, g Guard) (provider.DeleteOutcome, error) {
	if err := e.begin(a); err != nil {
		return provider.DeleteOutcome{}, err
	}
	vg, err := e.decideDelete(ctx, a, t, g)
	if err != nil {
		e.auditRefusal(a, OpDelete, t, err, true)
		return provider.DeleteOutcome{}, err
	}
	c, err := e.claim(ctx, a, OpDelete, t)
	if err != nil {
		return provider.DeleteOutcome{}, err
	}
	own := e.prepare(ctx, t)
	out, err := e.fs.DeleteFile(ctx, t, vg)
	if err != nil {
		c.Release(nil)
		e.own.abort(own, t)
		e.auditRefusal(a, OpDelete, t, err, false)
		return out, err
	}
	return out, e.commit(ctx, mutation{
		actor: a, op: OpDelete, target: t, before: guardVersion(vg),
		obs: Absent(), unconditional: g.Unconditional, claim: c, own: own,
	})
}

// Move publishes src (optionally patched by hunks) at dst, then removes src;
// src is guarded as an edit (srcG), dst as a write (dstG). The session
// records dst present, and src absent only when it was really removed.
func (e *Engine) Move(ctx context.Context, a Actor, src, dst provider.Target, hunks []patch.Hunk, srcG, dstG Guard) (provider.MoveOutcome, error) {
	if err := e.begin(a); err != nil {
		return provider.MoveOutcome{}, err
	}
	sg, err := e.decideEdit(ctx, a, src, srcG, "move")
	if err != nil {
		e.auditMoveRefusal(a, src, dst, err, true)
		return provider.MoveOutcome{}, err
	}
	dg, err := e.decideWrite(ctx, a, dst, dstG)
	if err != nil {
		err = withOp(err, "move")
		e.auditMoveRefusal(a, src, dst, err, true)
		return provider.MoveOutcome{}, err
	}
	c, err := e.claim(ctx, a, OpMove, src, dst)
	if err != nil {
		return provider.MoveOutcome{}, err
	}
	own := e.prepare(ctx, src, dst)
	out, err := e.fs.MoveFile(ctx, src, dst, provider.MoveOptions{Hunks: hunks, ExpectedSource: sg, ExpectedDestination: dg})
	if err != nil {
		c.Release(nil)
		e.own.abort(own, src, dst)
		e.auditMoveRefusal(a, src, dst, err, false)
		return out, err
	}
	m := mutation{
		actor: a, op: OpMove, target: src, before: guardVersion(sg), after: out.Destination.Version,
		obs: Present(out.Destination.Version), to: &dst,
		sourceDeleted: out.SourceDeleted, unconditional: srcG.Unconditional || dstG.Unconditional, claim: c, own: own,
	}
	if f := out.SourceFailure; f != nil {
		m.detail = fmt.Sprintf("source not removed: %s: %s", f.Code, f.Message)
	}
	return out, e.commit(ctx, m)
}

// auditMoveRefusal records a refused move of src to dst.
func (e *Engine) auditMoveRefusal(a Actor, src, dst provider.Target, err error, guardDecided bool) {
	e.auditRefusalTo(a, OpMove, src, &dst, err, guardDecided)
}

func guardVersion(vg *provider.VersionGuard) provider.Version {
	if vg == nil {
		return ""
	}
	return vg.Version
}
