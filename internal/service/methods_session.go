package service

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/policy"
	"golang.org/x/sys/unix"
)

// SessionOpen opens a named session.
func (s *Service) SessionOpen(_ context.Context, c *Caller, p SessionOpenParams) (SessionOpenResult, error) {
	switch p.Channel {
	case "", policy.ChannelSocket:
	case policy.ChannelMCP:
		c.setChannel(p.Channel)
	default:
		return SessionOpenResult{}, invalidParams(`channel must be "socket" or "mcp", not %q`, p.Channel)
	}
	if strings.ContainsRune(p.Name, 0) {
		return SessionOpenResult{}, invalidParams("session name contains a NUL byte")
	}
	if p.Branch != "" {
		if _, err := s.ownedBranch(c, p.Branch); err != nil {
			return SessionOpenResult{}, err
		}
		if _, err := s.BranchEngine(p.Branch); err != nil {
			return SessionOpenResult{}, err
		}
	}
	sess, err := s.store.OpenSessionWith(policy.SessionSpec{Name: p.Name, Owner: c.actor.UID, Strict: p.Strict})
	if err != nil {
		return SessionOpenResult{}, fmt.Errorf("open session: %w", err)
	}
	if p.Branch != "" {
		if err := s.setSessionBranch(sess.ID, p.Branch); err != nil {
			return SessionOpenResult{}, err
		}
	}
	c.opened(sess.ID)
	s.names.opened(sess.ID, p.Name)
	s.log.Info("session opened", "session", sess.ID, "name", p.Name, "owner", sess.Owner, "strict", sess.Strict)
	return SessionOpenResult{Session: sess.ID}, nil
}

// SessionClose closes a session; its observations are dropped.
func (s *Service) SessionClose(_ context.Context, c *Caller, p SessionCloseParams) (Empty, error) {
	if p.Session == "" {
		return Empty{}, invalidParams("session.close needs a session")
	}
	if err := sessionParam(p.Session); err != nil {
		return Empty{}, err
	}
	if _, err := c.ownedSession(p.Session); err != nil {
		return Empty{}, err
	}
	if err := s.store.CloseSession(p.Session); err != nil {
		return Empty{}, fmt.Errorf("close session %s: %w", p.Session, err)
	}
	c.smu.Lock()
	if c.implicit == p.Session {
		c.implicit = ""
	}
	c.smu.Unlock()
	s.log.Info("session closed", "session", p.Session)
	return Empty{}, nil
}

// SessionBind makes a pid and its descendants act for a session on the
// mount.
func (s *Service) SessionBind(_ context.Context, c *Caller, p SessionBindParams) (SessionBindResult, error) {
	if p.Session == "" {
		return SessionBindResult{}, invalidParams("session.bind needs a session; open one with session.open")
	}
	if err := sessionParam(p.Session); err != nil {
		return SessionBindResult{}, err
	}
	if p.PID <= 0 {
		return SessionBindResult{}, invalidParams("session.bind needs a positive pid, not %d", p.PID)
	}
	if _, err := c.ownedSession(p.Session); err != nil && c.boundTo() == "" {
		return SessionBindResult{}, err
	}
	if s.cfg.Binder == nil {
		return SessionBindResult{}, &callError{obj: ErrorObject{Code: CodeUnavailable,
			Message: "this daemon serves no mount, so processes cannot be bound; use the socket methods instead"}}
	}
	// A bound peer binds to its own session (or a branch session of its
	// owner), whatever it names.
	target := s.bindTarget(c, p.Session)
	if err := s.bindOwned(c.actor.UID, target, p.PID, p.Strict); err != nil {
		return SessionBindResult{}, fmt.Errorf("bind pid %d to session %s: %w", p.PID, target, err)
	}
	if int32(p.PID) == c.actor.PID {
		c.smu.Lock()
		c.bound = target // the peer bound itself: it is its session from now on
		c.smu.Unlock()
	}
	s.store.Touch(target)
	s.log.Info("process bound", "session", target, "pid", p.PID, "strict", p.Strict)
	return SessionBindResult{Session: target}, nil
}

