package policy

import (
	"context"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/dshmount/dshmount/internal/provider"
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
	// ownPruneAt is the ledger size at which expired entries are first
	// dropped.
	ownPruneAt = 4096
)

// ExternalChange is one change the backing-tree watcher saw.
type ExternalChange struct {
	Op     MutationOp       // OpCreate, OpWrite, OpSetattr, OpDelete or OpRename
	Target provider.Target  // the changed path (a rename's source)
	To     *provider.Target // a rename's destination
	After  provider.Version // the version now ("" when gone or unknown)
	Dir    bool             // the path is a directory
	// Since, when set, says that every event behind this change happened
	// after it: the watcher had read its event queue empty at Since and
	// delivered all it held by then. An own change completed before Since
	// has had all its events delivered already, so it explains nothing
	// here; one completed at or after it explains, however late the
	// watcher is. Zero (unknown): own changes explain for ownTTL.
	Since time.Time
}

// ownChanges remembers what the daemon itself is changing and changed
// recently, per display path, so the watcher's view of the same change is
// not reported a second time as external.
type ownChanges struct {
	now func() time.Time

	mu      sync.Mutex
	changed *sync.Cond
	paths   map[string]*ownEntry
	seq     uint64    // the last announcement's id
	pruneAt int       // prune when paths grows to this size
	horizon time.Time // the latest Since a watcher reported (zero: none)

	// remoteWait, on a shared store, is how long the watcher's view of a
	// change waits for another daemon's record of it (see remote); zero
	// on a store that is not shared.
	remoteWait time.Duration
	batchSince time.Time // the Since of the watcher batch being classified
	batchUntil time.Time // when its wait for other daemons' records ends
}

// ownEntry is the daemon's latest own change of one path.
type ownEntry struct {
	open    map[uint64]time.Time // announcements in progress → when they expire
	held    int                  // open for writing through the mount
	at      time.Time            // last commit (or last release of a hold)
	tried   time.Time            // last announcement that ended without a commit
	results []ownResult          // the recent commits, oldest first
}

// ownResult is what one own commit left at a path. The watcher classifies
// a path by its state when it flushes, which may be any of the daemon's
// recent results, not only the latest: each one explains.
type ownResult struct {
	at    time.Time
	after provider.Version // "" when gone or unknown
	gone  bool             // the commit removed the path
}

// ownResultsKept bounds the results kept per path (the oldest go first).
const ownResultsKept = 64

// add appends a result, dropping those that can explain nothing any more
// (older than horizon, or than ownTTL without one).
func (o *ownChanges) add(e *ownEntry, r ownResult) {
	keep := e.results[:0]
	for _, old := range e.results {
		if o.fresh(old.at, o.horizon, r.at) {
			keep = append(keep, old)
		}
	}
	if len(keep) >= ownResultsKept {
		keep = append(keep[:0], keep[len(keep)-ownResultsKept+1:]...)
	}
	e.results = append(keep, r)
	e.at = r.at
}

// pending reports whether an announced change of the path is in progress.
func (e *ownEntry) pending(now time.Time) bool {
	for _, until := range e.open {
		if now.Before(until) {
			return true
		}
	}
	return false
}

// endOldest ends the oldest open announcement, for a change announced
// without an id (Engine.Announce).
func (e *ownEntry) endOldest() {
	var oldest uint64
	for id := range e.open {
		if oldest == 0 || id < oldest {
			oldest = id
		}
	}
	delete(e.open, oldest)
}

// waitFor is the latest expiry among the announcements ids still open.
func (e *ownEntry) waitFor(ids []uint64, now time.Time) (time.Time, bool) {
	var last time.Time
	for _, id := range ids {
		if until, ok := e.open[id]; ok && now.Before(until) && until.After(last) {
			last = until
		}
	}
	return last, !last.IsZero()
}

// newOwnChanges returns an empty ledger.
func newOwnChanges(now func() time.Time) *ownChanges {
	o := &ownChanges{now: now, paths: map[string]*ownEntry{}, pruneAt: ownPruneAt}
	o.changed = sync.NewCond(&o.mu)
	return o
}

