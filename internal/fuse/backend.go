package fuse

import (
	"context"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/provider"
)

// backend is the seam between the node code and where a path lives: the
// workspace's backing directory (wsBackend: every path below the root
// descriptor) or a branch's layers over it (branchBackend, branchfs.go).
// The node code keeps the guard, records and kernel bookkeeping; it asks
// the backend for the backing entry to read a path from, to prepare a path
// for a change in place, and to make, remove and rename names. Entries are
// always (directory descriptor, name) pairs reached without following a
// symbolic link, whichever layer holds them. Its operations are quick: an
// interrupt of the calling program (ctx ending) does not cut them short.
type backend interface {
	// entry is the backing entry rel is read from; the name need not
	// exist (a stat of it is ENOENT), but its directory must.
	entry(rel string) (entry, error)
	// stat stats rel without following a final link.
	stat(rel string) (backingStat, error)
	// open opens rel with flags. Flags that write (or O_CREAT|O_EXCL:
	// create, with mode) make rel changeable first; the caller has guarded.
	open(rel string, flags int, mode uint32) (int, error)
	// prepare makes the existing rel changeable in place (a metadata
	// change or a truncation, to size 0 with empty); entry then returns
	// the entry to change.
	prepare(rel string, empty bool) error
	// changed tells the backend the bytes or the mode of rel changed
	// through the mount.
	changed(rel string)
	// mkdir makes the directory rel and returns its entry.
	mkdir(ctx context.Context, rel string, mode uint32) (entry, error)
	// symlink makes rel a symbolic link to target and returns its entry.
	symlink(ctx context.Context, target, rel string) (entry, error)
	// mknod makes the special file rel and returns its entry.
	mknod(rel string, mode, rdev uint32) (entry, error)
	// link gives the file srcRel the second name dstRel.
	link(srcRel, dstRel string) error
	// unlink removes the non-directory rel, whose entry is e.
	unlink(ctx context.Context, rel string, e entry) error
	// rmdir removes the empty directory rel, whose entry is e.
	rmdir(ctx context.Context, rel string, e entry) error
	// rename renames (renameat2 flags) srcRel to dstRel, whose entries are
	// srcE and dstE.
	rename(ctx context.Context, srcRel, dstRel string, srcE, dstE entry, flags uint32) error
	// moved returns the entry of rel after a rename whose entry for it
	// was e (the caller closes it).
	moved(rel string, e entry) (entry, error)
	// dirStream opens the directory rel for listing.
	dirStream(n *node, rel string) (fs.DirStream, error)
	// carried is the identity the mount gives a backing file that took
	// the place of another (a copy-up), if any.
	carried(bs *backingStat) (fs.StableAttr, bool)
	// target is the provider target of rel (guards, records).
	target(rel string) provider.Target
	// inPlace reports whether a file just opened at rel is the one its
	// changes go to: only such a file may be offered for passthrough (the
	// kernel keeps one backing file per inode) and a read-only handle on
	// any other follows the file's copy-up (handle.follow).
	inPlace(rel string) bool
	// copiedUp reports whether the file with identity id moved to another
	// backing file since it was first opened (a copy-up).
	copiedUp(id fs.StableAttr) bool
}

// wsBackend serves the workspace: every path is below the root descriptor.
type wsBackend struct{ m *mountState }

var _ backend = wsBackend{}

func (w wsBackend) entry(rel string) (entry, error)            { return w.m.entryAt(rel) }
func (w wsBackend) stat(rel string) (backingStat, error)       { return w.m.statRel(rel) }
func (w wsBackend) prepare(string, bool) error                 { return nil }
func (w wsBackend) changed(string)                             {}
func (w wsBackend) target(rel string) provider.Target          { return w.m.cfg.Local.TargetForRel(rel) }
func (w wsBackend) link(srcRel, dstRel string) error           { return w.m.linkRel(srcRel, dstRel) }
func (w wsBackend) carried(*backingStat) (fs.StableAttr, bool) { return fs.StableAttr{}, false }
func (w wsBackend) inPlace(string) bool                        { return true }
func (w wsBackend) copiedUp(fs.StableAttr) bool                { return false }

func (w wsBackend) open(rel string, flags int, mode uint32) (int, error) {
	return w.m.openRel(rel, flags, mode)
}

func (w wsBackend) mkdir(_ context.Context, rel string, mode uint32) (entry, error) {
	e, err := w.m.entryAt(rel)
	if err != nil {
		return e, err
	}
	if err := unix.Mkdirat(e.dir, e.name, mode); err != nil {
		e.close()
		return entry{}, err
	}
	return e, nil
}

func (w wsBackend) symlink(_ context.Context, target, rel string) (entry, error) {
	e, err := w.m.entryAt(rel)
	if err != nil {
		return e, err
	}
	if err := unix.Symlinkat(target, e.dir, e.name); err != nil {
		e.close()
		return entry{}, err
	}
	return e, nil
}

func (w wsBackend) mknod(rel string, mode, rdev uint32) (entry, error) {
	e, err := w.m.entryAt(rel)
	if err != nil {
		return e, err
	}
	if err := unix.Mknodat(e.dir, e.name, mode, int(rdev)); err != nil {
		e.close()
		return entry{}, err
	}
	return e, nil
}

func (w wsBackend) unlink(_ context.Context, _ string, e entry) error {
	return unix.Unlinkat(e.dir, e.name, 0)
}

func (w wsBackend) rmdir(_ context.Context, _ string, e entry) error {
	return unix.Unlinkat(e.dir, e.name, unix.AT_REMOVEDIR)
}

func (w wsBackend) rename(_ context.Context, _, _ string, srcE, dstE entry, flags uint32) error {
	return unix.Renameat2(srcE.dir, srcE.name, dstE.dir, dstE.name, uint(flags))
}

// moved is e itself (not owned: the caller's close is a no-op).
func (w wsBackend) moved(_ string, e entry) (entry, error) {
	return entry{dir: e.dir, name: e.name}, nil
}

func (w wsBackend) dirStream(n *node, rel string) (fs.DirStream, error) {
	fd, err := w.m.openRel(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, n.staleIfGone(err)
	}
	bs, err := fstat(fd)
	if err == nil {
		err = n.current(&bs)
	}
	if err != nil {
		_ = unix.Close(fd)
		return nil, err
	}
	ds, errno := fs.NewLoopbackDirStreamFd(fd)
	if errno != 0 {
		return nil, errno
	}
	return ds, nil
}
