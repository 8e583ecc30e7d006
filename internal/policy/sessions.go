package policy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dshmount/dshmount/internal/policy/kv"
)

// touchPersistEvery bounds how often Touch rewrites a session record: the
// in-memory LastUsed is exact, the persisted one may lag by this much.
const touchPersistEvery = time.Second

// sessionState is the in-memory state of one open session. Its RWMutex is
// held shared while an observation is recorded and exclusively while the
// session closes, so no observation outlives its session.
type sessionState struct {
	mu        sync.RWMutex
	closed    bool
	id        SessionID
	name      string
	owner     uint32 // uid that opened it
	opened    time.Time
	startSeq  uint64       // the newest change seq when it opened (see Session.StartSeq)
	strict    bool         // read before every write (see Session.Strict)
	lastUsed  atomic.Int64 // unix nanoseconds
	persisted atomic.Int64 // lastUsed as last written
	// On a shared engine: the record as last read or written, the
	// condition of the next Touch (so a Touch never revives a session
	// another daemon closed).
	rawMu sync.Mutex
	raw   []byte
}

func (st *sessionState) snapshot() Session {
	return Session{ID: st.id, Name: st.name, Owner: st.owner, Opened: st.opened, LastUsed: time.Unix(0, st.lastUsed.Load()),
		StartSeq: st.startSeq, Strict: st.strict}
}

// sessionRecord is the persisted form of a session.
type sessionRecord struct {
	Name string `json:"name"`
	// Owner is the uid that opened the session; records written before
	// sessions had owners read as 0 (root).
	Owner    uint32    `json:"owner"`
	Opened   time.Time `json:"opened"`
	LastUsed time.Time `json:"lastUsed"`
	// StartSeq and Strict: see Session. Records written before they
	// existed read as 0 (every recorded change counts as after the start)
	// and false.
	StartSeq uint64 `json:"startSeq,omitempty"`
	Strict   bool   `json:"strict,omitempty"`
}

// state is the in-memory form of a persisted session id.
func (rec sessionRecord) state(id SessionID) *sessionState {
	st := &sessionState{id: id, name: rec.Name, owner: rec.Owner, opened: rec.Opened, startSeq: rec.StartSeq, strict: rec.Strict}
	st.lastUsed.Store(rec.LastUsed.UnixNano())
	st.persisted.Store(rec.LastUsed.UnixNano())
	return st
}

func newSessionID() (SessionID, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate session id: %w", err)
	}
	return SessionID("s-" + hex.EncodeToString(b[:])), nil
}

// OpenSession opens a new session owned by root (uid 0) with an optional
// name and a random ID.
func (s *Store) OpenSession(name string) (Session, error) {
	return s.OpenOwnedSession(name, 0)
}

// OpenOwnedSession opens a new session owned by uid owner, with an optional
// name and a random ID. The owner is persisted with the session.
func (s *Store) OpenOwnedSession(name string, owner uint32) (Session, error) {
	return s.OpenSessionWith(SessionSpec{Name: name, Owner: owner})
}

// SessionSpec describes a session to open.
type SessionSpec struct {
	Name   string
	Owner  uint32 // uid that opens it
	Strict bool   // see Session.Strict
}

// OpenSessionWith opens a new session as spec says, with a random ID. The
// newest change seq at this moment becomes its StartSeq.
func (s *Store) OpenSessionWith(spec SessionSpec) (Session, error) {
	name, owner := spec.Name, spec.Owner
	if s.closed.Load() {
		return Session{}, ErrClosed
	}
	id, err := newSessionID()
	if err != nil {
		return Session{}, err
	}
	now := s.opts.Now()
	st := &sessionState{id: id, name: name, owner: owner, opened: now, startSeq: s.changeSeq(), strict: spec.Strict}
	st.lastUsed.Store(now.UnixNano())
	st.persisted.Store(now.UnixNano())
	s.sessMu.Lock()
	s.sessions[id] = st
	s.sessMu.Unlock()
	if err := s.persistSession(st); err != nil {
		s.sessMu.Lock()
		delete(s.sessions, id)
		s.sessMu.Unlock()
		if errors.Is(err, ErrStoreUnavailable) {
			err = storeError("session", "", err)
		}
		return Session{}, err
	}
	return st.snapshot(), nil
}

func (s *Store) persistSession(st *sessionState) error {
	rec := sessionRecord{Name: st.name, Owner: st.owner, Opened: st.opened, LastUsed: time.Unix(0, st.lastUsed.Load()),
		StartSeq: st.startSeq, Strict: st.strict}
	val, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode session %s: %w", st.id, err)
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	if st.closed {
		return nil
	}
	return s.rec.persistSession(st, val)
}

