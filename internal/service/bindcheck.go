package service

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

// bindOwned binds pid to session for a peer of uid callerUID. A caller other
// than root binds only its own processes: every uid of the target (real,
// effective, saved, filesystem) must be the caller's. The target is pinned
// with a pidfd while its uids are read, so a pid reused meanwhile is
// refused rather than bound.
func (s *Service) bindOwned(callerUID uint32, session policy.SessionID, pid int, strict bool) error {
	if callerUID != 0 {
		if err := checkProcessOwner(pid, callerUID); err != nil {
			return err
		}
	}
	bind := s.cfg.Binder.Bind
	if strict {
		sb, ok := s.cfg.Binder.(StrictBinder)
		if !ok {
			return &callError{obj: ErrorObject{Code: CodeUnavailable,
				Message: "this daemon cannot make strict bindings; open a strict session instead (session.open {strict})"}}
		}
		bind = sb.BindStrict
	}
	if err := bind(session, pid); err != nil {
		return fmt.Errorf("bind pid %d to session %s: %w", pid, session, err)
	}
	return nil
}

// checkProcessOwner refuses (FS_PERMISSION_DENIED) a pid whose uids are not
// all uid.
func checkProcessOwner(pid int, uid uint32) error {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fmt.Errorf("bind pid %d: open the process: %w", pid, err)
	}
	defer unix.Close(pidfd)
	uids, err := processUIDs(pid)
	if err != nil {
		return fmt.Errorf("bind pid %d: %w", pid, err)
	}
	// The pidfd still names a live process: the status read was its own.
	if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
		return fmt.Errorf("bind pid %d: the process exited while it was checked: %w", pid, err)
	}
	for _, u := range uids {
		if u != uid {
			return &provider.Error{Code: provider.CodePermissionDenied, Op: "session.bind",
				Message: fmt.Sprintf("pid %d runs as uid %d, not as you (uid %d); bind only your own processes", pid, u, uid)}
		}
	}
	return nil
}

// processUIDs reads the real, effective, saved and filesystem uids of pid.
func processUIDs(pid int) ([]uint32, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, fmt.Errorf("read the process status: %w", err)
	}
	return StatusIDs(string(b), "Uid")
}

// StatusIDs parses a "Uid:" or "Gid:" line of /proc/PID/status (four ids),
// or the "Groups:" line (any number).
func StatusIDs(status, field string) ([]uint32, error) {
	for line := range strings.SplitSeq(status, "\n") {
		rest, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		var ids []uint32
		for _, f := range strings.Fields(rest) {
			n, err := strconv.ParseUint(f, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("process status: bad %s %q", field, f)
			}
			ids = append(ids, uint32(n))
		}
		if field != "Groups" && len(ids) != 4 {
			return nil, fmt.Errorf("process status: %s has %d ids, not 4", field, len(ids))
		}
		return ids, nil
	}
	return nil, errors.New("process status: no " + field + " line")
}

// bindTarget is the session a session.bind of the peer binds to: the named
// one, unless the peer is bound to another session; then its own, except
// for a branch session of the same owner (exec --branch inside a bound
// tree).
func (s *Service) bindTarget(c *Caller, named policy.SessionID) policy.SessionID {
	bound := c.boundTo()
	if bound == "" || named == bound {
		return named
	}
	if s.br.mgr != nil && s.br.mgr.SessionBranch(string(named)) != "" {
		own, ok1 := s.store.Session(bound)
		br, ok2 := s.store.Session(named)
		if ok1 && ok2 && own.Owner == br.Owner {
			return named
		}
	}
	return c.asBound(named)
}
