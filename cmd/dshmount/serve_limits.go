package main

import (
	"fmt"
	"log/slog"
	"os"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/control"
)

// mountDescriptors is how many file descriptors the daemon keeps for the
// mount, the store and itself beyond what the control socket may hold:
// however many clients connect, a mount operation never fails with EMFILE.
const mountDescriptors = 1024

// checkAllowUIDs refuses --allow-uid on a daemon that does not run as root:
// only root can serve another uid's requests with that uid's permissions.
func checkAllowUIDs(euid int, allow []uint32) error {
	if len(allow) == 0 || euid == 0 {
		return nil
	}
	return fmt.Errorf("--allow-uid needs a daemon running as root (this one runs as uid %d): the daemon serves an allowed uid's requests with that uid's own permissions, which only root can take; run serve as root, or let that uid run its own daemon", euid)
}

// raiseDescriptorLimit raises RLIMIT_NOFILE's soft limit to its hard limit
// and checks that it covers what the control socket may hold (cfg's
// Descriptors) plus mountDescriptors. It returns the limit.
func raiseDescriptorLimit(cfg control.Config, log *slog.Logger) (uint64, error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("read the descriptor limit: %w", err)
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = lim.Max
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &raised); err != nil {
			log.Warn("could not raise the descriptor limit to its hard limit", "soft", lim.Cur, "hard", lim.Max, "err", err)
		} else {
			lim = raised
		}
	}
	return lim.Cur, descriptorBudget(lim.Cur, cfg)
}

// descriptorBudget checks that limit descriptors cover the socket's share
// and the mount's reserve.
func descriptorBudget(limit uint64, cfg control.Config) error {
	need := uint64(cfg.Descriptors()) + mountDescriptors
	if limit >= need {
		return nil
	}
	return fmt.Errorf("the descriptor limit (%d, RLIMIT_NOFILE) is below the %d the daemon needs: %d for the control socket (its connections, watches and requests) and %d kept for the mount; lower --max-connections or raise the limit (ulimit -n, LimitNOFILE=)",
		limit, need, cfg.Descriptors(), mountDescriptors)
}

// dirDescriptors is the cap on the mount's cached directory descriptors
// under limit: what the socket's share and the mount's reserve leave. A cap
// the flag asked for that does not fit is an error; the default is lowered
// to fit.
func dirDescriptors(limit uint64, cfg control.Config, want int, explicit bool) (int, error) {
	need := uint64(cfg.Descriptors()) + mountDescriptors
	if want <= 0 {
		return 0, nil
	}
	if limit >= need+uint64(want) {
		return want, nil
	}
	if explicit {
		return 0, fmt.Errorf("the descriptor limit (%d, RLIMIT_NOFILE) is below the %d the daemon needs: %d for the control socket, %d kept for the mount and %d cached directory descriptors (--dir-fds); lower --dir-fds or raise the limit",
			limit, need+uint64(want), cfg.Descriptors(), mountDescriptors, want)
	}
	if limit <= need {
		return 0, nil
	}
	return int(min(limit-need, uint64(want))), nil
}

// openStateDirForAllowed lets allowed uids search the state directory when
// the socket lives below it (it stays unlistable; the database directory
// below it stays private).
func openStateDirForAllowed(c serveConfig) error {
	if len(c.AllowUIDs) == 0 || !within(c.Socket, c.StateDir) {
		return nil
	}
	fi, err := os.Stat(c.StateDir)
	if err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o011 != 0o011 {
		if err := os.Chmod(c.StateDir, perm|0o011); err != nil {
			return fmt.Errorf("let the allowed uids search the state directory %s: %w", c.StateDir, err)
		}
	}
	return nil
}
