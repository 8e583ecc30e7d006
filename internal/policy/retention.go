package policy

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dshmount/dshmount/internal/policy/kv"
)

// Retention bounds the audit log, and with it the change feed's history:
// entries older than MaxAge, and entries beyond the newest MaxEntries, are
// pruned in the background. A subscriber's since from before the oldest
// retained entry is then FS_CHANGES_LOST, and fs.log lists what is left.
type Retention struct {
	// MaxAge drops entries older than this (0: no age bound).
	MaxAge time.Duration
	// MaxEntries keeps at most this many of the newest seqs (0: no count
	// bound). Counted in seqs: holes left by failed appends count too.
	MaxEntries uint64
	// Interval is how often pruning runs (0: DefaultRetentionInterval).
	Interval time.Duration
}

// Retention defaults (serve --feed-retention and --feed-max-entries).
const (
	DefaultFeedRetention     = 24 * time.Hour
	DefaultFeedMaxEntries    = 1_000_000
	DefaultRetentionInterval = time.Minute
)

// pruneBatch is the most entries one pruning transaction deletes.
const pruneBatch = 10_000

// auditSeqOf is the seq of an audit key.
func auditSeqOf(key []byte) uint64 {
	if len(key) < len(prefixAudit)+8 {
		return 0
	}
	return binary.BigEndian.Uint64(key[len(prefixAudit):])
}

// StartRetention prunes the audit log by r every r.Interval until the
// returned stop is called (call it before Close).
func (s *Store) StartRetention(r Retention) (stop func()) {
	if r.Interval <= 0 {
		r.Interval = DefaultRetentionInterval
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(r.Interval)
		defer t.Stop()
		for {
			if n, err := s.PruneAudit(r, s.opts.Now()); err != nil {
				s.log.Error("prune the audit log", "err", err)
			} else if n > 0 {
				s.log.Info("pruned old audit entries", "count", n, "resumable after seq", s.oldestVouched())
			}
			select {
			case <-quit:
				return
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// oldestVouched is the seq a subscriber may resume from at the earliest.
func (s *Store) oldestVouched() uint64 { return s.feed.vouchesAfter() }

// PruneAudit deletes the audit entries r does not retain at now and
// returns how many it deleted. The feed stops vouching for the pruned
// seqs before they are deleted, so a replay that raced the deletion ends
// with a Lost item instead of skipping them.
func (s *Store) PruneAudit(r Retention, now time.Time) (int, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	last := s.LastSeq()
	var keepAfter uint64 // entries with seq <= keepAfter go
	if r.MaxEntries > 0 && last > r.MaxEntries {
		keepAfter = last - r.MaxEntries
	}
	if err := s.flush(); err != nil { // every entry to consider is in Badger
		return 0, fmt.Errorf("prune the audit log: %w", err)
	}
	var cutoff time.Time
	if r.MaxAge > 0 {
		cutoff = now.Add(-r.MaxAge)
	}
	total := 0
	for {
		keys, upto, err := s.prunable(keepAfter, cutoff)
		if err != nil || len(keys) == 0 {
			return total, err
		}
		s.raiseBase(upto)
		ops := make([]kv.Op, 0, len(keys))
		for _, k := range keys {
			ops = append(ops, kv.Delete(k))
		}
		if err := s.db.Write(context.Background(), ops); err != nil {
			return total, fmt.Errorf("prune the audit log: %w", err)
		}
		total += len(keys)
		if len(keys) < pruneBatch {
			return total, nil
		}
	}
}

// prunable returns up to pruneBatch of the oldest audit keys that go (seq
// at most keepAfter, or time before cutoff; the age scan stops at the
// first younger entry) and the highest seq among them.
func (s *Store) prunable(keepAfter uint64, cutoff time.Time) (keys [][]byte, upto uint64, err error) {
	r := kv.Range{Prefix: []byte(prefixAudit), Limit: pruneBatch}
	err = s.db.Scan(context.Background(), r, func(p kv.Pair) error {
		seq := auditSeqOf(p.Key)
		if seq > keepAfter {
			if cutoff.IsZero() {
				return errScanDone
			}
			var e struct{ Time time.Time }
			if err := json.Unmarshal(p.Value, &e); err != nil {
				return fmt.Errorf("decode audit entry %d: %w", seq, err)
			}
			if !e.Time.Before(cutoff) {
				return errScanDone
			}
		}
		keys = append(keys, p.Key)
		upto = seq
		return nil
	})
	if errors.Is(err, errScanDone) {
		err = nil
	}
	return keys, upto, err
}

// raiseBase makes the feed vouch only for changes after seq: a since
// before it is FS_CHANGES_LOST.
func (s *Store) raiseBase(seq uint64) {
	f := s.feed
	f.mu.Lock()
	defer f.mu.Unlock()
	f.base = max(f.base, seq)
}
