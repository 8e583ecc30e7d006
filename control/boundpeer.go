package control

import (
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// A bound process is its session on every channel. A process bound to
// session S (dshmount exec, session.bind) that connects to the socket, the
// CLI and an MCP server it starts included, asks as S: a request naming
// another session (or none) still runs as S, and the mismatch is logged once
// per connection; S may not skip the guard (policy.Actor.Bound); and it
// cannot bind itself or any process to another session (session.bind binds
// to S instead), except to a branch session of the same owner, which cannot
// touch the workspace before a guarded commit.

// peerSession returns the session the connecting process pid is bound to
// (empty: unbound). The peer is pinned by a pidfd (SO_PEERPIDFD, else
// pidfd_open) while the binding is looked up, so a pid reused meanwhile is
// never answered for: a peer that has exited is an error.
func (s *Server) peerSession(nc *net.UnixConn, pid int32) (SessionID, error) {
	if s.svc.Binder() == nil || pid <= 0 {
		return "", nil
	}
	pidfd, err := peerPidfd(nc, int(pid))
	if err != nil {
		return "", err
	}
	defer unix.Close(pidfd)
	session, bound := s.svc.Binder().SessionOf(int(pid))
	if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil && !errors.Is(err, unix.EPERM) {
		return "", fmt.Errorf("the connecting process (pid %d) exited before its session could be told: %w", pid, err)
	}
	if !bound {
		return "", nil
	}
	return session, nil
}

// peerPidfd returns a pidfd of the peer: SO_PEERPIDFD names the very process
// that connected; kernels without it (before 6.5) get pidfd_open(pid).
func peerPidfd(nc *net.UnixConn, pid int) (int, error) {
	raw, err := nc.SyscallConn()
	if err != nil {
		return -1, fmt.Errorf("peer pidfd: %w", err)
	}
	fd, ferr := -1, error(nil)
	if err := raw.Control(func(s uintptr) {
		fd, ferr = unix.GetsockoptInt(int(s), unix.SOL_SOCKET, unix.SO_PEERPIDFD)
	}); err != nil {
		return -1, fmt.Errorf("peer pidfd: %w", err)
	}
	if ferr == nil {
		return fd, nil
	}
	if !errors.Is(ferr, unix.ENOPROTOOPT) && !errors.Is(ferr, unix.EINVAL) {
		return -1, fmt.Errorf("peer pidfd: SO_PEERPIDFD: %w", ferr)
	}
	fd, err = unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1, fmt.Errorf("peer pidfd: open pid %d: %w", pid, err)
	}
	return fd, nil
}