// begin announces that the daemon is about to change ts; the announcement
// ends with commit (mutation.own) or abort of the id it returns.
func (o *ownChanges) begin(ts ...provider.Target) uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seq++
	until := o.now().Add(ownWait)
	for _, t := range ts {
		e := o.entry(t.DisplayPath)
		if e.open == nil {
			e.open = map[uint64]time.Time{}
		}
		e.open[o.seq] = until
	}
	return o.seq
}

// abort ends the announcements of ts for a change that failed (refused
// under the lock, or an I/O error): nothing is compared with it, but the
// temp files it may have made and removed are still the daemon's own.
func (o *ownChanges) abort(id uint64, ts ...provider.Target) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	for _, t := range ts {
		e := o.entry(t.DisplayPath)
		delete(e.open, id)
		e.tried = now
	}
	o.changed.Broadcast()
}

// fresh reports whether an own change completed at t can still account for
// a watcher event: events after since (when set), else within ownTTL.
func (o *ownChanges) fresh(t, since, now time.Time) bool {
	if t.IsZero() {
		return false
	}
	if !since.IsZero() {
		return !t.Before(since)
	}
	return now.Sub(t) <= ownTTL
}

// entry returns the entry of p, creating it; o.mu is held. Expired entries
// are dropped as a side effect once the map grows.
func (o *ownChanges) entry(p string) *ownEntry {
	e, ok := o.paths[p]
	if !ok {
		if len(o.paths) >= o.pruneAt {
			o.prune()
			o.pruneAt = max(ownPruneAt, 2*len(o.paths))
		}
		e = &ownEntry{}
		o.paths[p] = e
	}
	return e
}

