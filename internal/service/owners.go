package service

import (
	"fmt"

	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

// privileged reports whether uid may act on every session: root and the
// daemon's own uid.
func (s *Service) privileged(uid uint32) bool { return uid == 0 || uid == s.uid }

// mayUse reports whether a peer of uid may use, bind to, close or list a
// session: its owner, root and the daemon's own uid may.
func (s *Service) mayUse(uid uint32, sess policy.Session) bool { return s.owns(uid, sess.Owner) }

// owns reports whether a peer of uid may act on what owner made (a session,
// a branch): owner itself, root and the daemon's own uid may.
func (s *Service) owns(uid, owner uint32) bool { return s.privileged(uid) || uid == owner }

// ownedBranch returns branch name if the connection's peer may act on it
// (list, diff, commit, discard, mount, unmount, read or write in it): an
// unknown branch is FS_NOT_FOUND, another uid's FS_PERMISSION_DENIED.
func (s *Service) ownedBranch(c *Caller, name string) (*branch.Branch, error) {
	if s.br.mgr == nil {
		return nil, errNoBranches
	}
	b, err := s.br.mgr.Get(name)
	if err != nil {
		return nil, err
	}
	if uid := c.peer().UID; !s.owns(uid, b.Owner()) {
		return nil, &provider.Error{Code: provider.CodePermissionDenied, Op: "branch",
			Message: fmt.Sprintf("branch %s belongs to uid %d, not to you (uid %d); create a branch of your own",
				name, b.Owner(), uid)}
	}
	return b, nil
}

// ownedSession returns an open session the connection's peer may act on:
// an unknown session is invalid params, another uid's FS_PERMISSION_DENIED.
func (c *Caller) ownedSession(id policy.SessionID) (policy.Session, error) {
	sess, ok, err := c.s.store.LookupSession(id)
	if err != nil {
		return policy.Session{}, err
	}
	if !ok {
		return policy.Session{}, unknownSession(id)
	}
	if !c.s.mayUse(c.actor.UID, sess) {
		return policy.Session{}, &provider.Error{Code: provider.CodePermissionDenied, Op: "session",
			Message: fmt.Sprintf("session %s belongs to uid %d, not to you (uid %d); open a session of your own",
				id, sess.Owner, c.actor.UID)}
	}
	return sess, nil
}

// unknownSession is the FS_INVALID_ARGUMENT error for a session id the
// daemon does not know: never opened, or closed since.
func unknownSession(id policy.SessionID) error {
	msg := fmt.Sprintf("unknown session %s: it was never opened or has been closed; open a new session", id)
	return &callError{obj: ErrorObject{Code: CodeInvalidParams, Message: msg,
		Data: &ErrorData{Code: provider.CodeInvalidArgument, Message: msg}}}
}
