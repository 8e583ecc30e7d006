package policy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/dshmount/dshmount/internal/policy/kv"
	"github.com/dshmount/dshmount/internal/provider"
)

// A shared engine (etcd) is written by every daemon that guards the same
// workspace. The store then:
//
//   - writes every record through before it answers (a read's observation
//     is in the engine before the read returns, so the session is usable on
//     any daemon at once) and caches nothing another daemon may change;
//   - reads a session's record on every use, so a session opened on one
//     daemon is usable on all and one closed anywhere is closed everywhere;
//   - numbers audit entries with one counter in the engine, advanced by a
//     compare-and-swap in the same transaction that stores the entry, so
//     the audit log of all daemons has one seq;
//   - claims a file's version record (v/<key>) with a compare-and-swap
//     before a mutation publishes, and records the resulting version when
//     it releases it (see Claim);
//   - keeps no content digests (device and inode numbers are one host's)
//     and keeps process bindings under the host's name;
//   - keeps no clean-shutdown marker: each daemon's crash is its own, and
//     what it leaves (a claim) expires.
//
// When the engine cannot be reached, every guarded mutation is refused with
// FS_IO_ERROR "policy store unavailable: …", reads are answered without
// recording an observation (so a later guarded change needs a new read),
// and work resumes by itself once the engine answers again.

// startShared prepares a store on a shared engine: the audit counter and
// the feed's base (a seq taken from the counter, which no entry carries).
func (s *Store) startShared() error {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("name this daemon's claims: %w", err)
	}
	s.owner = fmt.Sprintf("%s/%d/%s", s.opts.Host, os.Getpid(), hex.EncodeToString(b[:]))
	cur, err := s.auditCounter()
	if err != nil {
		return fmt.Errorf("read the audit counter: %w", err)
	}
	// The sequence is only the local mirror of the counter: no lease, never
	// extended (limit above every value).
	s.auditSeq = &sequence{db: s.db, key: []byte(keySeqAudit)}
	s.auditSeq.limit.Store(^uint64(0))
	for {
		ok, err := s.db.Txn(context.Background(), []kv.Cond{counterCond(cur)},
			[]kv.Op{kv.Put([]byte(keySeqAudit), encodeUint64(cur+1))})
		if err != nil {
			return fmt.Errorf("take the feed's base seq: %w", unavailable(err))
		}
		if ok {
			break
		}
		if cur, err = s.auditCounter(); err != nil {
			return fmt.Errorf("read the audit counter: %w", err)
		}
	}
	s.auditSeq.last.Store(cur) // newFeed takes cur+1, the value just reserved
	s.feed = newFeed(s)
	s.counterSeen.Store(cur + 1)
	if err := s.resolveCommitJournals(context.Background()); err != nil {
		s.log.Warn("resolve the journals of stopped multi-file commits (retried at the next start)", "err", err)
	}
	return s.startFeedWatch()
}

// auditCounter reads the audit counter (0 when there is none yet).
func (s *Store) auditCounter() (uint64, error) {
	b, err := s.db.Get(context.Background(), []byte(keySeqAudit))
	if errors.Is(err, kv.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, unavailable(err)
	}
	return decodeUint64(b)
}

func counterCond(cur uint64) kv.Cond {
	if cur == 0 {
		return kv.IfAbsent([]byte(keySeqAudit))
	}
	return kv.IfValue([]byte(keySeqAudit), encodeUint64(cur))
}

// appendShared stores e (Key already the stored key) under the next seq of
// the shared counter and returns that seq. The caller holds the feed's
// lock, so this daemon's entries are numbered in the order they publish.
func (s *Store) appendShared(e AuditEntry) (uint64, error) {
	cur := s.counterSeen.Load()
	for {
		e.Seq = cur + 1
		val, err := json.Marshal(e)
		if err != nil {
			return 0, fmt.Errorf("encode audit entry: %w", err)
		}
		ok, err := s.db.Txn(context.Background(), []kv.Cond{counterCond(cur)},
			[]kv.Op{kv.Put([]byte(keySeqAudit), encodeUint64(e.Seq)), kv.Put(auditKey(e.Seq), val)})
		if err != nil {
			return 0, unavailable(err)
		}
		if ok {
			s.counterSeen.Store(e.Seq)
			return e.Seq, nil
		}
		if cur, err = s.auditCounter(); err != nil {
			return 0, err
		}
	}
}

