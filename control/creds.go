package control

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"unsafe"

	"github.com/dshmount/dshmount/internal/service"
	"golang.org/x/sys/unix"
)

// creds are the filesystem credentials a request runs with: the fsuid and
// fsgid the kernel checks file access against, and the supplementary
// groups.
type creds struct {
	uid, gid uint32
	groups   []uint32
}

// selfCreds returns the daemon's own filesystem credentials.
func selfCreds() (*creds, error) {
	gs, err := unix.Getgroups()
	if err != nil {
		return nil, fmt.Errorf("read the daemon's groups: %w", err)
	}
	c := &creds{uid: uint32(unix.Geteuid()), gid: uint32(unix.Getegid())}
	for _, g := range gs {
		c.groups = append(c.groups, uint32(g))
	}
	return c, nil
}

// run runs fn on an OS thread of its own whose filesystem credentials are
// c, and gives the thread back with self's restored. Only that thread
// changes (raw system calls: the libc and Go wrappers would change every
// thread of the daemon). A thread whose credentials cannot be restored is
// never given back: it ends with the goroutine that locked it.
func (c *creds) run(self *creds, fn func()) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		err := c.apply()
		if err == nil {
			fn()
		}
		if rerr := self.apply(); rerr == nil {
			runtime.UnlockOSThread()
		} else if err == nil {
			err = fmt.Errorf("restore the daemon's credentials (the thread is discarded): %w", rerr)
		}
		errc <- err
	}()
	return <-errc
}

// apply sets the calling thread's supplementary groups, fsgid and fsuid to
// c and checks that they took.
func (c *creds) apply() error {
	var p unsafe.Pointer
	if len(c.groups) > 0 {
		p = unsafe.Pointer(&c.groups[0])
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(c.groups)), uintptr(p), 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	unix.RawSyscall(unix.SYS_SETFSGID, uintptr(c.gid), 0, 0)
	unix.RawSyscall(unix.SYS_SETFSUID, uintptr(c.uid), 0, 0)
	// setfsuid and setfsgid answer the previous value, never an error; an
	// invalid id changes nothing and answers the current one.
	const invalid = ^uint32(0)
	if got, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, uintptr(invalid), 0, 0); uint32(got) != c.gid {
		return fmt.Errorf("setfsgid %d: the thread kept fsgid %d", c.gid, got)
	}
	if got, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, uintptr(invalid), 0, 0); uint32(got) != c.uid {
		return fmt.Errorf("setfsuid %d: the thread kept fsuid %d", c.uid, got)
	}
	return nil
}

// peerCreds returns the filesystem credentials of a peer: its uid and gid
// from SO_PEERCRED and its supplementary groups from SO_PEERGROUPS (all as
// of connect), or from /proc/PID/status on kernels without SO_PEERGROUPS.
func peerCreds(nc *net.UnixConn, cred *unix.Ucred) (*creds, error) {
	groups, err := peerGroups(nc)
	if errors.Is(err, unix.ENOPROTOOPT) {
		groups, err = procGroups(int(cred.Pid))
	}
	if err != nil {
		return nil, fmt.Errorf("supplementary groups of uid %d (pid %d): %w", cred.Uid, cred.Pid, err)
	}
	return &creds{uid: cred.Uid, gid: cred.Gid, groups: groups}, nil
}

// peerGroups reads SO_PEERGROUPS.
func peerGroups(nc *net.UnixConn) ([]uint32, error) {
	raw, err := nc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var groups []uint32
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		groups, gerr = getPeerGroups(int(fd))
	}); err != nil {
		return nil, err
	}
	return groups, gerr
}

// getPeerGroups calls getsockopt(SO_PEERGROUPS), growing the buffer on
// ERANGE.
func getPeerGroups(fd int) ([]uint32, error) {
	buf := make([]uint32, 64)
	for {
		size := uint32(len(buf) * 4)
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&size)), 0)
		switch {
		case e == 0:
			return buf[:size/4], nil
		case e == unix.ERANGE && int(size/4) > len(buf):
			buf = make([]uint32, size/4)
		default:
			return nil, fmt.Errorf("getsockopt SO_PEERGROUPS: %w", e)
		}
	}
}

// procGroups reads the Groups line of /proc/PID/status.
func procGroups(pid int) ([]uint32, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, fmt.Errorf("read the process status: %w", err)
	}
	return service.StatusIDs(string(b), "Groups")
}