// persistSessionShared is persistSession on a shared engine: written
// through, and a record another daemon changed since this one last read or
// wrote it is left alone.
func (s *Store) persistSessionShared(st *sessionState, val []byte) error {
	st.rawMu.Lock()
	defer st.rawMu.Unlock()
	if st.raw == nil { // a new session
		if err := s.writeThrough(kv.Put(sessionKey(st.id), val)); err != nil {
			return fmt.Errorf("store session %s: %w", st.id, err)
		}
	} else {
		ok, err := s.db.Txn(context.Background(), []kv.Cond{kv.IfValue(sessionKey(st.id), st.raw)},
			[]kv.Op{kv.Put(sessionKey(st.id), val)})
		if err != nil {
			return fmt.Errorf("store session %s: %w", st.id, unavailable(err))
		}
		if !ok {
			return nil // touched or closed by another daemon: the next use reads it again
		}
	}
	st.raw = val
	return nil
}

// session returns the open session id, or nil. On a shared engine a
// session this daemon has not seen yet is read from the engine.
func (s *Store) session(id SessionID) *sessionState {
	s.sessMu.RLock()
	st := s.sessions[id]
	s.sessMu.RUnlock()
	if st == nil {
		st, _ = s.rec.fetchSession(id)
	}
	return st
}

// fetchSessionShared reads session id's record from a shared engine and
// updates this daemon's copy: nil when it is gone (closed on any daemon), an
// error wrapping ErrStoreUnavailable when the engine cannot say.
func (s *Store) fetchSessionShared(id SessionID) (*sessionState, error) {
	val, err := s.db.Get(context.Background(), sessionKey(id))
	if errors.Is(err, kv.ErrNotFound) {
		s.sessMu.Lock()
		st := s.sessions[id]
		delete(s.sessions, id)
		s.sessMu.Unlock()
		if st != nil {
			st.mu.Lock()
			st.closed = true
			st.mu.Unlock()
		}
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read session %s: %w", id, unavailable(err))
	}
	var rec sessionRecord
	if err := json.Unmarshal(val, &rec); err != nil {
		return nil, fmt.Errorf("decode session %s: %w", id, err)
	}
	s.sessMu.Lock()
	st := s.sessions[id]
	if st == nil {
		st = rec.state(id)
		s.sessions[id] = st
	}
	s.sessMu.Unlock()
	st.rawMu.Lock()
	st.raw = val
	st.rawMu.Unlock()
	if used := rec.LastUsed.UnixNano(); used > st.lastUsed.Load() {
		st.lastUsed.Store(used)
		st.persisted.Store(used)
	}
	return st, nil
}

// UseSession checks that session id is open (on a shared engine: still
// open on every daemon) and marks it used. An unknown session is an error
// wrapping ErrUnknownSession, an unreachable shared engine one wrapping
// ErrStoreUnavailable.
func (s *Store) UseSession(id SessionID) error {
	st, err := s.rec.fetchSession(id)
	if err != nil {
		return err
	}
	if st == nil {
		return unknownSession(id)
	}
	s.Touch(id)
	return nil
}

// CloseSession closes a session and drops its observations. An unknown
// session is an error wrapping ErrUnknownSession.
func (s *Store) CloseSession(id SessionID) error {
	if s.closed.Load() {
		return ErrClosed
	}
	// Brings this daemon's copy up to date (a session opened on another
	// daemon is closed here too).
	if _, err := s.rec.fetchSession(id); err != nil {
		return fmt.Errorf("close session %q: %w", id, err)
	}
	s.sessMu.Lock()
	st := s.sessions[id]
	delete(s.sessions, id)
	s.sessMu.Unlock()
	if st == nil {
		return fmt.Errorf("close session %q: %w; list sessions to see the open ones", id, ErrUnknownSession)
	}
	st.mu.Lock()
	st.closed = true // no observation can be recorded from now on
	st.mu.Unlock()
	return s.purgeSession(id)
}

// purgeSession deletes the session record and every observation under its
// prefix, buffered or stored.
func (s *Store) purgeSession(id SessionID) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	prefix := observationPrefix(id)
	s.buf.dropPrefix(prefix)
	s.buf.dropPrefix(sessionKey(id))
	ctx := context.Background()
	var ops []kv.Op
	err := s.db.Scan(ctx, kv.Range{Prefix: prefix}, func(p kv.Pair) error {
		ops = append(ops, kv.Delete(p.Key))
		return nil
	})
	if err != nil {
		return fmt.Errorf("list observations of session %s: %w", id, err)
	}
	// The record goes first: other daemons see the session closed before
	// its observations go.
	if err := s.db.Write(ctx, []kv.Op{kv.Delete(sessionKey(id))}); err != nil {
		return fmt.Errorf("drop session %s: %w", id, unavailable(err))
	}
	if err := s.db.Write(ctx, ops); err != nil {
		return fmt.Errorf("drop observations of session %s: %w", id, err)
	}
	return nil
}

