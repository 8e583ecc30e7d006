package fuse

import (
	"errors"
	"io"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

// maxRenameTree bounds the entries below a directory a bound session's
// rename checks; a larger tree is refused with EXDEV, on which mv moves it
// entry by entry, each guarded on its own.
const maxRenameTree = 100_000

// guardTree decides whether a bound session may rename the directory e
// (workspace path rel): moving it moves every entry below out from under
// its name, so it needs the right to change each of them (guardChange's
// table for each non-directory entry). The decision reads the records, not
// the bytes: an entry's current version is the digest cache's for its stat
// (size, mtime, ctime: any write moves it), hashed only when the cache has
// none it trusts; an empty directory passes at once.
func (m *mountState) guardTree(a policy.Actor, rel string, e entry) syscall.Errno {
	if a.Session == "" {
		return 0
	}
	fd, err := unix.Openat(e.dir, e.name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return errnoOf(err)
	}
	start := time.Now()
	w := treeWalk{m: m, a: a}
	errno := w.dir(fd, rel)
	m.log.Debug("directory rename checked", "path", rel, "entries", w.entries, "hashed", w.hashed,
		"took", time.Since(start), "errno", errno)
	return errno
}

// treeWalk is one guardTree walk: what it has counted so far.
type treeWalk struct {
	m       *mountState
	a       policy.Actor
	entries int // entries checked
	hashed  int // regular files whose version was not cached
}

// dir checks the entries of the directory open as fd (path rel) and
// closes fd.
func (w *treeWalk) dir(fd int, rel string) syscall.Errno {
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	for {
		names, err := f.Readdirnames(512)
		for _, name := range names {
			if errno := w.entry(fd, rel, name); errno != 0 {
				return errno
			}
		}
		if errors.Is(err, io.EOF) {
			return 0
		}
		if err != nil {
			return errnoOf(err)
		}
	}
}

// entry checks the entry name of the directory dirfd (path dirRel).
func (w *treeWalk) entry(dirfd int, dirRel, name string) syscall.Errno {
	if w.entries++; w.entries > maxRenameTree {
		w.m.log.Info("mount rename refused", "path", dirRel, "session", w.a.Session,
			"reason", "the directory holds more entries than a rename checks at once", "max", maxRenameTree)
		return syscall.EXDEV
	}
	rel := joinRel(dirRel, name)
	bs, err := statAt(dirfd, name, false)
	if errors.Is(err, unix.ENOENT) {
		return 0 // gone meanwhile: nothing to move
	}
	if err != nil {
		return errnoOf(err)
	}
	if isDir(&bs.st) {
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return errnoOf(err)
		}
		return w.dir(fd, rel)
	}
	version := func() (provider.Version, error) {
		if cur, ok := w.m.vers.Cached(&bs.st); ok {
			return cur, nil
		}
		w.hashed++
		return w.m.versionOfEntry(entry{dir: dirfd, name: name}, &bs.st)
	}
	return w.m.checkBelow(w.a, w.m.target(rel), policy.FileNow{Version: version,
		Ctime: time.Unix(bs.st.Ctim.Unix()), Links: uint64(bs.st.Nlink)})
}

// checkBelow is checkChange for an entry below a directory being renamed:
// its version is read (from the digest cache, else hashed) only when the
// decision needs it.
func (m *mountState) checkBelow(a policy.Actor, t provider.Target, f policy.FileNow) syscall.Errno {
	if a.PID > 0 {
		a.PID = m.caller(uint32(a.PID)).pid
	}
	err := m.cfg.Engine.CheckMountBelow(a, policy.OpRename, t, f)
	if err == nil {
		return 0
	}
	errno := errnoOfGuard(err)
	m.log.Info("mount rename refused", "path", t.DisplayPath, "session", a.Session, "pid", a.PID,
		"code", provider.CodeOf(err), "errno", errno.Error(), "reason", "it is below the directory being renamed: "+provider.MessageOf(err))
	return errno
}
