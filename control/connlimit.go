package control

import (
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// Connection limits per uid. Every uid other than root and the daemon's
// own may hold at most MaxConnectionsPerUID connections, and those uids
// together at most MaxConnections less a reserve of MaxConnectionsPerUID:
// one allowed uid cannot lock everyone else out, and the daemon's owner
// and root can always reach it (up to MaxConnections).

// connLimitUnknown stands for a peer whose uid could not be read: it is
// counted as an unprivileged uid of its own (serve refuses it next).
const connLimitUnknown = ^uint32(0)

// connPeer reads a new connection's peer credentials (SO_PEERCRED) and
// the uid it counts against.
func (s *Server) connPeer(nc *net.UnixConn) (*unix.Ucred, uint32, error) {
	lookup := peerCred
	if s.hooks.peerCred != nil {
		lookup = s.hooks.peerCred
	}
	cred, err := lookup(nc)
	if err != nil {
		return nil, connLimitUnknown, err
	}
	return cred, cred.Uid, nil
}

// overLimit says which limit a new connection of uid would pass, or ""
// when it may be served; s.mu is held.
func (s *Server) overLimit(uid uint32) string {
	total, perUID := s.cfg.MaxConnections, s.cfg.MaxConnectionsPerUID
	if len(s.conns) >= total {
		return fmt.Sprintf("the daemon already serves %d connections (its --max-connections); close idle connections or retry later", total)
	}
	if s.privileged(uid) {
		return ""
	}
	if n := s.byUID[uid]; n >= perUID {
		return fmt.Sprintf("uid %d already holds %d connections (the daemon's --max-connections-per-uid); close idle connections or retry later", uid, n)
	}
	others := len(s.conns)
	for u, n := range s.byUID {
		if s.privileged(u) {
			others -= n
		}
	}
	if others >= total-perUID {
		return fmt.Sprintf("other uids than root and the daemon's already hold %d connections (--max-connections %d less a reserve of %d, the --max-connections-per-uid, for root and the daemon's uid); retry later", others, total, perUID)
	}
	return ""
}

// refuseBusy answers a connection over a limit with one error line saying
// which, and closes it; a peer that does not read cannot hold the accept
// loop.
func (s *Server) refuseBusy(nc *net.UnixConn, uid uint32, why string) {
	s.log.Warn("connection refused: too many connections", "uid", uid, "why", why)
	b := encodeResponse(nil, nil, &ErrorObject{Code: CodeUnavailable, Message: why})
	_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = nc.Write(append(b, '\n'))
	_ = nc.Close()
}

// privileged reports whether uid is root or the daemon's own uid.
func (s *Server) privileged(uid uint32) bool { return uid == 0 || uid == s.uid }
