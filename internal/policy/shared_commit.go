package policy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"time"

	"github.com/dshmount/dshmount/internal/policy/kv"
	"github.com/dshmount/dshmount/internal/provider"
)

// Multi-file commits (atomic patches, branch commits) on a shared store:
//
//  1. a journal record j/<owner>/<id> is written: the files (stored keys)
//     and the versions the commit expects them at;
//  2. the files' version records are claimed in chunks of at most the
//     engine's transaction limit (MaxTxnOps, 128 on a default etcd), each
//     chunk one compare-and-swap transaction; the claim is all or nothing:
//     when a chunk cannot be taken the chunks already taken are released
//     and the commit is refused (a *ClaimConflictError naming the files
//     another daemon holds, or FS_IO_ERROR when the engine is unreachable);
//  3. the commit checks the files' bytes against the expected versions
//     under the claims and publishes (overlay/branch's local journal makes
//     that all or nothing on disk);
//  4. the results are recorded, and the claims released with the new
//     versions and the journal record deleted (CommitClaim.Release).
//
// A daemon killed between 1 and 4 leaves claims that expire after
// Options.ClaimTTL (then any daemon takes them over, re-hashing the bytes)
// and a journal record: the next daemon to open on the store (another one,
// or the same one restarting) resolves it once its claims have expired,
// marking each file it names whose record that dead claim still holds as
// of unknown version, and deletes it. The bytes themselves are the dead
// daemon's to finish or undo from its local commit journal when it
// restarts.

// prefixCommitJournal holds the journal records of multi-file commits.
const prefixCommitJournal = "j/"

// commitJournal is the value of j/<owner>/<id>.
type commitJournal struct {
	Owner   string             `json:"owner"`
	Label   string             `json:"label,omitempty"`
	Keys    []provider.Key     `json:"keys"`  // stored keys
	Bases   []provider.Version `json:"bases"` // expected versions, one per key ("" = any)
	Expires int64              `json:"expires"`
}

// CommitFile is one file of a multi-file commit: the target and the
// version the commit expects it at ("" when it expects it absent or does
// not know).
type CommitFile struct {
	Target provider.Target
	Base   provider.Version
}

// ClaimConflictError refuses a multi-file commit whose files another
// daemon kept claimed past Options.ClaimWait. It is FS_STALE_VERSION.
type ClaimConflictError struct {
	Paths []string // display paths, sorted
}

// Error says which files are held.
func (e *ClaimConflictError) Error() string {
	return fmt.Sprintf("%s: another daemon is changing %v; nothing was applied", provider.CodeStaleVersion, e.Paths)
}

// Unwrap makes errors.Is(err, provider.ErrStaleVersion) hold.
func (e *ClaimConflictError) Unwrap() error {
	return &provider.Error{Code: provider.CodeStaleVersion, Op: "commit",
		Message: fmt.Sprintf("another daemon is changing %v; nothing was applied", e.Paths)}
}

// ClaimCommit claims every file of a multi-file commit before it publishes
// (see above). On a store that is not shared it returns (nil, nil): the
// provider's locks serialize the daemon's commits. Release the claim with
// the results, or with nil when the commit did not publish.
func (e *Engine) ClaimCommit(ctx context.Context, label string, files []CommitFile) (*Claim, error) {
	keys := make([]provider.Key, len(files))
	for i, f := range files {
		keys[i] = f.Target.Key
	}
	e.mclaims.release(keys...) // this daemon's own mount claims give way
	if len(files) == 0 {
		return nil, nil
	}
	return e.store.rec.claimCommit(ctx, label, files)
}

// claimCommitShared is ClaimCommit on a shared store.
func (s *Store) claimCommitShared(ctx context.Context, label string, files []CommitFile) (*Claim, error) {
	display := map[provider.Key]string{}
	bases := map[provider.Key]provider.Version{}
	stored := make([]provider.Key, 0, len(files))
	for _, f := range files {
		k := s.storedKey(f.Target.Key)
		display[k], bases[k] = f.Target.DisplayPath, f.Base
		stored = append(stored, k)
	}
	slices.Sort(stored)
	stored = slices.Compact(stored)
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("name the commit journal: %w", err)
	}
	j := commitJournal{Owner: s.owner, Label: label, Keys: stored,
		Expires: s.opts.Now().Add(s.opts.ClaimTTL).UnixNano()}
	for _, k := range stored {
		j.Bases = append(j.Bases, bases[k])
	}
	val, err := json.Marshal(j)
	if err != nil {
		return nil, fmt.Errorf("encode the commit journal: %w", err)
	}
	jkey := []byte(prefixCommitJournal + s.owner + "/" + hex.EncodeToString(id[:]))
	if err := s.db.Write(ctx, []kv.Op{kv.Put(jkey, val)}); err != nil {
		return nil, storeError("commit", label, unavailable(err))
	}
	c := &Claim{s: s, journal: jkey}
	deadline := time.Now().Add(s.opts.ClaimWait)
	n := s.db.MaxTxnOps()
	for start := 0; start < len(stored); start += n {
		chunk := stored[start:min(start+n, len(stored))]
		held, prev, err := s.claimChunk(ctx, chunk, deadline)
		if err != nil {
			c.Release(nil)
			var busy *busyError
			if errors.As(err, &busy) {
				paths := make([]string, len(busy.keys))
				for i, k := range busy.keys {
					paths[i] = display[k]
				}
				slices.Sort(paths)
				return nil, &ClaimConflictError{Paths: paths}
			}
			return nil, storeError("commit", label, err)
		}
		c.keys, c.held, c.prev = append(c.keys, chunk...), append(c.held, held...), append(c.prev, prev...)
	}
	return c, nil
}