// Session returns an open session (on a shared engine, as the engine has
// it now; when the engine cannot be reached, this daemon's last copy).
func (s *Store) Session(id SessionID) (Session, bool) {
	sess, ok, _ := s.LookupSession(id)
	return sess, ok
}

// LookupSession is Session with the reason it cannot answer: on a shared
// engine that cannot be reached, a session this daemon has no copy of is a
// provider error FS_IO_ERROR "policy store unavailable: …" (a copy is
// returned as Session would; the Engine then refuses mutations).
func (s *Store) LookupSession(id SessionID) (Session, bool, error) {
	st, err := s.rec.fetchSession(id)
	if err != nil {
		s.sessMu.RLock()
		st = s.sessions[id]
		s.sessMu.RUnlock()
		if st == nil {
			return Session{}, false, storeError("session", "", err)
		}
	}
	if st == nil {
		return Session{}, false, nil
	}
	return st.snapshot(), true, nil
}

// Sessions lists the open sessions, oldest first (on a shared engine, of
// every daemon; none when it cannot be reached, logged).
func (s *Store) Sessions() []Session { return s.rec.sessions() }

// sessionsLocal is Sessions on a local engine: this daemon's copies.
func (s *Store) sessionsLocal() []Session {
	s.sessMu.RLock()
	out := make([]Session, 0, len(s.sessions))
	for _, st := range s.sessions {
		out = append(out, st.snapshot())
	}
	s.sessMu.RUnlock()
	sortSessions(out)
	return out
}

// sortSessions sorts sessions oldest first (by ID when opened together).
func sortSessions(out []Session) {
	slices.SortFunc(out, func(a, b Session) int {
		if c := a.Opened.Compare(b.Opened); c != 0 {
			return c
		}
		return strings.Compare(string(a.ID), string(b.ID))
	})
}

// Touch marks a session as used now, for the idle TTL. Unknown sessions are
// ignored.
func (s *Store) Touch(id SessionID) {
	st := s.session(id)
	if st == nil {
		return
	}
	now := s.opts.Now().UnixNano()
	st.lastUsed.Store(now)
	if time.Duration(now-st.persisted.Load()) >= touchPersistEvery {
		st.persisted.Store(now)
		if err := s.persistSession(st); err != nil {
			s.log.Warn("persist session use", "session", id, "err", err)
		}
	}
}

// CollectIdle closes every session unused for longer than Options.SessionTTL
// before now and returns their IDs. With no TTL it closes nothing.
func (s *Store) CollectIdle(now time.Time) []SessionID {
	if s.opts.SessionTTL <= 0 || s.closed.Load() {
		return nil
	}
	cutoff := now.Add(-s.opts.SessionTTL).UnixNano()
	var idle []SessionID
	for _, sess := range s.Sessions() {
		if sess.LastUsed.UnixNano() < cutoff {
			idle = append(idle, sess.ID)
		}
	}
	var closed []SessionID
	for _, id := range idle {
		if err := s.CloseSession(id); err != nil {
			s.log.Warn("close idle session", "session", id, "err", err)
			continue
		}
		closed = append(closed, id)
	}
	slices.Sort(closed)
	return closed
}

// sessionsShared is Sessions on a shared engine: every daemon's sessions,
// as the engine has them (none when it cannot be reached, logged).
func (s *Store) sessionsShared() []Session {
	prefix := []byte(prefixSession)
	var out []Session
	err := s.db.Scan(context.Background(), kv.Range{Prefix: prefix}, func(p kv.Pair) error {
		var rec sessionRecord
		if err := json.Unmarshal(p.Value, &rec); err != nil {
			s.log.Warn("decode session", "session", string(p.Key[len(prefix):]), "err", err)
			return nil
		}
		out = append(out, rec.state(SessionID(p.Key[len(prefix):])).snapshot())
		return nil
	})
	if err != nil {
		s.log.Error("list sessions", "err", unavailable(err))
	}
	sortSessions(out)
	return out
}

// loadSessions reads the persisted sessions at Open.
func (s *Store) loadSessions() error {
	prefix := []byte(prefixSession)
	return s.db.Scan(context.Background(), kv.Range{Prefix: prefix}, func(p kv.Pair) error {
		id := SessionID(p.Key[len(prefix):])
		var rec sessionRecord
		if err := json.Unmarshal(p.Value, &rec); err != nil {
			return fmt.Errorf("load session %s: %w", id, err)
		}
		s.sessions[id] = rec.state(id)
		return nil
	})
}
