package service

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/dshmount/dshmount/internal/policy"
)

// Transport is what the service asks of the connection a request came on:
// watches deliver their notifications through it and end with it.
type Transport interface {
	// Context ends when the connection does.
	Context() context.Context
	// Notify sends a notification on the connection.
	Notify(method string, params any)
	// AddWatch registers a watch's stop function; false when closing.
	AddWatch(id string, stop func()) bool
	// RemoveWatch unregisters and returns a watch's stop function.
	RemoveWatch(id string) (func(), bool)
}

// Caller is who a request comes from, as the service sees it: the peer
// (uid, pid, channel), the session it is bound to, the connection's
// implicit session and the sessions it opened. A transport makes one per
// connection (NewCaller) and passes it with every request.
type Caller struct {
	s         *Service
	id        uint64
	transport Transport
	// runAs runs fn with the peer's filesystem credentials; nil: the peer
	// is served as the daemon.
	runAs func(fn func()) error

	smu      sync.Mutex
	actor    policy.Actor     // peer uid/pid; Session filled per request
	implicit policy.SessionID // opened lazily
	bound    policy.SessionID // the peer's session when it is a bound process
	// mismatchLogged: a request of the bound peer named another session
	// and it was logged (once per connection).
	mismatchLogged bool
	opens          map[policy.SessionID]struct{} // sessions opened by session.open on this connection
	closing        bool
}

// CallerConfig describes a connection's peer.
type CallerConfig struct {
	ID        uint64 // the connection's number, named in its implicit session
	UID       uint32
	PID       int32
	Bound     SessionID             // the peer's bound session (empty: unbound)
	RunAs     func(fn func()) error // with the peer's credentials; nil: as the daemon
	Transport Transport
}

// NewCaller returns the caller of a connection of the socket channel.
func (s *Service) NewCaller(cfg CallerConfig) *Caller {
	return &Caller{s: s, id: cfg.ID, transport: cfg.Transport, runAs: cfg.RunAs, bound: cfg.Bound,
		actor: policy.Actor{Channel: policy.ChannelSocket, UID: cfg.UID, PID: cfg.PID},
		opens: make(map[policy.SessionID]struct{})}
}

// Close ends the caller: its implicit session is closed and no new one is
// opened.
func (c *Caller) Close() {
	c.smu.Lock()
	c.closing = true
	implicit := c.implicit
	c.smu.Unlock()
	if implicit != "" {
		if err := c.s.store.CloseSession(implicit); err != nil {
			c.s.log.Debug("close implicit session", "session", implicit, "err", err)
		}
	}
}

// HoldsSession reports whether the caller holds a session that is still
// open: its implicit one or one it opened with session.open.
func (c *Caller) HoldsSession() bool {
	c.smu.Lock()
	defer c.smu.Unlock()
	if c.implicit != "" {
		if _, ok := c.s.store.Session(c.implicit); ok {
			return true
		}
	}
	for id := range c.opens {
		if _, ok := c.s.store.Session(id); ok {
			return true
		}
		delete(c.opens, id) // closed or collected since
	}
	return false
}

// Bound returns the session the caller is bound to (empty: unbound).
func (c *Caller) Bound() SessionID { return c.boundTo() }

// Implicit returns the connection's implicit session (empty: none opened).
func (c *Caller) Implicit() SessionID {
	c.smu.Lock()
	defer c.smu.Unlock()
	return c.implicit
}

// implicitSession returns the connection's own session, opening it on first
// use.
func (c *Caller) implicitSession() (policy.SessionID, error) {
	c.smu.Lock()
	defer c.smu.Unlock()
	if c.implicit != "" {
		return c.implicit, nil
	}
	if c.closing {
		return "", errors.New("connection is closing")
	}
	name := fmt.Sprintf("conn-%d", c.id)
	sess, err := c.s.store.OpenOwnedSession(name, c.actor.UID)
	if err != nil {
		return "", fmt.Errorf("open the connection's session: %w", err)
	}
	c.s.names.opened(sess.ID, name)
	c.implicit = sess.ID
	return c.implicit, nil
}

// actorFor returns the actor of a request naming session (empty: the
// connection's implicit session). A bound peer's requests run as its own
// session, whatever they name.
func (c *Caller) actorFor(session policy.SessionID) (policy.Actor, error) {
	a := c.peer()
	if bound := c.boundTo(); bound != "" {
		a.Session, a.Bound = c.asBound(session), true
		return a, nil
	}
	if session == "" {
		id, err := c.implicitSession()
		if err != nil {
			return a, err
		}
		a.Session = id
		return a, nil
	}
	if _, err := c.ownedSession(session); err != nil {
		return a, err
	}
	a.Session = session // the Engine marks the session used
	return a, nil
}

// refusalActor is the actor an audit entry names when actorFor refused
// session: the peer, with the session it asked for.
func (c *Caller) refusalActor(session policy.SessionID) policy.Actor {
	a := c.peer()
	a.Session = c.asBound(session)
	return a
}

// peer is the connection's actor without a session: uid, pid, channel.
func (c *Caller) peer() policy.Actor {
	c.smu.Lock()
	defer c.smu.Unlock()
	return c.actor
}

// setChannel relabels the connection's requests (session.open's channel).
func (c *Caller) setChannel(ch policy.Channel) {
	c.smu.Lock()
	defer c.smu.Unlock()
	c.actor.Channel = ch
}

// opened remembers a session this connection opened with session.open.
func (c *Caller) opened(id policy.SessionID) {
	c.smu.Lock()
	defer c.smu.Unlock()
	c.opens[id] = struct{}{}
}

// boundTo returns the session the connection's peer is bound to (empty:
// unbound).
func (c *Caller) boundTo() policy.SessionID {
	c.smu.Lock()
	defer c.smu.Unlock()
	return c.bound
}

// asBound returns the session a request naming named runs as: the peer's
// bound session when it has one (a mismatch is logged once per
// connection), else named.
func (c *Caller) asBound(named policy.SessionID) policy.SessionID {
	c.smu.Lock()
	bound := c.bound
	first := bound != "" && named != "" && named != bound && !c.mismatchLogged
	if first {
		c.mismatchLogged = true
	}
	c.smu.Unlock()
	if bound == "" {
		return named
	}
	if first {
		c.s.log.Warn("a process bound to a session named another one; its requests run as its own session",
			"conn", c.id, "pid", c.actor.PID, "session", bound, "named", named)
	}
	return bound
}
