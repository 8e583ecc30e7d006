package integration

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Helpers of the POSIX conformance table: credentials per thread, the case
// directory, and the outcome that is compared between the disk and the
// mount.

// cred is a user the table runs as.
type cred struct {
	name     string
	uid, gid int
}

var (
	credRoot   = cred{"root", 0, 0}
	credNobody = cred{"nobody", 65534, 65534}
	// credOther owns files that the persona does not (sticky cases).
	credOther = cred{"other", 65533, 65533}
)

// asUser runs fn on a thread whose credentials are c's (no supplementary
// groups). The goroutine keeps its thread locked and exits, so the thread
// with the changed credentials dies with it and no other goroutine runs on
// it. fn must do its system calls on the calling goroutine.
func asUser(c cred, fn func() error) error {
	if c.uid == 0 {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
			errc <- fmt.Errorf("setgroups: %w", e)
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(c.gid), uintptr(c.gid), uintptr(c.gid)); e != 0 {
			errc <- fmt.Errorf("setresgid %d: %w", c.gid, e)
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(c.uid), uintptr(c.uid), uintptr(c.uid)); e != 0 {
			errc <- fmt.Errorf("setresuid %d: %w", c.uid, e)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// caseDir is the directory one case runs in (on the disk or on the mount).
type caseDir struct {
	dir     string
	persona cred
}

func (c *caseDir) p(rel string) string { return filepath.Join(c.dir, rel) }

// file creates rel with mode (chmod after creation, so the umask does not
// apply) and some content.
func (c *caseDir) file(rel string, mode uint32) error {
	fd, err := unix.Open(c.p(rel), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", rel, err)
	}
	_, werr := unix.Write(fd, []byte("content\n"))
	cerr := unix.Close(fd)
	if err := errors.Join(werr, cerr); err != nil {
		return fmt.Errorf("write %s: %w", rel, err)
	}
	return c.chmod(rel, mode)
}

// dir creates the directory rel with mode.
func (c *caseDir) mkdir(rel string, mode uint32) error {
	if err := unix.Mkdir(c.p(rel), 0o700); err != nil {
		return fmt.Errorf("mkdir %s: %w", rel, err)
	}
	return c.chmod(rel, mode)
}

func (c *caseDir) chmod(rel string, mode uint32) error {
	if err := unix.Chmod(c.p(rel), mode); err != nil {
		return fmt.Errorf("chmod %s %o: %w", rel, mode, err)
	}
	return nil
}

func (c *caseDir) chown(rel string, o cred) error {
	if err := unix.Lchown(c.p(rel), o.uid, o.gid); err != nil {
		return fmt.Errorf("chown %s %d:%d: %w", rel, o.uid, o.gid, err)
	}
	return nil
}

// writeByte opens rel for writing (no truncation) and writes one byte.
func (c *caseDir) writeByte(rel string) error {
	fd, err := unix.Open(c.p(rel), unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	_, werr := unix.Pwrite(fd, []byte("x"), 0)
	return errors.Join(werr, unix.Close(fd))
}

// create opens rel with O_CREAT and flags and closes it.
func (c *caseDir) create(rel string, flags int, mode uint32) error {
	fd, err := unix.Open(c.p(rel), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC|flags, mode)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// open opens rel with flags and closes it.
func (c *caseDir) open(rel string, flags int) error {
	fd, err := unix.Open(c.p(rel), flags|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// list opens the directory rel and reads its entries.
func (c *caseDir) list(rel string) error {
	fd, err := unix.Open(c.p(rel), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	buf := make([]byte, 4096)
	_, rerr := unix.Getdents(fd, buf)
	return errors.Join(rerr, unix.Close(fd))
}

// withUmask runs fn with the process umask set to mask. The umask is
// shared by every thread of the process; the table runs one case at a time.
func withUmask(mask int, fn func() error) error {
	old := unix.Umask(mask)
	defer unix.Umask(old)
	return fn()
}

// all runs steps in order and returns the first error.
func all(steps ...func() error) error {
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	return nil
}

// statSummary is what the table compares about a path after a case.
type statSummary struct {
	Type  string
	Perm  string
	Nlink uint64
	Size  int64
	UID   uint32
	GID   uint32
}

func (s statSummary) String() string {
	return fmt.Sprintf("%s %s nlink=%d size=%d %d:%d", s.Type, s.Perm, s.Nlink, s.Size, s.UID, s.GID)
}

// lstatSummary stats path without following a final symlink. Directory
// sizes depend on the history of the directory's blocks, so they are left
// out.
func lstatSummary(path string) (statSummary, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return statSummary{}, err
	}
	s := statSummary{Perm: fmt.Sprintf("%04o", st.Mode&0o7777), Nlink: st.Nlink, Size: st.Size, UID: st.Uid, GID: st.Gid}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		s.Type = "file"
	case unix.S_IFDIR:
		s.Type, s.Size = "dir", 0
	case unix.S_IFLNK:
		s.Type = "symlink"
	default:
		s.Type = fmt.Sprintf("type %o", st.Mode&unix.S_IFMT)
	}
	return s, nil
}

// errText names an error by its errno ("ok" for nil).
func errText(err error) string {
	if err == nil {
		return "ok"
	}
	var errno unix.Errno
	if errors.As(err, &errno) {
		return unix.ErrnoName(errno)
	}
	return err.Error()
}

// outcome is the result of one case in one directory.
type outcome struct {
	Setup string
	Op    string
	Stats []string // "rel: summary" or "rel: ERRNO"
}

func (o outcome) String() string {
	return fmt.Sprintf("setup=%s op=%s [%s]", o.Setup, o.Op, strings.Join(o.Stats, "; "))
}
