package fuse

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/mountinfo"
)

// fusectlDir is where the kernel's fusectl filesystem lists FUSE
// connections, one directory per connection named by its device minor.
const fusectlDir = "/sys/fs/fuse/connections"

// fusectlMagic is FUSE_CTL_SUPER_MAGIC (linux/magic.h), which x/sys/unix
// does not define.
const fusectlMagic = 0x65735543

// ErrNoConnection reports a FUSE connection that no longer exists.
var ErrNoConnection = errors.New("no such FUSE connection")

// MountDevice returns the device ("major:minor", as in mountinfo) of the
// mount at mountpoint, without touching the mount itself: a hung connection
// would block any system call on it. It returns "" when nothing is mounted
// there.
func MountDevice(mountpoint string) (string, error) {
	device, _, err := mountEntry(mountpoint)
	return device, err
}

// mountEntry returns the device and filesystem type of the visible mount
// at mountpoint ("" when none).
func mountEntry(mountpoint string) (device, fstype string, err error) {
	e, ok, err := mountinfo.Find(mountpoint)
	if err != nil || !ok {
		return "", "", err
	}
	return e.Device, e.FSType, nil
}

// AbortMount aborts the FUSE connection of the mount at mountpoint and
// detaches the mount: the way out of a mount whose daemon no longer
// answers (every program waiting on it gets an error). It refuses
// anything but a FUSE mount.
func AbortMount(mountpoint string) error {
	mp, err := filepath.Abs(mountpoint)
	if err != nil {
		return fmt.Errorf("abort %s: %w", mountpoint, err)
	}
	device, fstype, err := mountEntry(mp)
	if err != nil {
		return err
	}
	if device == "" {
		return fmt.Errorf("abort %s: not a mount point", mp)
	}
	if fstype != "fuse" && !strings.HasPrefix(fstype, "fuse.") {
		return fmt.Errorf("abort %s: a %s mount, not a FUSE mount; refusing", mp, fstype)
	}
	if err := AbortConnection(device); err != nil && !errors.Is(err, ErrNoConnection) {
		return fmt.Errorf("abort %s: %w", mp, err)
	}
	if err := unmountPath(mp, true, euidIsRoot()); err != nil {
		return fmt.Errorf("detach %s after aborting its connection: %w", mp, err)
	}
	return nil
}

// AbortConnection aborts the FUSE connection of device ("major:minor") the
// way `echo 1 > /sys/fs/fuse/connections/MINOR/abort` does: every request
// waiting on it fails with ENOTCONN and its mount becomes a dead mount that
// CleanupStale detaches. It is the one way out when the daemon serving the
// connection was killed but cannot exit (a thread stuck in the kernel
// waiting for a lock held by a request only the dead daemon could answer).
// The fusectl filesystem is mounted first when it is not (root only).
func AbortConnection(device string) error {
	_, minor, ok := strings.Cut(device, ":")
	if !ok || minor == "" || strings.ContainsAny(minor, "/.") {
		return fmt.Errorf("abort FUSE connection: bad device %q", device)
	}
	conn := filepath.Join(fusectlDir, minor)
	if _, err := os.Stat(conn); err != nil {
		if !fusectlMounted() {
			if merr := unix.Mount("fusectl", fusectlDir, "fusectl", 0, ""); merr != nil {
				return fmt.Errorf("abort FUSE connection %s: fusectl is not mounted on %s and mounting it failed: %w", device, fusectlDir, merr)
			}
		}
		if _, err := os.Stat(conn); err != nil {
			return fmt.Errorf("abort FUSE connection %s: %w", device, ErrNoConnection)
		}
	}
	if err := os.WriteFile(filepath.Join(conn, "abort"), []byte("1"), 0); err != nil {
		return fmt.Errorf("abort FUSE connection %s: %w", device, err)
	}
	return nil
}

// fusectlMounted reports whether fusectl is mounted on fusectlDir.
func fusectlMounted() bool {
	var sfs unix.Statfs_t
	return unix.Statfs(fusectlDir, &sfs) == nil && sfs.Type == fusectlMagic
}
