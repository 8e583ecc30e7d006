package policy

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dshmount/dshmount/internal/provider"
)

// On a shared store a bound process's change through the mount claims the
// file's version record as a socket mutation does: when CheckMount (or
// CheckMountCreate of an existing file) lets a bound session change a file,
// the daemon claims v/<key> without waiting. Another daemon's live claim
// (it is publishing a new version of the file now) refuses the change with
// FS_STALE_VERSION (ESTALE), an unreachable engine with FS_IO_ERROR (EIO).
// The claim is held while the process writes and is released, with the
// resulting version, by the RecordMount of the change (flush, release,
// rename, unlink); a change that records nothing lets it expire (ClaimTTL),
// and a socket mutation or commit of this daemon on the file takes it over
// at once. Another daemon's mutation of the file meanwhile waits for it
// (ClaimWait), then re-reads the bytes: the bound process's writes make its
// token stale. The session's own later writes pass without etcd (the mount
// does not ask again while the file holds the session's own bytes), and a
// claim older than half its TTL is taken again at the next check. On a
// store that is not shared nothing of this runs.

// mountClaims are the claims this daemon holds for bound mount changes,
// by host key. The zero value is ready to use.
type mountClaims struct {
	mu   sync.Mutex
	held map[provider.Key]mountClaim
}

type mountClaim struct {
	c     *Claim
	taken time.Time
}

// claimMount claims t for a bound session's change through the mount (see
// above); nil on a store that is not shared.
func (e *Engine) claimMount(op MutationOp, t provider.Target) error {
	return e.store.rec.claimMount(e, op, t)
}

// claimMountShared is claimMount on a shared store.
func (e *Engine) claimMountShared(op MutationOp, t provider.Target) error {
	s := e.store
	m := &e.mclaims
	m.mu.Lock()
	defer m.mu.Unlock()
	if h, ok := m.held[t.Key]; ok {
		if time.Since(h.taken) < s.opts.ClaimTTL/2 {
			return nil
		}
		delete(m.held, t.Key)
		h.c.Release(nil)
	}
	k := s.storedKey(t.Key)
	held, prev, err := s.claimOne(context.Background(), k, time.Now()) // no wait
	if errors.Is(err, errClaimed) {
		return provider.NewError(provider.CodeStaleVersion, string(op), t.DisplayPath, nil,
			"another daemon is changing %s now; read it again once it is done", t.DisplayPath)
	}
	if err != nil {
		return storeError(string(op), t.DisplayPath, err)
	}
	if m.held == nil {
		m.held = map[provider.Key]mountClaim{}
	}
	m.held[t.Key] = mountClaim{c: &Claim{s: s, keys: []provider.Key{k}, held: [][]byte{held}, prev: []versionRecord{prev}}, taken: time.Now()}
	return nil
}

// take removes the claims held on keys and returns them as one claim (nil
// when there is none), for a commit to release.
func (m *mountClaims) take(keys ...provider.Key) *Claim {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out *Claim
	for _, k := range keys {
		h, ok := m.held[k]
		if !ok {
			continue
		}
		delete(m.held, k)
		if out == nil {
			out = &Claim{s: h.c.s}
		}
		out.keys = append(out.keys, h.c.keys...)
		out.held = append(out.held, h.c.held...)
		out.prev = append(out.prev, h.c.prev...)
	}
	return out
}

// release releases the claims held on keys, keeping their versions.
func (m *mountClaims) release(keys ...provider.Key) {
	m.take(keys...).Release(nil)
}
