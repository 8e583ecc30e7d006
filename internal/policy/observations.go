package policy

import (
	"context"
	"fmt"

	"github.com/dshmount/dshmount/internal/policy/kv"
	"github.com/dshmount/dshmount/internal/provider"
)

// Observation returns what session id last observed of key. No entry (false)
// means unseen; so does an unknown or closed session, or an unreadable
// record (logged), which only makes the guard stricter.
func (s *Store) Observation(id SessionID, key provider.Key) (Observation, bool) {
	obs, ok, err := s.observation(id, key)
	if err != nil {
		s.log.Error("read observation", "session", id, "err", err)
		return Observation{}, false
	}
	return obs, ok
}

// observation is Observation with the engine's failure as an error
// (ErrStoreUnavailable on a shared engine that cannot be reached).
func (s *Store) observation(id SessionID, key provider.Key) (Observation, bool, error) {
	if id == "" {
		return Observation{}, false, nil
	}
	val, ok, err := s.lookup(observationKey(id, s.storedKey(key)))
	if err != nil || !ok {
		return Observation{}, false, err
	}
	obs, err := decodeObservation(val)
	if err != nil {
		s.log.Error("decode observation", "session", id, "err", err)
		return Observation{}, false, nil
	}
	return obs, true, nil
}

// Record stores obs as what session id now knows of key. The session must be
// open (else an error wrapping ErrUnknownSession).
func (s *Store) Record(id SessionID, key provider.Key, obs Observation) error {
	if s.closed.Load() {
		return ErrClosed
	}
	switch obs.Kind {
	case ObservedPresent:
		if obs.Version == "" {
			return fmt.Errorf("record observation of %s: present without a version", key)
		}
	case ObservedAbsent:
	default:
		return fmt.Errorf("record observation of %s: unknown kind %q", key, obs.Kind)
	}
	st := s.session(id)
	if st == nil {
		return unknownSession(id)
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	if st.closed {
		return unknownSession(id)
	}
	return s.put(observationKey(id, s.storedKey(key)), encodeObservation(obs), true)
}

// Forget removes session id's observation of key, so it is unseen again.
func (s *Store) Forget(id SessionID, key provider.Key) error {
	st := s.session(id)
	if st == nil {
		return unknownSession(id)
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	if st.closed {
		return unknownSession(id)
	}
	return s.del(observationKey(id, s.storedKey(key)))
}

func unknownSession(id SessionID) error {
	return fmt.Errorf("session %q: %w; open a new session", id, ErrUnknownSession)
}

// CarryObservations moves what session id knows of every path below the
// directory from to the same path below the directory to (a rename of that
// directory by the session: it changes no bytes, so fresh observations stay
// fresh and stale ones stay stale). Paths below from become absent.
func (s *Store) CarryObservations(id SessionID, from, to provider.Key) error {
	if s.session(id) == nil {
		return unknownSession(id)
	}
	if err := s.Flush(); err != nil {
		return fmt.Errorf("carry observations below %s: %w", from, err)
	}
	prefix := observationKey(id, s.storedKey(from)+"/")
	type carried struct {
		rel string
		obs Observation
	}
	var moved []carried
	err := s.db.Scan(context.Background(), kv.Range{Prefix: prefix}, func(p kv.Pair) error {
		if obs, derr := decodeObservation(p.Value); derr == nil {
			moved = append(moved, carried{rel: string(p.Key[len(prefix):]), obs: obs})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("list observations below %s: %w", from, err)
	}
	for _, c := range moved {
		if err := s.Record(id, to+"/"+provider.Key(c.rel), c.obs); err != nil {
			return err
		}
		if err := s.Record(id, from+"/"+provider.Key(c.rel), Absent()); err != nil {
			return err
		}
	}
	return nil
}