// versionRecord is the value of v/<key> on a shared engine: the last
// version a daemon published there, and the claim of the daemon now
// changing the file, if any.
type versionRecord struct {
	Version provider.Version `json:"version,omitempty"`
	Absent  bool             `json:"absent,omitempty"`
	Owner   string           `json:"owner,omitempty"`   // claim holder; "" = unclaimed
	Expires int64            `json:"expires,omitempty"` // unix ns; a claim past it may be taken over
}

func versionKey(key provider.Key) []byte { return []byte(prefixVersion + string(key)) }

// Claim is a held claim on the version records of some files.
type Claim struct {
	s    *Store
	keys []provider.Key // stored keys, in claim order
	held [][]byte       // the record values written when claimed
	prev []versionRecord
	// journal is the key of a multi-file commit's journal record (see
	// ClaimCommit), deleted on release; nil for other claims.
	journal []byte
}

// A claim held by another daemon is looked at again after claimPoll, then
// ever less often, up to claimPollMax.
const (
	claimPoll    = 2 * time.Millisecond
	claimPollMax = 50 * time.Millisecond
)

// Claim claims the version records of keys (host keys) before a mutation
// publishes: on a store that is not shared it returns (nil, nil), as the
// provider's per-target lock already serializes the daemon's mutations. On a
// shared one each record is taken with a compare-and-swap, in key order
// (no deadlock between daemons), so at most one daemon mutates a file at a
// time; the provider re-reads the file's bytes under the claim, so two
// daemons can never both replace one version. A claim held by another
// daemon is waited for up to Options.ClaimWait, one past its expiry
// (Options.ClaimTTL: its daemon died or stalled) is taken over. Errors are
// provider errors: FS_IO_ERROR when the engine cannot be reached or the
// file stays claimed.
func (s *Store) Claim(ctx context.Context, op, path string, keys ...provider.Key) (*Claim, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	return s.rec.claim(ctx, op, path, keys)
}

// claimShared is Claim on a shared store.
func (s *Store) claimShared(ctx context.Context, op, path string, keys []provider.Key) (*Claim, error) {
	c := &Claim{s: s}
	stored := make([]provider.Key, len(keys))
	for i, k := range keys {
		stored[i] = s.storedKey(k)
	}
	slices.Sort(stored)
	stored = slices.Compact(stored)
	deadline := time.Now().Add(s.opts.ClaimWait) // a real wait, whatever the store's clock
	for _, k := range stored {
		held, prev, err := s.claimOne(ctx, k, deadline)
		if err != nil {
			c.Release(nil)
			return nil, storeError(op, path, err)
		}
		c.keys, c.held, c.prev = append(c.keys, k), append(c.held, held), append(c.prev, prev)
	}
	return c, nil
}

// errClaimed: the record stayed claimed by another daemon past ClaimWait.
var errClaimed = errors.New("another daemon is changing this file")

func (s *Store) claimOne(ctx context.Context, k provider.Key, deadline time.Time) ([]byte, versionRecord, error) {
	key := versionKey(k)
	wait := claimPoll
	for {
		var rec versionRecord
		cond := kv.IfAbsent(key)
		cur, err := s.db.Get(ctx, key)
		switch {
		case errors.Is(err, kv.ErrNotFound):
		case err != nil:
			return nil, rec, unavailable(err)
		default:
			if jerr := json.Unmarshal(cur, &rec); jerr != nil {
				rec = versionRecord{} // unreadable: take it over
			}
			cond = kv.IfValue(key, cur)
		}
		now := s.opts.Now()
		if rec.Owner != "" && rec.Expires > now.UnixNano() {
			if !time.Now().Before(deadline) {
				return nil, rec, fmt.Errorf("%w (%s) for longer than %s", errClaimed, rec.Owner, s.opts.ClaimWait)
			}
			// Back off (with jitter): many waiters must not flood the
			// engine with reads.
			select {
			case <-ctx.Done():
				return nil, rec, fmt.Errorf("wait for a claim: %w", ctx.Err())
			case <-time.After(wait/2 + mrand.N(wait)):
			}
			wait = min(2*wait, claimPollMax)
			continue
		}
		if rec.Owner != "" {
			s.log.Warn("taking over an expired claim", "key", string(k), "holder", rec.Owner)
		}
		mine := rec
		mine.Owner, mine.Expires = s.owner, now.Add(s.opts.ClaimTTL).UnixNano()
		val, err := json.Marshal(mine)
		if err != nil {
			return nil, rec, fmt.Errorf("encode claim: %w", err)
		}
		ok, err := s.db.Txn(ctx, []kv.Cond{cond}, []kv.Op{kv.Put(key, val)})
		if err != nil {
			// The claim may have been taken all the same (the engine
			// committed, then the answer was lost): undo it once the
			// engine is back, as nobody will release it.
			if undo, jerr := json.Marshal(rec); jerr == nil {
				s.background.Add(1)
				go s.releaseLater([]kv.Cond{kv.IfValue(key, val)}, []kv.Op{kv.Put(key, undo)}, []int{0})
			}
			return nil, rec, unavailable(err)
		}
		if ok {
			return val, rec, nil
		}
	}
}