// Status reports the daemon's state and counters.
func (s *Service) Status(_ context.Context, c *Caller, p Empty) (StatusResult, error) {
	res := StatusResult{
		Source:   s.cfg.Source,
		Mount:    s.cfg.Mount,
		Sessions: []SessionInfo{},
	}
	for _, sess := range s.store.Sessions() {
		if !s.mayUse(c.actor.UID, sess) {
			continue // another uid's session: not listed
		}
		res.Sessions = append(res.Sessions, SessionInfo{ID: sess.ID, Name: sess.Name, Owner: sess.Owner, Opened: sess.Opened, LastUsed: sess.LastUsed,
			Strict: sess.Strict})
	}
	res.CPUSeconds = processCPUSeconds()
	if l, ok := s.cfg.Binder.(BindingLister); ok {
		for _, b := range l.Bindings() {
			sess, found, err := s.store.LookupSession(b.Session)
			if err != nil || (found && !s.mayUse(c.actor.UID, sess)) || (!found && !s.privileged(c.actor.UID)) {
				continue // another uid's (or a closed session's, shown to root and the daemon's uid)
			}
			res.Bindings = append(res.Bindings, b)
		}
	}
	return res, nil
}

// AuditLog lists audit entries (changes and refusals), newest first. A peer
// of another uid than root and the daemon's sees only its own entries.
func (s *Service) AuditLog(ctx context.Context, c *Caller, p LogParams) (LogResult, error) {
	if p.Limit < 0 {
		return LogResult{}, invalidParams("limit must be positive, not %d", p.Limit)
	}
	if p.Limit == 0 {
		p.Limit = DefaultLogLimit
	}
	q := policy.AuditQuery{Limit: p.Limit, Session: p.Session, Since: p.Since}
	if uid := c.peer().UID; !s.privileged(uid) {
		q.OnlyUID = &uid
	}
	switch {
	case p.Refused == nil:
	case *p.Refused:
		q.Kind = policy.AuditRefusals
	default:
		q.Kind = policy.AuditChanges
	}
	if p.Path != "" {
		t, err := s.workspace().resolve(ctx, "path", p.Path, p.Cwd)
		if err != nil {
			return LogResult{}, err
		}
		q.Path = t.DisplayPath
	}
	f := logFilter{exclude: p.Exclude}
	for _, u := range p.Under {
		t, err := s.workspace().resolve(ctx, "under", u, p.Cwd)
		if err != nil {
			return LogResult{}, err
		}
		f.under = append(f.under, t.DisplayPath)
	}
	for _, g := range p.Exclude {
		if _, err := path.Match(g, ""); err != nil {
			return LogResult{}, invalidParams("exclude: bad glob %q: %v", g, err)
		}
	}
	if len(f.under) > 0 || len(f.exclude) > 0 {
		q.Match = f.match
	}
	entries, err := s.store.Audit(q)
	if err != nil {
		return LogResult{}, fmt.Errorf("read the audit log: %w", err)
	}
	res := LogResult{Entries: make([]LogEntry, 0, len(entries))}
	for _, e := range entries {
		res.Entries = append(res.Entries, LogEntry{
			Seq: e.Seq, Time: e.Time, Path: e.Path, Op: e.Op,
			Session: e.Actor.Session, SessionName: s.names.name(e.Actor.Session), Channel: e.Actor.Channel, PID: e.Actor.PID, UID: e.Actor.UID,
			Before: e.Before, After: e.After, To: e.To, Unconditional: e.Unconditional, Detail: e.Detail,
			Refused: e.Refused, Reason: e.Reason, Suppressed: e.Suppressed, Branch: branch.NameOfKey(e.Key),
		})
	}
	return res, nil
}

// DefaultLogLimit is the number of audit entries fs.log returns by default.
const DefaultLogLimit = 50

// processCPUSeconds is the daemon's user and system CPU time so far (0
// when the kernel does not say).
func processCPUSeconds() float64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
