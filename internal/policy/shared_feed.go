package policy

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/dshmount/dshmount/internal/policy/kv"
	"github.com/dshmount/dshmount/internal/provider"
)

// On a shared store the change feed is fed by the engine's watch of the
// audit log, never by the daemon's own appends: every daemon's entries then
// reach subscribers in one order, the seq order (each seq is taken by a
// compare-and-swap of one counter in the transaction that stores the entry,
// so seqs and commits have the same order). A change another daemon made
// is also handed to the Engine (Store.onRemote), which tells its observers
// as an external change, so the FUSE layer drops the kernel's cache of it
// on this daemon's mount.
//
// The watch starts when the store opens. If it ends (the engine compacted
// the history it needed, or stayed unreachable past the client's retries),
// subscribers are told they lost changes (FS_CHANGES_LOST, then resubscribe
// after a rescan) and the watch starts again from now.

// startFeedWatch starts the goroutine that feeds the change feed.
func (s *Store) startFeedWatch() error {
	w, ok := s.db.(kv.Watcher)
	if !ok {
		return errors.New("a shared engine must implement kv.Watcher")
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.background.Add(2)
	go func() {
		defer s.background.Done()
		<-s.stop
		cancel()
	}()
	go func() {
		defer s.background.Done()
		for ctx.Err() == nil {
			err := w.WatchPuts(ctx, []byte(prefixAudit), s.deliverShared)
			if ctx.Err() != nil {
				return
			}
			s.log.Error("the shared change feed's watch ended; subscribers lose changes and the watch starts again", "err", err)
			s.MarkChangesLost()
		}
	}()
	return nil
}

// deliverShared publishes one audit entry the watch delivered.
func (s *Store) deliverShared(p kv.Pair) {
	var e AuditEntry
	if err := json.Unmarshal(p.Value, &e); err != nil {
		s.log.Error("decode an audit entry of the shared log", "key", p.Key, "err", err)
		return
	}
	e.Key = s.hostKey(e.Key)
	s.feed.mu.Lock()
	if e.Seq > s.auditSeq.last.Load() {
		s.auditSeq.last.Store(e.Seq)
	}
	s.feed.publish(e)
	s.feed.mu.Unlock()
	if e.Daemon != s.owner && !e.IsRefusal() {
		if fn := s.onRemote.Load(); fn != nil {
			(*fn)(e)
		}
	}
}

// remoteChange tells the Engine's observers of a change another daemon
// made, as an external change (this daemon's mount did not see it).
func (e *Engine) remoteChange(entry AuditEntry) {
	s := e.store
	e.own.remote(entry)
	a := entry.Actor
	a.Channel = ChannelExternal
	ev := Event{Actor: a, Op: entry.Op, Before: entry.Before, After: entry.After,
		Target: provider.Target{Key: entry.Key, DisplayPath: entry.Path}}
	if entry.To != "" {
		ev.To = &provider.Target{Key: s.hostKey(provider.Key(entry.To)), DisplayPath: entry.To}
	}
	if entry.After != "" {
		ev.Observation = Present(entry.After)
	} else {
		ev.Observation = Absent()
	}
	if err := e.notify(context.Background(), ev); err != nil {
		s.log.Warn("observe another daemon's change", "path", entry.Path, "err", err)
	}
}

// markSharedChangesLost is MarkChangesLost on a shared store. The new base
// must be at least every seq any daemon took before the loss, so it is
// reserved from the shared counter (a seq no entry carries), not from this
// daemon's mirror, which lags behind other daemons' entries. Until the
// counter answers, nothing is vouched for (the base is the highest seq);
// the reservation is retried until it succeeds or the store closes.
func (s *Store) markSharedChangesLost() {
	f := s.feed
	f.mu.Lock()
	f.base = ^uint64(0)
	for sub := range f.subs {
		sub.fail()
	}
	clear(f.subs)
	f.mu.Unlock()
	wait := 100 * time.Millisecond
	for {
		seq, err := s.reserveSharedSeq()
		if err == nil {
			f.mu.Lock()
			if f.base == ^uint64(0) || seq > f.base {
				f.base = seq
			}
			if seq > s.auditSeq.last.Load() {
				s.auditSeq.last.Store(seq)
			}
			f.mu.Unlock()
			return
		}
		s.log.Warn("reserve the change feed's new base seq (nothing is vouched for until then)", "err", err)
		select {
		case <-s.stop:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// reserveSharedSeq advances the shared audit counter by one, with no
// entry: the returned seq is above every seq taken before.
func (s *Store) reserveSharedSeq() (uint64, error) {
	s.seqMu.Lock()
	defer s.seqMu.Unlock()
	cur, err := s.auditCounter()
	if err != nil {
		return 0, err
	}
	for {
		ok, err := s.db.Txn(context.Background(), []kv.Cond{counterCond(cur)},
			[]kv.Op{kv.Put([]byte(keySeqAudit), encodeUint64(cur+1))})
		if err != nil {
			return 0, unavailable(err)
		}
		if ok {
			s.counterSeen.Store(cur + 1)
			return cur + 1, nil
		}
		if cur, err = s.auditCounter(); err != nil {
			return 0, err
		}
	}
}