// Release ends the claim and records each file's resulting version: after
// maps a host key to its new version ("" = now absent); a file not in it
// keeps its previous record. A record that is no longer ours (our claim
// expired and was taken over) is left alone. Release of a nil Claim does
// nothing. Failures are logged: the claim then expires by itself.
func (c *Claim) Release(after map[provider.Key]provider.Version) {
	if c == nil {
		return
	}
	s := c.s
	conds, ops, err := c.releaseOps(after)
	if err != nil {
		s.log.Error("release claim; it expires by itself", "keys", len(c.keys), "err", err)
		return
	}
	var pending []int
	// In chunks of the engine's transaction limit; a chunk with a record
	// that is no longer ours is released key by key.
	n := s.db.MaxTxnOps()
	for start := 0; start < len(ops); start += n {
		end := min(start+n, len(ops))
		if end-start > 1 {
			ok, err := s.db.Txn(context.Background(), conds[start:end], ops[start:end])
			if err == nil && ok {
				continue
			}
		}
		for i := start; i < end; i++ {
			ok, err := s.db.Txn(context.Background(), conds[i:i+1], ops[i:i+1])
			switch {
			case err != nil:
				pending = append(pending, i)
			case !ok:
				s.log.Warn("a claim expired before its mutation ended and was taken over (this daemon stalled longer than the claim TTL)",
					"key", string(c.keys[i]), "ttl", s.opts.ClaimTTL)
			}
		}
	}
	if c.journal != nil {
		if err := s.db.Write(context.Background(), []kv.Op{kv.Delete(c.journal)}); err != nil {
			s.log.Warn("delete a commit journal record; the next daemon to open resolves it", "err", err)
		}
	}
	if len(pending) > 0 {
		s.log.Warn("the policy store is unavailable: releasing claims when it is back", "keys", len(pending))
		s.background.Add(1)
		go s.releaseLater(conds, ops, pending)
	}
}

// releaseLater retries releases (conds[i], ops[i] for i in pending) the
// engine did not take (it was unreachable), so later mutations of those
// files do not wait for the claims to expire; it gives up after ClaimTTL
// (they have expired by then) or when the store closes.
func (s *Store) releaseLater(conds []kv.Cond, ops []kv.Op, pending []int) {
	defer s.background.Done()
	deadline := time.Now().Add(s.opts.ClaimTTL)
	for len(pending) > 0 && time.Now().Before(deadline) {
		select {
		case <-s.stop:
			return
		case <-time.After(200 * time.Millisecond):
		}
		var still []int
		for _, i := range pending {
			if _, err := s.db.Txn(context.Background(), conds[i:i+1], ops[i:i+1]); err != nil {
				still = append(still, i)
			}
		}
		pending = still
	}
}

// releaseOps are the conditions (the records are still our claims) and the
// writes (unclaimed, at their new versions) that release c, one pair per
// key.
func (c *Claim) releaseOps(after map[provider.Key]provider.Version) ([]kv.Cond, []kv.Op, error) {
	if c == nil {
		return nil, nil, nil
	}
	s := c.s
	results := make(map[provider.Key]provider.Version, len(after))
	for k, v := range after {
		results[s.storedKey(k)] = v
	}
	conds := make([]kv.Cond, len(c.keys))
	ops := make([]kv.Op, len(c.keys))
	for i, k := range c.keys {
		rec := c.prev[i]
		rec.Owner, rec.Expires = "", 0
		if v, ok := results[k]; ok {
			rec.Version, rec.Absent = v, v == ""
		}
		val, err := json.Marshal(rec)
		if err != nil {
			return nil, nil, fmt.Errorf("encode version record: %w", err)
		}
		conds[i], ops[i] = kv.IfValue(versionKey(k), c.held[i]), kv.Put(versionKey(k), val)
	}
	return conds, ops, nil
}

