package policy

import (
	"context"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/dshmount/dshmount/provider"
)

// ChannelExternal is a change made directly in the workspace directory,
// not through the daemon (seen by the backing-tree watcher).
const ChannelExternal Channel = "external"

// Own-change bookkeeping bounds.
const (
	// ownTTL is how long a committed own change explains watcher events
	// for its paths.
	ownTTL = 2 * time.Second
	// ownWait bounds how long RecordExternal waits for an announced own
	// change (a socket mutation in progress) to commit.
	ownWait = 2 * time.Second
)

// ExternalChange is one change the backing-tree watcher saw.
type ExternalChange struct {
	Op     MutationOp       // OpCreate, OpWrite, OpSetattr, OpDelete or OpRename
	Target provider.Target  // the changed path (a rename's source)
	To     *provider.Target // a rename's destination
	After  provider.Version // the version now ("" when gone or unknown)
	Dir    bool             // the path is a directory
}

// ownChanges remembers what the daemon itself is changing and changed
// recently, per display path, so the watcher's view of the same change is
// not reported a second time as external.
type ownChanges struct {
	now func() time.Time

	mu      sync.Mutex
	changed *sync.Cond
	paths   map[string]*ownEntry
}

// ownEntry is the daemon's latest own change of one path.
type ownEntry struct {
	pending int              // announced, not yet committed
	held    int              // open for writing through the mount
	until   time.Time        // pending announcements expire then
	at      time.Time        // last commit
	op      MutationOp       // of the last commit
	after   provider.Version // of the last commit ("" gone)
	gone    bool             // the last commit removed the path
}

// newOwnChanges returns an empty ledger.
func newOwnChanges(now func() time.Time) *ownChanges {
	o := &ownChanges{now: now, paths: map[string]*ownEntry{}}
	o.changed = sync.NewCond(&o.mu)
	return o
}

// begin announces that the daemon is about to change ts.
func (o *ownChanges) begin(ts ...provider.Target) {
	o.mu.Lock()
	defer o.mu.Unlock()
	until := o.now().Add(ownWait)
	for _, t := range ts {
		e := o.entry(t.DisplayPath)
		e.pending++
		e.until = until
	}
}

// entry returns the entry of p, creating it; o.mu is held. Expired entries
// are dropped as a side effect once the map grows.
func (o *ownChanges) entry(p string) *ownEntry {
	e, ok := o.paths[p]
	if !ok {
		if len(o.paths) >= 4096 {
			o.prune()
		}
		e = &ownEntry{}
		o.paths[p] = e
	}
	return e
}

// prune drops entries that explain nothing any more; o.mu is held.
func (o *ownChanges) prune() {
	now := o.now()
	for p, e := range o.paths {
		if e.held == 0 && (e.pending == 0 || now.After(e.until)) && now.Sub(e.at) > ownTTL {
			delete(o.paths, p)
		}
	}
}

// commit records a completed own mutation and ends its announcement.
func (o *ownChanges) commit(m mutation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	note := func(p string, after provider.Version, gone bool) {
		e := o.entry(p)
		if e.pending > 0 {
			e.pending--
		}
		e.at, e.op, e.after, e.gone = now, m.op, after, gone
	}
	removed := m.obs.Kind == ObservedAbsent || m.op == OpDelete || m.op == OpUnlink
	if m.to != nil {
		note(m.to.DisplayPath, m.after, false)
		if m.sourceDeleted {
			note(m.target.DisplayPath, "", true)
		}
	} else {
		note(m.target.DisplayPath, m.after, removed)
	}
	o.changed.Broadcast()
}

