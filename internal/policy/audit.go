package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dshmount/dshmount/internal/policy/kv"
	"github.com/dshmount/dshmount/internal/provider"
)

// WriteRecord is the last writer of a target.
type WriteRecord struct {
	Actor   Actor
	Op      MutationOp
	Time    time.Time
	Version provider.Version // version after the write ("" after a delete)
	Path    string           // display path
	// Seq is the seq of the change's audit entry (0 in records written
	// before it was kept): compared with Session.StartSeq.
	Seq uint64 `json:",omitempty"`
}

// AuditEntry is one mutation, or one refused attempt at one, in the
// append-only audit log. A refusal has Refused set (the FS_… code), Reason
// (the message the caller got) and Suppressed (how many refusals of the same
// session, path and code were not recorded since the previous entry for them,
// see Options.RefusalInterval); it changed nothing, so Before and After are
// empty. Entries written before refusals were audited decode with those
// fields zero.
type AuditEntry struct {
	Seq           uint64 // assigned by AppendAudit; increasing, never reused
	Time          time.Time
	Key           provider.Key
	Path          string // display path of the target (the source for a move)
	Op            MutationOp
	Actor         Actor
	Before, After provider.Version
	To            string // destination display path of a move or rename
	Unconditional bool   // the caller skipped the guard
	Detail        string
	Refused       provider.Code `json:",omitempty"` // "": a completed mutation
	Reason        string        `json:",omitempty"` // why it was refused
	Suppressed    uint64        `json:",omitempty"` // refusals of the same key left out before this one
	// Daemon names the daemon that recorded the entry, on a shared store
	// (host/pid/random); "" on Badger.
	Daemon string `json:",omitempty"`
}

// IsRefusal reports whether e records a refused attempt rather than a
// change. Consumers of changes (a change feed, "what changed since") skip
// refusals.
func (e AuditEntry) IsRefusal() bool { return e.Refused != "" }

// AuditQuery selects audit entries, newest first. The filters combine (all
// must hold); a path filter matches refusals as it matches changes.
type AuditQuery struct {
	Path    string    // "" = all; else entries whose Path or To equals it
	Limit   int       // 0: 100
	Kind    AuditKind // AuditAll (default), AuditRefusals or AuditChanges
	Session SessionID // "" = all; else entries whose actor is this session
	Since   uint64    // 0 = all; else entries with Seq > Since (see Audit)
	// OnlyUID, when set, keeps the entries whose actor ran as that uid (a
	// socket peer of another uid sees only its own).
	OnlyUID *uint32
	// Match, when set, must hold as well (a caller's own filter, e.g. path
	// prefixes and globs); Limit counts the entries that pass it.
	Match func(AuditEntry) bool
}

// AuditKind selects changes, refusals or both in an AuditQuery.
type AuditKind int

// Audit kinds.
const (
	AuditAll      AuditKind = iota // changes and refusals
	AuditRefusals                  // only refused attempts
	AuditChanges                   // only completed mutations
)

// matches reports whether e passes q's filters (Since aside: the scan
// starts after it).
func (q AuditQuery) matches(e AuditEntry) bool {
	switch {
	case q.Path != "" && e.Path != q.Path && e.To != q.Path:
		return false
	case q.Session != "" && e.Actor.Session != q.Session:
		return false
	case q.OnlyUID != nil && e.Actor.UID != *q.OnlyUID:
		return false
	case q.Kind == AuditRefusals && !e.IsRefusal():
		return false
	case q.Kind == AuditChanges && e.IsRefusal():
		return false
	case q.Match != nil && !q.Match(e):
		return false
	}
	return true
}

// errScanDone stops a scan that has what it needs.
var errScanDone = errors.New("scan done")

// DefaultAuditLimit is the number of entries Audit returns without a Limit.
const DefaultAuditLimit = 100

// SetLastWrite records rec as the last writer of key.
func (s *Store) SetLastWrite(key provider.Key, rec WriteRecord) error {
	if s.closed.Load() {
		return ErrClosed
	}
	val, err := marshalWriteRecord(rec)
	if err != nil {
		return fmt.Errorf("encode last writer of %s: %w", rec.Path, err)
	}
	return s.put(lastWriteKey(s.storedKey(key)), val, true)
}

