package service

import (
	"cmp"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

// changeOf turns a change's audit entry into the event a watch reports:
//
//	create, link                          created
//	write (socket "create")               created
//	write, edit, patch, truncate          modified; attrib when the bytes are known unchanged (before == after)
//	setattr                               attrib (mode, owner, times, xattrs)
//	delete, unlink                        deleted
//	move, rename                          renamed, To set (a move whose source stayed: created at To)
//
// Other ops (from a newer daemon) are modified.
func changeOf(e policy.AuditEntry) ChangeEvent {
	ev := ChangeEvent{Seq: e.Seq, Path: e.Path, Version: e.After, at: e.Time}
	sameBytes := e.Before != "" && e.Before == e.After
	switch e.Op {
	case policy.OpCreate, policy.OpLink:
		ev.Kind = ChangeCreated
	case policy.OpWrite:
		switch {
		case e.Detail == string(provider.OpCreate):
			ev.Kind = ChangeCreated
		case sameBytes:
			ev.Kind = ChangeAttrib
		default:
			ev.Kind = ChangeModified
		}
	case policy.OpEdit, policy.OpPatch, policy.OpTruncate:
		ev.Kind = ChangeModified
		if sameBytes {
			ev.Kind = ChangeAttrib
		}
	case policy.OpSetattr:
		ev.Kind = ChangeAttrib
	case policy.OpDelete, policy.OpUnlink:
		ev.Kind, ev.Version = ChangeDeleted, ""
	case policy.OpMove, policy.OpRename:
		ev.Kind, ev.To = ChangeRenamed, e.To
		if e.Op == policy.OpMove && strings.HasPrefix(e.Detail, "source not removed") {
			ev.Kind, ev.Path, ev.To = ChangeCreated, e.To, ""
		}
	default:
		ev.Kind = ChangeModified
	}
	return ev
}

// watchScope is the set of paths one watch reports.
type watchScope struct {
	root      string // display path of the watched file or directory
	recursive bool
}

// covers reports whether a change of display path p is in scope: the
// watched path itself, a direct child, or (recursive) anything below.
func (w watchScope) covers(p string) bool {
	switch {
	case p == "":
		return false
	case p == w.root:
		return true
	case w.root == "." || w.root == "":
		return w.recursive || !strings.Contains(p, "/")
	case w.recursive:
		return strings.HasPrefix(p, w.root+"/")
	}
	return path.Dir(p) == w.root
}

// mergeKinds is the kind of two changes of one path within the window:
// the later one's, except that a path created in the window stays created
// through later writes and attribute changes (it is new to the watcher),
// and a modification absorbs a later attribute change. A path created and
// deleted within the window is reported deleted (never dropped: the seq
// stays visible). Renames are never merged.
func mergeKinds(prev, next ChangeKind) ChangeKind {
	switch {
	case prev == ChangeCreated && (next == ChangeModified || next == ChangeAttrib):
		return ChangeCreated
	case prev == ChangeModified && next == ChangeAttrib:
		return ChangeModified
	}
	return next
}

// coalescer collects a window's events of one watch and merges the
// changes of one path by one actor made within window of the first of
// them (by the changes' times, so a replay merges what the live stream
// merged, not what arrives at once).
type coalescer struct {
	window  time.Duration
	pending []*ChangeEvent
	latest  map[string]*ChangeEvent // path → its mergeable pending event
	first   map[string]time.Time    // path → when its mergeable event's first change was made
}

// add queues ev, merging it into the pending event of its path when the
// same actor made both, within the window, and no rename touched the path
// in between.
func (co *coalescer) add(ev ChangeEvent) {
	if co.latest == nil {
		co.latest, co.first = map[string]*ChangeEvent{}, map[string]time.Time{}
	}
	if ev.Kind == ChangeRenamed {
		delete(co.latest, ev.Path)
		delete(co.latest, ev.To)
		co.pending = append(co.pending, &ev)
		return
	}
	if prev := co.latest[ev.Path]; prev != nil && sameActor(prev.Actor, ev.Actor) && ev.at.Sub(co.first[ev.Path]) <= co.window {
		prev.Kind = mergeKinds(prev.Kind, ev.Kind)
		prev.Seq, prev.Version, prev.Actor = ev.Seq, ev.Version, ev.Actor
		if prev.Kind == ChangeDeleted {
			prev.Version = ""
		}
		return
	}
	p := &ev
	co.pending = append(co.pending, p)
	co.latest[ev.Path] = p
	co.first[ev.Path] = ev.at
}

// take returns the pending events in seq order and empties the window.
func (co *coalescer) take() []ChangeEvent {
	out := make([]ChangeEvent, 0, len(co.pending))
	for _, p := range co.pending {
		out = append(out, *p)
	}
	// A merged event carries its last seq: sort, so seqs keep increasing.
	slices.SortFunc(out, func(a, b ChangeEvent) int { return cmp.Compare(a.Seq, b.Seq) })
	co.pending = co.pending[:0]
	clear(co.latest)
	clear(co.first)
	return out
}

// sameActor reports whether two events' actors are the same channel,
// session and uid (a process id may differ: one tool, several processes).
func sameActor(a, b *ChangeActor) bool {
	if a == nil || b == nil {
		return a == b
	}
	uidA, uidB := int64(-1), int64(-1)
	if a.UID != nil {
		uidA = int64(*a.UID)
	}
	if b.UID != nil {
		uidB = int64(*b.UID)
	}
	return a.Channel == b.Channel && a.Session == b.Session && uidA == uidB
}