// explains reports whether the daemon's own recent change of c's path(s)
// accounts for c. An announced change still in progress is waited for
// (bounded by its announcement) and then compared.
func (o *ownChanges) explains(c ExternalChange) bool {
	if o.ownTemp(c.Target.DisplayPath) && (c.To == nil || o.ownTemp(c.To.DisplayPath) || o.settled(c.To.DisplayPath)) {
		return true
	}
	paths := []string{c.Target.DisplayPath}
	if c.To != nil {
		paths = append(paths, c.To.DisplayPath)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range paths {
		if e, ok := o.paths[p]; ok && e.held > 0 {
			return true // the mount records it when the file is flushed
		}
	}
	for _, p := range paths {
		for {
			e, ok := o.paths[p]
			if !ok || e.pending == 0 || !o.now().Before(e.until) {
				break
			}
			o.waitLocked(e.until)
		}
	}
	now := o.now()
	recent := func(p string) (*ownEntry, bool) {
		e, ok := o.paths[p]
		if !ok || e.at.IsZero() || now.Sub(e.at) > ownTTL {
			return nil, false
		}
		return e, true
	}
	switch c.Op {
	case OpDelete, OpUnlink:
		e, ok := recent(c.Target.DisplayPath)
		return ok && e.gone
	case OpRename:
		src, okS := recent(c.Target.DisplayPath)
		dst, okD := recent(c.To.DisplayPath)
		return okS && okD && src.gone && !dst.gone && (c.After == "" || dst.after == "" || dst.after == c.After)
	case OpSetattr:
		e, ok := recent(c.Target.DisplayPath)
		return ok && !e.gone
	default:
		e, ok := recent(c.Target.DisplayPath)
		if ok && !e.gone && (e.after == "" || c.After == "" || e.after == c.After) {
			return true
		}
		// A directory the daemon made for a file it published below it.
		return c.Op == OpCreate && c.Dir && o.settledBelowLocked(c.Target.DisplayPath)
	}
}

// ownTemp reports whether p is the temp file of a socket publish of a path
// the daemon is changing or changed recently: "dir/.NAME.dsh-HEX16.tmp"
// (provider/local's createTemp; NAME without leading dots, at most 100
// bytes) or "dir/.NAME.tmp".
func (o *ownChanges) ownTemp(p string) bool {
	dir, base := path.Split(p)
	if !strings.HasPrefix(base, ".") || !strings.HasSuffix(base, ".tmp") || len(base) <= len(".tmp")+1 {
		return false
	}
	name := base[1 : len(base)-len(".tmp")]
	if i := strings.LastIndex(name, ".dsh-"); i >= 0 && len(name)-i == len(".dsh-")+16 {
		name = name[:i]
	}
	return o.settled(dir+name) || o.settled(dir+"."+name)
}

// settled reports whether the daemon announced or recently committed a
// change of p.
func (o *ownChanges) settled(p string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.paths[p]
	if !ok {
		return false
	}
	now := o.now()
	return (e.pending > 0 && now.Before(e.until)) || (!e.at.IsZero() && now.Sub(e.at) <= ownTTL)
}

// settledBelowLocked reports whether the daemon announced or recently
// committed a change below the directory dir; o.mu is held.
func (o *ownChanges) settledBelowLocked(dir string) bool {
	now := o.now()
	for p, e := range o.paths {
		if len(p) > len(dir) && p[len(dir)] == '/' && strings.HasPrefix(p, dir) &&
			((e.pending > 0 && now.Before(e.until)) || (!e.at.IsZero() && now.Sub(e.at) <= ownTTL)) {
			return true
		}
	}
	return false
}

// waitLocked waits for a commit or until deadline; o.mu is held.
func (o *ownChanges) waitLocked(deadline time.Time) {
	d := deadline.Sub(o.now())
	if d <= 0 {
		return
	}
	t := time.AfterFunc(d, func() {
		o.mu.Lock()
		o.changed.Broadcast()
		o.mu.Unlock()
	})
	o.changed.Wait()
	t.Stop()
}

// HoldOwn marks t as open for writing through the mount until release is
// called: its writes are recorded when the file is flushed, so what the
// backing-tree watcher sees of t meanwhile is the daemon's own change.
func (e *Engine) HoldOwn(t provider.Target) (release func()) {
	o := e.own
	o.mu.Lock()
	o.entry(t.DisplayPath).held++
	o.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			o.mu.Lock()
			defer o.mu.Unlock()
			if en, ok := o.paths[t.DisplayPath]; ok && en.held > 0 {
				en.held--
				if en.at.IsZero() {
					en.at = o.now() // late events of its last writes
				}
			}
		})
	}
}

// RecordExternal records a change the backing-tree watcher saw in the
// workspace directory: an audit entry (channel external) and the observers
// (the FUSE layer drops the kernel's caches of the path), unless the
// daemon's own change — announced by a socket mutation, or committed within
// the last seconds with the same result — accounts for it. It reports
// whether it recorded the change.
func (e *Engine) RecordExternal(ctx context.Context, c ExternalChange) (bool, error) {
	if e.own.explains(c) {
		return false, nil
	}
	obs := Present(c.After)
	if c.Op == OpDelete || c.Op == OpUnlink {
		obs = Absent()
	}
	err := e.commit(ctx, mutation{
		actor: Actor{Channel: ChannelExternal}, op: c.Op, target: c.Target, after: c.After,
		obs: obs, to: c.To, sourceDeleted: c.To != nil,
	})
	return true, err
}
