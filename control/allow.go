package control

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// openForAllowed lets the uids of Config.AllowUIDs reach the socket: the
// socket file becomes 0666 (SO_PEERCRED still decides who is served) and
// the socket's directory, when the daemon owns it, searchable by all (not
// listable). Then each allowed uid must be able to connect, checked with
// its own credentials; a directory above that it cannot search is an
// error naming it.
func (s *Server) openForAllowed() error {
	path := s.cfg.SocketPath
	if err := os.Chmod(path, 0o666); err != nil {
		return fmt.Errorf("control: open socket %s to the allowed uids: %w", path, err)
	}
	dir := filepath.Dir(path)
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return fmt.Errorf("control: socket directory %s: %w", dir, err)
	}
	if st.Uid == s.uid && st.Mode&0o011 != 0o011 {
		if err := os.Chmod(dir, os.FileMode(st.Mode&0o7777|0o011)); err != nil {
			return fmt.Errorf("control: let the allowed uids search %s: %w", dir, err)
		}
	}
	for _, uid := range s.cfg.AllowUIDs {
		if err := s.reachable(path, userCreds(uid)); err != nil {
			return err
		}
	}
	return nil
}

// reachable checks, with c's credentials, that the socket at path can be
// connected to (search on every directory above it, write on the socket).
func (s *Server) reachable(path string, c *creds) error {
	var blocked string
	var err error
	if rerr := c.run(s.self, func() {
		if err = unix.Faccessat2(unix.AT_FDCWD, path, unix.W_OK, unix.AT_EACCESS); err == nil {
			return
		}
		for d := filepath.Dir(path); ; d = filepath.Dir(d) {
			if unix.Faccessat2(unix.AT_FDCWD, d, unix.X_OK, unix.AT_EACCESS) != nil {
				blocked = d // the deepest one wins: keep going up
			}
			if d == "/" || d == "." {
				break
			}
		}
	}); rerr != nil {
		return fmt.Errorf("control: check that uid %d can reach the socket: %w", c.uid, rerr)
	}
	if err == nil {
		return nil
	}
	if blocked != "" {
		return fmt.Errorf("control: --allow-uid %d: that uid cannot reach the socket %s because it may not search the directory %s; pass a --socket in a directory it can reach (e.g. /run/dshmount/NAME.sock) or let it search %s (chmod o+x)",
			c.uid, path, blocked, blocked)
	}
	if errors.Is(err, syscall.EACCES) {
		return fmt.Errorf("control: --allow-uid %d: that uid may not connect to the socket %s: %w", c.uid, path, err)
	}
	return fmt.Errorf("control: --allow-uid %d: check the socket %s: %w", c.uid, path, err)
}

// userCreds returns the filesystem credentials of a user from the user
// database: primary group and supplementary groups. A uid without an entry
// gets its own number as its group and no others.
func userCreds(uid uint32) *creds {
	c := &creds{uid: uid, gid: uid}
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return c
	}
	if g, err := strconv.ParseUint(u.Gid, 10, 32); err == nil {
		c.gid = uint32(g)
	}
	ids, err := u.GroupIds()
	if err != nil {
		return c
	}
	for _, id := range ids {
		if g, err := strconv.ParseUint(id, 10, 32); err == nil {
			c.groups = append(c.groups, uint32(g))
		}
	}
	return c
}