// LastWrite returns the last writer of key.
func (s *Store) LastWrite(key provider.Key) (WriteRecord, bool) {
	val, ok, err := s.lookup(lastWriteKey(s.storedKey(key)))
	if err != nil || !ok {
		if err != nil {
			s.log.Error("read last writer", "err", err)
		}
		return WriteRecord{}, false
	}
	var rec WriteRecord
	if err := json.Unmarshal(val, &rec); err != nil {
		s.log.Error("decode last writer", "err", err)
		return WriteRecord{}, false
	}
	return rec, true
}

// AppendAudit appends e to the audit log, assigning Seq (always) and Time
// (when zero).
func (s *Store) AppendAudit(e AuditEntry) error {
	_, err := s.appendAudit(e)
	return err
}

// changeSeq is the seq of the newest change this store knows of.
func (s *Store) changeSeq() uint64 { return s.rec.changeSeq() }

// appendAudit is AppendAudit, returning the entry's seq.
func (s *Store) appendAudit(e AuditEntry) (uint64, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	if e.Time.IsZero() {
		e.Time = s.opts.Now()
	}
	stored := e
	stored.Key = s.storedKey(e.Key)
	return s.rec.appendAudit(e, stored)
}

// appendLocalAudit is appendAudit on a local store: the entry (e, and
// stored as the engine keeps it) is buffered and published to the feed.
func (s *Store) appendLocalAudit(e, stored AuditEntry) (uint64, error) {
	// The seq is assigned and the entry published under the feed's lock,
	// so subscribers see entries in seq order.
	s.feed.mu.Lock()
	defer s.feed.mu.Unlock()
	e.Seq = s.auditSeq.next()
	stored.Seq = e.Seq
	val, err := marshalAuditEntry(stored)
	if err != nil {
		return 0, fmt.Errorf("encode audit entry for %s: %w", e.Path, err)
	}
	s.buf.put(auditKey(e.Seq), val, false)
	s.feed.publish(e)
	return e.Seq, nil
}

// Audit returns the entries q selects, newest first, at most q.Limit
// (default 100). Without Since these are the newest matching entries; with
// Since, the oldest matching entries after it (still listed newest first),
// so a reader pages forward without gaps by passing the highest Seq it got.
func (s *Store) Audit(q AuditQuery) ([]AuditEntry, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if q.Limit <= 0 {
		q.Limit = DefaultAuditLimit
	}
	// Every entry up to complete was buffered before the flush below
	// starts (seqs are assigned and buffered under the feed's lock), so
	// the engine holds all of them after it. A newer entry may be there
	// while an older one is still buffered (a flush takes the buffer's
	// shards one by one): reading past complete could skip that older one
	// for a reader paging with Since. (A shared engine also holds other
	// daemons' entries, whose seqs this store does not order: no cap.)
	complete := s.rec.auditComplete()
	if err := s.flush(); err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	var out []AuditEntry
	prefix := []byte(prefixAudit)
	forward := q.Since > 0
	r := kv.Range{Prefix: prefix, Reverse: !forward}
	if forward {
		if q.Since == ^uint64(0) {
			return nil, nil
		}
		r.Start = auditKey(q.Since + 1)
	}
	err := s.db.Scan(context.Background(), r, func(p kv.Pair) error {
		if auditSeqOf(p.Key) > complete {
			if forward {
				return errScanDone
			}
			return nil
		}
		var e AuditEntry
		if err := json.Unmarshal(p.Value, &e); err != nil {
			return fmt.Errorf("decode audit entry %x: %w", p.Key, err)
		}
		e.Key = s.hostKey(e.Key)
		if q.matches(e) {
			out = append(out, e)
		}
		if len(out) >= q.Limit {
			return errScanDone
		}
		return nil
	})
	if errors.Is(err, errScanDone) {
		err = nil
	}
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	if forward {
		slices.Reverse(out)
	}
	return out, nil
}
