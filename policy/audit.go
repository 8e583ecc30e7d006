package policy

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/dshmount/dshmount/provider"
)

// WriteRecord is the last writer of a target.
type WriteRecord struct {
	Actor   Actor
	Op      MutationOp
	Time    time.Time
	Version provider.Version // version after the write ("" after a delete)
	Path    string           // display path
}

// AuditEntry is one mutation in the append-only audit log.
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
}

// AuditQuery selects audit entries, newest first.
type AuditQuery struct {
	Path  string // "" = all; else entries whose Path or To equals it
	Limit int    // 0: 100
}

// DefaultAuditLimit is the number of entries Audit returns without a Limit.
const DefaultAuditLimit = 100

// SetLastWrite records rec as the last writer of key.
func (s *Store) SetLastWrite(key provider.Key, rec WriteRecord) error {
	if s.closed.Load() {
		return ErrClosed
	}
	val, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode last writer of %s: %w", rec.Path, err)
	}
	s.buf.put(lastWriteKey(key), val, true)
	return nil
}

// LastWrite returns the last writer of key.
func (s *Store) LastWrite(key provider.Key) (WriteRecord, bool) {
	val, ok, err := s.lookup(lastWriteKey(key))
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
	if s.closed.Load() {
		return ErrClosed
	}
	e.Seq = s.auditSeq.next()
	if e.Time.IsZero() {
		e.Time = s.opts.Now()
	}
	val, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode audit entry for %s: %w", e.Path, err)
	}
	s.buf.put(auditKey(e.Seq), val, false)
	return nil
}

// Audit returns entries newest first, at most q.Limit (default 100),
// optionally only those whose Path or To equals q.Path.
func (s *Store) Audit(q AuditQuery) ([]AuditEntry, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if q.Limit <= 0 {
		q.Limit = DefaultAuditLimit
	}
	if err := s.flush(); err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	var out []AuditEntry
	prefix := []byte(prefixAudit)
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: true, PrefetchValues: true, PrefetchSize: 32})
		defer it.Close()
		for it.Seek(append(append([]byte{}, prefix...), 0xff)); it.ValidForPrefix(prefix) && len(out) < q.Limit; it.Next() {
			var e AuditEntry
			if err := it.Item().Value(func(b []byte) error { return json.Unmarshal(b, &e) }); err != nil {
				return fmt.Errorf("decode audit entry %x: %w", it.Item().Key(), err)
			}
			if q.Path == "" || e.Path == q.Path || e.To == q.Path {
				out = append(out, e)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	return out, nil
}
