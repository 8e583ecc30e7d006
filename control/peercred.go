package control

import (
	"fmt"
	"net"
	"slices"

	"golang.org/x/sys/unix"
)

// peerCred reads the SO_PEERCRED credentials of a connected peer.
func peerCred(nc *net.UnixConn) (*unix.Ucred, error) {
	raw, err := nc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, fmt.Errorf("peer credentials: %w", err)
	}
	if credErr != nil {
		return nil, fmt.Errorf("peer credentials: SO_PEERCRED: %w", credErr)
	}
	return cred, nil
}

// checkPeer allows root, the daemon's own uid and the extra allowed uids.
func checkPeer(cred *unix.Ucred, daemonUID uint32, allow []uint32) error {
	if cred == nil {
		return fmt.Errorf("peer credentials unavailable; connect over a local Unix socket")
	}
	if cred.Uid == 0 || cred.Uid == daemonUID || slices.Contains(allow, cred.Uid) {
		return nil
	}
	return fmt.Errorf("uid %d (pid %d) may not use this control socket; the daemon runs as uid %d: connect as that user, or restart it with --allow-uid %d",
		cred.Uid, cred.Pid, daemonUID, cred.Uid)
}
