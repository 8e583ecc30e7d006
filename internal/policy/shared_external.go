package policy

import (
	"time"

	"github.com/dshmount/dshmount/internal/provider"
)

// On a shared store every daemon's watcher of the backing tree also sees
// the changes other daemons make (through their mounts or sockets) in the
// shared workspace. Those daemons record them; this one hears of each
// record on the shared feed (remoteChange) and enters it in its ledger of
// own changes, so its watcher's view of the same change explains as an own
// change would: one change, one entry. A record may reach this daemon
// after its watcher saw the change, so a change nothing explains yet waits
// up to remoteRecordWait for one, once per watcher batch (all the changes
// of a batch share one deadline): a change made directly in the workspace
// directory is recorded that much later on a shared store.

// remoteRecordWait bounds how long the watcher's view of a change waits
// for another daemon's record of it.
const remoteRecordWait = time.Second

// remote enters a change another daemon recorded (its audit entry) in the
// ledger, as a result that explains the watcher's view of it.
func (o *ownChanges) remote(entry AuditEntry) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	note := func(p string, after provider.Version, gone bool) {
		o.add(o.entry(p), ownResult{at: now, after: after, gone: gone})
	}
	switch {
	case entry.To != "":
		note(entry.To, entry.After, false)
		note(entry.Path, "", true)
	case entry.Op == OpDelete || entry.Op == OpUnlink:
		note(entry.Path, "", true)
	default:
		note(entry.Path, entry.After, false)
	}
	o.changed.Broadcast()
}

// remoteDeadlineLocked is when the wait for other daemons' records of the
// changes of the watcher batch since belongs to ends: remoteRecordWait
// after the batch's first change was classified (a zero since names no
// batch: a new wait once the last one ended). o.mu is held.
func (o *ownChanges) remoteDeadlineLocked(since time.Time) time.Time {
	passed := !o.now().Before(o.batchUntil)
	if o.batchUntil.IsZero() || !since.Equal(o.batchSince) || (since.IsZero() && passed) {
		o.batchSince, o.batchUntil = since, o.now().Add(o.remoteWait)
	}
	return o.batchUntil
}