// busyError: the keys stayed claimed by other daemons past ClaimWait.
type busyError struct{ keys []provider.Key }

func (e *busyError) Error() string {
	return fmt.Sprintf("%v: %d files", errClaimed, len(e.keys))
}

// claimChunk claims keys (at most MaxTxnOps) in one transaction, waiting
// for other daemons' live claims until deadline.
func (s *Store) claimChunk(ctx context.Context, keys []provider.Key, deadline time.Time) ([][]byte, []versionRecord, error) {
	wait := claimPoll
	for {
		conds := make([]kv.Cond, len(keys))
		ops := make([]kv.Op, len(keys))
		held := make([][]byte, len(keys))
		prev := make([]versionRecord, len(keys))
		var busy []provider.Key
		now := s.opts.Now()
		for i, k := range keys {
			key := versionKey(k)
			conds[i] = kv.IfAbsent(key)
			cur, err := s.db.Get(ctx, key)
			switch {
			case errors.Is(err, kv.ErrNotFound):
			case err != nil:
				return nil, nil, unavailable(err)
			default:
				if jerr := json.Unmarshal(cur, &prev[i]); jerr != nil {
					prev[i] = versionRecord{}
				}
				conds[i] = kv.IfValue(key, cur)
			}
			if prev[i].Owner != "" && prev[i].Expires > now.UnixNano() {
				busy = append(busy, k)
				continue
			}
			mine := prev[i]
			mine.Owner, mine.Expires = s.owner, now.Add(s.opts.ClaimTTL).UnixNano()
			val, err := json.Marshal(mine)
			if err != nil {
				return nil, nil, fmt.Errorf("encode claim: %w", err)
			}
			held[i], ops[i] = val, kv.Put(key, val)
		}
		if len(busy) > 0 {
			if !time.Now().Before(deadline) {
				return nil, nil, &busyError{keys: busy}
			}
			select {
			case <-ctx.Done():
				return nil, nil, fmt.Errorf("wait for claims: %w", ctx.Err())
			case <-time.After(wait/2 + mrand.N(wait)):
			}
			wait = min(2*wait, claimPollMax)
			continue
		}
		ok, err := s.db.Txn(ctx, conds, ops)
		if err != nil {
			// Possibly committed: undo once the engine is back.
			undoConds := make([]kv.Cond, len(keys))
			undo := make([]kv.Op, len(keys))
			pending := make([]int, len(keys))
			for i, k := range keys {
				b, jerr := json.Marshal(prev[i])
				if jerr != nil {
					return nil, nil, fmt.Errorf("encode version record: %w", jerr)
				}
				undoConds[i], undo[i], pending[i] = kv.IfValue(versionKey(k), held[i]), kv.Put(versionKey(k), b), i
			}
			s.background.Add(1)
			go s.releaseLater(undoConds, undo, pending)
			return nil, nil, unavailable(err)
		}
		if ok {
			return held, prev, nil
		}
	}
}

// resolveCommitJournals resolves the journal records of multi-file commits
// whose daemon died (their claims expired): each file whose record that
// claim still holds is released at an unknown version, then the record is
// deleted. Records of live commits are left alone.
func (s *Store) resolveCommitJournals(ctx context.Context) error {
	now := s.opts.Now().UnixNano()
	var dead []kv.Pair
	err := s.db.Scan(ctx, kv.Range{Prefix: []byte(prefixCommitJournal)}, func(p kv.Pair) error {
		var j commitJournal
		if json.Unmarshal(p.Value, &j) != nil || j.Expires <= now {
			dead = append(dead, p)
		}
		return nil
	})
	if err != nil {
		return unavailable(err)
	}
	for _, p := range dead {
		var j commitJournal
		_ = json.Unmarshal(p.Value, &j)
		s.log.Warn("resolving the journal of a multi-file commit whose daemon stopped mid-commit",
			"daemon", j.Owner, "label", j.Label, "files", len(j.Keys))
		for _, k := range j.Keys {
			key := versionKey(k)
			cur, err := s.db.Get(ctx, key)
			if errors.Is(err, kv.ErrNotFound) {
				continue
			}
			if err != nil {
				return unavailable(err)
			}
			var rec versionRecord
			if json.Unmarshal(cur, &rec) != nil || rec.Owner != j.Owner || rec.Expires > now {
				continue // taken over, released, or someone else's
			}
			val, err := json.Marshal(versionRecord{}) // the bytes may or may not have changed
			if err != nil {
				return fmt.Errorf("encode version record: %w", err)
			}
			if _, err := s.db.Txn(ctx, []kv.Cond{kv.IfValue(key, cur)}, []kv.Op{kv.Put(key, val)}); err != nil {
				return unavailable(err)
			}
		}
		if _, err := s.db.Txn(ctx, []kv.Cond{kv.IfValue(p.Key, p.Value)}, []kv.Op{kv.Delete(p.Key)}); err != nil {
			return unavailable(err)
		}
	}
	return nil
}