// prune drops entries that explain nothing any more; o.mu is held. While a
// watcher reports its horizon, an entry lives until the watcher has read
// past it, however long that takes.
func (o *ownChanges) prune() {
	now := o.now()
	for p, e := range o.paths {
		if e.held == 0 && !e.pending(now) && !o.fresh(e.at, o.horizon, now) && !o.fresh(e.tried, o.horizon, now) {
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
		if m.own != 0 {
			delete(e.open, m.own)
		} else if m.announced {
			e.endOldest()
		}
		o.add(e, ownResult{at: now, after: after, gone: gone})
	}
	removed := m.obs.Kind == ObservedAbsent || m.op == OpDelete || m.op == OpUnlink
	if m.to != nil {
		note(m.to.DisplayPath, m.after, false)
		if m.sourceDeleted {
			note(m.target.DisplayPath, "", true)
		} else {
			src := o.entry(m.target.DisplayPath) // a move that kept its source
			delete(src.open, m.own)
			src.tried = now
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
	o.mu.Lock()
	if c.Since.After(o.horizon) {
		o.horizon = c.Since
	}
	o.mu.Unlock()
	if o.ownTemp(c.Target.DisplayPath, c.Since) && (c.To == nil || o.ownTemp(c.To.DisplayPath, c.Since) || o.settled(c.To.DisplayPath, c.Since)) {
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
	// Wait for the announcements open now to end (later ones are not
	// waited for: under steady traffic the path may never be quiet).
	for _, p := range paths {
		e, ok := o.paths[p]
		if !ok {
			continue
		}
		ids := make([]uint64, 0, len(e.open))
		for id := range e.open {
			ids = append(ids, id)
		}
		for {
			until, open := e.waitFor(ids, o.now())
			if !open {
				break
			}
			o.waitLocked(until)
		}
	}
	// left reports whether a fresh own result of p is one match accepts.
	left := func(p string, match func(ownResult) bool) bool {
		e, ok := o.paths[p]
		if !ok {
			return false
		}
		now := o.now()
		for _, r := range e.results {
			if o.fresh(r.at, c.Since, now) && match(r) {
				return true
			}
		}
		return false
	}
	gone := func(r ownResult) bool { return r.gone }
	present := func(r ownResult) bool { return !r.gone }
	holds := func(r ownResult) bool { return !r.gone && (r.after == "" || c.After == "" || r.after == c.After) }
	matched := func() bool {
		switch c.Op {
		case OpDelete, OpUnlink:
			return left(c.Target.DisplayPath, gone)
		case OpRename:
			return left(c.Target.DisplayPath, gone) && left(c.To.DisplayPath, holds)
		case OpSetattr:
			return left(c.Target.DisplayPath, present)
		default:
			if left(c.Target.DisplayPath, holds) {
				return true
			}
			// A directory the daemon made for a file it published below it.
			return c.Op == OpCreate && c.Dir && o.settledBelowLocked(c.Target.DisplayPath, c.Since)
		}
	}
	if ok := matched(); ok || o.remoteWait == 0 {
		return ok
	}
	// Another daemon may have made the change and be recording it now.
	until := o.remoteDeadlineLocked(c.Since)
	for o.now().Before(until) {
		o.waitLocked(until)
		if matched() {
			return true
		}
	}
	return false
}

// ownTemp reports whether p is the temp file of a socket publish of a path
// the daemon is changing or changed recently: "dir/.NAME.dsh-HEX16.tmp"
// (provider/local's createTemp; NAME without leading dots, at most 100
// bytes) or "dir/.NAME.tmp".
func (o *ownChanges) ownTemp(p string, since time.Time) bool {
	dir, base := path.Split(p)
	if !strings.HasPrefix(base, ".") || !strings.HasSuffix(base, ".tmp") || len(base) <= len(".tmp")+1 {
		return false
	}
	name := base[1 : len(base)-len(".tmp")]
	if i := strings.LastIndex(name, ".dsh-"); i >= 0 && len(name)-i == len(".dsh-")+16 {
		name = name[:i]
	}
	return o.settled(dir+name, since) || o.settled(dir+"."+name, since)
}

// settled reports whether the daemon announced, or recently committed or
// tried, a change of p.
func (o *ownChanges) settled(p string, since time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.paths[p]
	return ok && o.settledLocked(e, since)
}

// settledLocked is settled for one entry; o.mu is held.
func (o *ownChanges) settledLocked(e *ownEntry, since time.Time) bool {
	now := o.now()
	return e.pending(now) || o.fresh(e.at, since, now) || o.fresh(e.tried, since, now)
}

// settledBelowLocked reports whether the daemon announced or recently
// committed a change below the directory dir; o.mu is held.
func (o *ownChanges) settledBelowLocked(dir string, since time.Time) bool {
	for p, e := range o.paths {
		if len(p) > len(dir) && p[len(dir)] == '/' && strings.HasPrefix(p, dir) && o.settledLocked(e, since) {
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
// Call release after the backing descriptor is closed, so that the events
// of the close and of the last writes are covered too.
func (e *Engine) HoldOwn(t provider.Target) (release func()) {
	return e.own.hold(func(o *ownChanges, en *ownEntry) {
		// The hold ends after the mount closed its descriptor: every
		// event of its writes happened before now, and the file holds
		// what the mount recorded last.
		last := ownResult{at: o.now()}
		if n := len(en.results); n > 0 {
			last.after, last.gone = en.results[n-1].after, en.results[n-1].gone
		}
		o.add(en, last)
	}, t)
}

// Changing marks ts as being changed by one mount operation until done is
// called: the backing-tree watcher may see the operation's syscall before
// the mount has recorded it, and those events are the daemon's own. Call
// done after the operation's record (RecordMount), whose result then
// explains the later events; an operation that failed leaves no result,
// so it explains nothing after done.
func (e *Engine) Changing(ts ...provider.Target) (done func()) { return e.own.hold(nil, ts...) }

// hold counts a hold of each of ts (RecordExternal explains every event of
// a held path) and returns its idempotent end, which runs ended, if set,
// on each entry whose hold it ends; o.mu is held then.
func (o *ownChanges) hold(ended func(o *ownChanges, en *ownEntry), ts ...provider.Target) func() {
	o.mu.Lock()
	for _, t := range ts {
		o.entry(t.DisplayPath).held++
	}
	o.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			o.mu.Lock()
			defer o.mu.Unlock()
			for _, t := range ts {
				if en, ok := o.paths[t.DisplayPath]; ok && en.held > 0 {
					en.held--
					if ended != nil {
						ended(o, en)
					}
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