// commitShared records a completed mutation on a shared store in one
// transaction: the claim's release with the resulting versions, the
// session's observations, the last writers and the audit entry under the
// next seq. A transaction that fails because another daemon took the next
// seq is tried again at the new one; one whose claim was taken over (this
// daemon stalled past ClaimTTL) records without releasing it.
func (s *Store) commitShared(m mutation, result provider.Target, after provider.Version, entry AuditEntry) error {
	versions := map[provider.Key]provider.Version{result.Key: after}
	if m.to != nil && m.sourceDeleted {
		versions[m.target.Key] = ""
	}
	relConds, ops, err := m.claim.releaseOps(versions)
	if err != nil {
		return err
	}
	if id := m.actor.Session; id != "" && s.session(id) != nil {
		if m.obs.Kind != ObservedPresent || m.obs.Version != "" {
			ops = append(ops, kv.Put(observationKey(id, s.storedKey(result.Key)), encodeObservation(m.obs)))
		}
		if m.to != nil && m.sourceDeleted {
			ops = append(ops, kv.Put(observationKey(id, s.storedKey(m.target.Key)), encodeObservation(Absent())))
		}
	}
	writers := []WriteRecord{{Actor: m.actor, Op: m.op, Time: entry.Time, Version: after, Path: result.DisplayPath}}
	keys := []provider.Key{result.Key}
	if m.to != nil && m.sourceDeleted {
		writers = append(writers, WriteRecord{Actor: m.actor, Op: m.op, Time: entry.Time, Path: m.target.DisplayPath})
		keys = append(keys, m.target.Key)
	}
	if s.closed.Load() {
		return ErrClosed
	}
	stored := entry
	stored.Key, stored.Daemon = s.storedKey(entry.Key), s.owner
	s.seqMu.Lock()
	defer s.seqMu.Unlock()
	cur := s.counterSeen.Load()
	for {
		stored.Seq = cur + 1
		val, err := json.Marshal(stored)
		if err != nil {
			return fmt.Errorf("encode audit entry for %s: %w", entry.Path, err)
		}
		conds := append(slices.Clone(relConds), counterCond(cur))
		all := append(slices.Clone(ops), kv.Put([]byte(keySeqAudit), encodeUint64(stored.Seq)), kv.Put(auditKey(stored.Seq), val))
		for i, w := range writers { // they carry the entry's seq
			w.Seq = stored.Seq
			wval, err := json.Marshal(w)
			if err != nil {
				return fmt.Errorf("encode last writer of %s: %w", w.Path, err)
			}
			all = append(all, kv.Put(lastWriteKey(s.storedKey(keys[i])), wval))
		}
		ok, err := s.db.Txn(context.Background(), conds, all)
		if err != nil {
			// The mutation is on disk, unrecorded: the session must read
			// again (stricter). The claim is released once the engine is
			// back.
			m.claim.Release(versions)
			return unavailable(err)
		}
		if ok {
			s.counterSeen.Store(stored.Seq) // subscribers get it from the watch
			return nil
		}
		next, err := s.auditCounter()
		if err != nil {
			return err
		}
		if next == cur && len(relConds) > 0 {
			s.log.Warn("a claim expired before its mutation ended and was taken over (this daemon stalled longer than the claim TTL)",
				"path", result.DisplayPath, "ttl", s.opts.ClaimTTL)
			n := len(relConds)
			relConds, ops = nil, ops[n:]
		}
		cur = next
	}
}

// storeDown is storeError's answer when the store cannot be reached: the
// provider error, still matching ErrStoreUnavailable (so a read can go on
// without a session).
type storeDown struct{ pe *provider.Error }

func (d storeDown) Error() string { return d.pe.Error() }

// Unwrap returns the provider error.
func (d storeDown) Unwrap() error { return d.pe }

// Is matches ErrStoreUnavailable.
func (d storeDown) Is(target error) bool { return target == ErrStoreUnavailable }

// storeError is the provider error a caller gets when the store failed:
// FS_IO_ERROR "policy store unavailable: …" when it cannot be reached. The
// message carries the cause's text (once); the cause itself is not kept.
func storeError(op, path string, err error) error {
	var pe *provider.Error
	if errors.As(err, &pe) {
		return err
	}
	if errors.Is(err, errClaimed) {
		return provider.NewError(provider.CodeIOError, op, path, nil, "%v; nothing was changed, retry", err)
	}
	if errors.Is(err, ErrStoreUnavailable) {
		detail := strings.ReplaceAll(err.Error(), ErrStoreUnavailable.Error()+": ", "")
		return storeDown{provider.NewError(provider.CodeIOError, op, path, nil,
			"policy store unavailable: %s; nothing was changed, retry once it is back", detail)}
	}
	return provider.NewError(provider.CodeIOError, op, path, nil, "policy store: %v", err)
}
