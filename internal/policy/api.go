// Package policy turns "read before you write" into guards. It owns the
// observation store (sessions, observations, the content-digest cache, last
// writers, the audit log) and the Engine: the one decide → provider call →
// record path that the control socket and the FUSE layer both use.
//
// The store keeps its records on a kv.Store (package policy/kv): Badger in
// the daemon's state directory by default, or etcd shared by every daemon
// that guards one workspace (shared.go says what changes then: records
// written through, a claim on each file's version record around a
// mutation, one audit seq, the change feed from an etcd watch).
//
// It must not know about FUSE or sockets.
package policy

import (
	"time"

	"github.com/dshmount/dshmount/internal/provider"
)

// SessionID identifies an observation owner. The empty SessionID is "no
// session": such an actor is never guarded by observations.
type SessionID string

// Channel says how a request reached the daemon.
type Channel string

// Channels.
const (
	ChannelSocket Channel = "socket"
	ChannelMount  Channel = "mount"
	ChannelMCP    Channel = "mcp" // the socket, from a client that declared itself an MCP server
)

// Actor is who asks for an operation.
type Actor struct {
	Session SessionID // empty: not bound to a session
	PID     int32     // caller's pid when known (mount), else 0
	UID     uint32    // caller's uid
	Channel Channel
	// Bound: the caller is a process bound to Session (dshmount exec),
	// whatever channel it asks on; it may not skip the guard. Not stored.
	Bound bool `json:"-"`
	// Strict: the caller's binding reads before every write (dshmount
	// exec --strict): on the mount it has no baseline, as if its session
	// were strict. Not stored.
	Strict bool `json:"-"`
}

// ObservationKind is present or absent. "Unseen" is the absence of an
// observation.
type ObservationKind string

// Observation kinds.
const (
	ObservedPresent ObservationKind = "present"
	ObservedAbsent  ObservationKind = "absent"
)

// Observation is one authoritative sighting of a target by a session.
type Observation struct {
	Kind    ObservationKind
	Version provider.Version // for ObservedPresent
}

// Present returns a present observation at v.
func Present(v provider.Version) Observation {
	return Observation{Kind: ObservedPresent, Version: v}
}

// Absent returns an absent observation.
func Absent() Observation { return Observation{Kind: ObservedAbsent} }

// Session describes one open session.
type Session struct {
	ID       SessionID
	Name     string
	Owner    uint32 // uid that opened it; only it, root and the daemon's uid may act on it
	Opened   time.Time
	LastUsed time.Time
	// StartSeq is the seq of the newest recorded change when the session
	// opened: a change recorded with a higher seq happened after it.
	StartSeq uint64
	// Strict sessions read before every write on every channel; others
	// may, through the mount, change files they never read that nobody
	// else changed since they opened (see the guard table, guard.go).
	Strict bool
}

// MutationOp names a mutation in version metadata and the audit log.
type MutationOp string

// Mutation operations.
const (
	OpWrite    MutationOp = "write"
	OpEdit     MutationOp = "edit"
	OpPatch    MutationOp = "patch"
	OpDelete   MutationOp = "delete"
	OpMove     MutationOp = "move"
	OpCreate   MutationOp = "create"
	OpTruncate MutationOp = "truncate"
	OpRename   MutationOp = "rename"
	OpUnlink   MutationOp = "unlink"
	OpSetattr  MutationOp = "setattr"
	OpLink     MutationOp = "link"
)
