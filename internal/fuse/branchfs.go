package fuse

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"path"
	"sort"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

// branchBackend serves a branch (Config.Branch): a path the branch owns is
// read and changed below the branch's upper directory, any other path is
// read from the workspace (the live base) through the mount's root
// descriptor, and a change of a workspace path copies it up first. The
// branch's records stay the one truth: every change of a path's state is
// made through an overlay/branch operation (CopyUp, CreateFile, Mkdir,
// Symlink, Remove, RemoveDir, Rename); only bytes, modes, owners, times
// and attributes of entries the branch owns are changed here directly.
//
// A file keeps the inode number (and generation) the mount showed for it
// when a copy-up or a rename gives it a new backing inode: the new inode
// is mapped to the old identity for the life of the mount, so the kernel
// keeps one inode (its caches and a descriptor opened before the copy-up
// stay right: see handle.follow). A restarted daemon shows the upper
// file's own number. A workspace file with several names (hard links)
// shows a number of its own under each name (a hash of the path, top bit
// set): a copy-up changes one name only, and the others must not share
// the copy's kernel inode.
//
// Limits (overlay/branch/mount.go): hard links and renames of directories
// the workspace has (or over an existing directory) are EXDEV, special
// files EPERM, the mode and times of a workspace directory
// EPERM; RENAME_EXCHANGE is EINVAL. Paths below the upper directory are
// opened in one openat2 call (no PATH_MAX splitting).
type branchBackend struct {
	m       *mountState
	b       *branch.Branch
	upperFd int // O_PATH descriptor of the branch's upper directory

	mu  sync.Mutex
	ids map[upperID]fs.StableAttr // new backing inode -> identity shown before
	up  map[fs.StableAttr]bool    // identities whose file was copied up
}

// upperID identifies a backing inode (the birth time tells a recycled
// inode number from the old file).
type upperID struct{ dev, ino, btime uint64 }

func idOf(bs *backingStat) upperID { return upperID{bs.st.Dev, bs.st.Ino, bs.btime} }

var _ backend = (*branchBackend)(nil)

// newBranchBackend opens the upper directory of b.
func newBranchBackend(m *mountState, b *branch.Branch) (*branchBackend, error) {
	fd, err := unix.Open(b.UpperDir(), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the upper directory of branch %s: %w", b.Name(), err)
	}
	return &branchBackend{m: m, b: b, upperFd: fd, ids: map[upperID]fs.StableAttr{}, up: map[fs.StableAttr]bool{}}, nil
}

// close releases the upper directory.
func (bb *branchBackend) close() { _ = unix.Close(bb.upperFd) }

// upperEntry is rel's entry below the upper directory.
func (bb *branchBackend) upperEntry(rel string) (entry, error) {
	dir, name := path.Split(rel)
	if dir == "" {
		return entry{dir: bb.upperFd, name: name}, nil
	}
	fd, err := openat2(bb.upperFd, dir[:len(dir)-1], unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return entry{}, err
	}
	return entry{dir: fd, name: name, own: true}, nil
}

func (bb *branchBackend) entry(rel string) (entry, error) {
	switch bb.b.Locate(rel) {
	case branch.InWorkspace:
		return bb.m.entryAt(rel)
	case branch.InBranch:
		return bb.upperEntry(rel)
	}
	// Deleted: the name reads as absent in the branch's own copy of its
	// directory (a whiteout has no file there), which must then exist.
	if dir := path.Dir(rel); dir != "." && bb.b.Locate(dir) == branch.Absent {
		return entry{}, unix.ENOENT
	}
	if err := bb.b.Prepare(rel); err != nil {
		return entry{}, branchErr(err)
	}
	return bb.upperEntry(rel)
}

func (bb *branchBackend) stat(rel string) (backingStat, error) {
	if bb.b.Locate(rel) == branch.InWorkspace {
		bs, err := bb.m.statRel(rel)
		if err == nil && isRegularStat(&bs.st) && bs.st.Nlink > 1 {
			// A workspace file with several names: each name is a file
			// of its own in the branch (a copy-up changes one name only),
			// so each gets its own identity, not the shared inode's.
			h := fnv.New64a()
			_, _ = h.Write([]byte(rel))
			bs.ident = h.Sum64() | 1<<63
		}
		return bs, err
	}
	e, err := bb.entry(rel)
	if err != nil {
		return backingStat{}, err
	}
	defer e.close()
	return statAt(e.dir, e.name, false)
}

func (bb *branchBackend) open(rel string, flags int, mode uint32) (int, error) {
	if flags&unix.O_CREAT != 0 && flags&unix.O_EXCL != 0 {
		fd := -1
		err := bb.b.CreateFile(context.Background(), rel, func() error {
			var err error
			fd, err = openat2(bb.upperFd, rel, flags, mode)
			return err
		})
		if err != nil {
			if fd >= 0 {
				_ = unix.Close(fd)
			}
			return -1, branchErr(err)
		}
		return fd, nil
	}
	if flags&unix.O_ACCMODE != unix.O_RDONLY || flags&unix.O_TRUNC != 0 {
		if err := bb.prepare(rel, flags&unix.O_TRUNC != 0); err != nil {
			return -1, err
		}
	}
	e, err := bb.entry(rel)
	if err != nil {
		return -1, err
	}
	defer e.close()
	return openat2(e.dir, e.name, flags, mode)
}

// prepare copies a workspace file up (without its bytes when empty), and
// carries its identity to the copy.
func (bb *branchBackend) prepare(rel string, empty bool) error {
	switch bb.b.Locate(rel) {
	case branch.InBranch:
		bb.b.Touched(rel)
		return nil
	case branch.Absent:
		return unix.ENOENT
	}
	if rel == "." {
		return unix.EPERM
	}
	lower, err := bb.stat(rel)
	if err != nil {
		return err
	}
	if !isRegularStat(&lower.st) {
		return unix.EPERM // a workspace directory, link or special file: no record for its metadata
	}
	id := bb.m.stableAttr(&lower)
	if err := bb.b.CopyUp(context.Background(), rel, !empty); err != nil {
		return branchErr(err)
	}
	bb.carry(rel, id)
	return nil
}

// carry maps the backing inode rel has now to the identity id.
func (bb *branchBackend) carry(rel string, id fs.StableAttr) {
	e, err := bb.upperEntry(rel)
	if err != nil {
		return
	}
	defer e.close()
	bs, err := statAt(e.dir, e.name, false)
	if err != nil || bb.m.stableAttr(&bs) == id {
		return
	}
	bb.mu.Lock()
	defer bb.mu.Unlock()
	bb.ids[idOf(&bs)] = id
	bb.up[id] = true
}

func (bb *branchBackend) copiedUp(id fs.StableAttr) bool {
	bb.mu.Lock()
	defer bb.mu.Unlock()
	return bb.up[id]
}

func (bb *branchBackend) inPlace(rel string) bool { return bb.b.Locate(rel) == branch.InBranch }

func (bb *branchBackend) carried(bs *backingStat) (fs.StableAttr, bool) {
	bb.mu.Lock()
	id, ok := bb.ids[idOf(bs)]
	bb.mu.Unlock()
	if ok || bs.ident == 0 {
		return id, ok
	}
	gen := bs.btime
	if gen == 0 {
		gen = 1
	}
	return fs.StableAttr{Mode: bs.st.Mode & syscall.S_IFMT, Ino: bs.ident, Gen: gen}, true
}

// changed forgets the version the branch knows of rel's file, and records
// the mode of a directory the branch made (a commit makes it with that
// mode).
func (bb *branchBackend) changed(rel string) {
	bb.b.Touched(rel)
	bs, err := bb.stat(rel)
	if err != nil || !isDir(&bs.st) || bb.b.Locate(rel) != branch.InBranch {
		return
	}
	if err := bb.b.Chmod(context.Background(), rel, os.FileMode(bs.st.Mode&0o777)); err != nil {
		bb.m.log.Warn("record the mode of a directory in the branch", "path", rel, "err", err)
	}
}

func (bb *branchBackend) target(rel string) provider.Target { return bb.b.TargetForRel(rel) }

func (bb *branchBackend) mkdir(ctx context.Context, rel string, mode uint32) (entry, error) {
	if _, err := bb.stat(rel); err == nil {
		return entry{}, unix.EEXIST
	}
	if err := bb.b.Mkdir(context.WithoutCancel(ctx), rel, os.FileMode(mode&0o777)); err != nil {
		return entry{}, branchErr(err)
	}
	return bb.upperEntry(rel)
}

func (bb *branchBackend) symlink(ctx context.Context, target, rel string) (entry, error) {
	if _, err := bb.stat(rel); err == nil {
		return entry{}, unix.EEXIST
	}
	if err := bb.b.Symlink(context.WithoutCancel(ctx), target, rel); err != nil {
		return entry{}, branchErr(err)
	}
	return bb.upperEntry(rel)
}

func (bb *branchBackend) mknod(string, uint32, uint32) (entry, error) { return entry{}, unix.EPERM }

func (bb *branchBackend) link(string, string) error { return unix.EXDEV }

func (bb *branchBackend) unlink(ctx context.Context, rel string, _ entry) error {
	return branchErr(bb.b.Remove(context.WithoutCancel(ctx), rel))
}

func (bb *branchBackend) rmdir(ctx context.Context, rel string, _ entry) error {
	names, err := bb.children(rel)
	if err != nil {
		return err
	}
	if len(names) > 0 {
		return unix.ENOTEMPTY
	}
	return branchErr(bb.b.RemoveDir(context.WithoutCancel(ctx), rel))
}

func (bb *branchBackend) rename(ctx context.Context, srcRel, dstRel string, _, _ entry, flags uint32) error {
	if flags&unix.RENAME_EXCHANGE != 0 {
		return unix.EINVAL
	}
	src, err := bb.stat(srcRel)
	if err != nil {
		return err
	}
	id := bb.m.stableAttr(&src)
	if err := bb.b.Rename(context.WithoutCancel(ctx), srcRel, dstRel, flags&unix.RENAME_NOREPLACE != 0); err != nil {
		return branchErr(err)
	}
	bb.carry(dstRel, id)
	return nil
}

func (bb *branchBackend) moved(rel string, _ entry) (entry, error) { return bb.entry(rel) }

// children lists the directory rel as the branch sees it: the
// workspace's children (unless the branch made the directory) without the
// ones the branch changed, then the branch's own.
func (bb *branchBackend) children(rel string) ([]gofuse.DirEntry, error) {
	ch, err := bb.b.DirChanges(rel)
	if err != nil {
		return nil, branchErr(err)
	}
	var list []gofuse.DirEntry
	if !ch.Opaque {
		fd, err := bb.m.openRel(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return nil, err
		}
		ds, errno := fs.NewLoopbackDirStreamFd(fd)
		if errno != 0 {
			return nil, errno
		}
		for ds.HasNext() {
			de, errno := ds.Next()
			if errno != 0 {
				ds.Close()
				return nil, errno
			}
			if _, changed := ch.Names[de.Name]; changed || de.Name == "." || de.Name == ".." {
				continue
			}
			list = append(list, de)
		}
		ds.Close()
	}
	own := make([]string, 0, len(ch.Names))
	for name, exists := range ch.Names {
		if exists {
			own = append(own, name)
		}
	}
	sort.Strings(own)
	for _, name := range own {
		e, err := bb.upperEntry(joinRel(rel, name))
		if err != nil {
			continue
		}
		bs, err := statAt(e.dir, e.name, false)
		e.close()
		if err != nil {
			continue
		}
		list = append(list, gofuse.DirEntry{Name: name, Mode: bs.st.Mode & syscall.S_IFMT, Ino: bb.m.stableAttr(&bs).Ino})
	}
	return list, nil
}

func (bb *branchBackend) dirStream(n *node, rel string) (fs.DirStream, error) {
	bs, err := bb.stat(rel)
	if err == nil && !isDir(&bs.st) {
		err = unix.ENOTDIR
	}
	if err == nil {
		err = n.current(&bs)
	}
	if err != nil {
		return nil, n.staleIfGone(err)
	}
	list := func() ([]gofuse.DirEntry, error) {
		list, err := bb.children(rel)
		if err != nil {
			return nil, n.staleIfGone(err)
		}
		dots := []gofuse.DirEntry{{Name: ".", Mode: syscall.S_IFDIR}, {Name: "..", Mode: syscall.S_IFDIR}}
		return append(dots, list...), nil
	}
	ds, err := newRelisting(list)
	if err != nil {
		return nil, err
	}
	return ds, nil
}

// BaseObserver is, for a branch mount, the policy.Observer to add to the
// workspace's engine: the branch reads every path it has not changed from
// the workspace, so a workspace change (through the socket, the
// workspace's own mount, or out of band as the watcher reports it) must
// drop this mount's cached view of the path too. A socket change waits for
// the kernel as on the workspace mount; a change through the workspace's
// mount does not (it runs in that mount's request). A removal only makes
// the kernel look the name up again: the branch may still have it. Nil for
// a workspace mount.
func (mt *Server) BaseObserver() policy.Observer {
	iv := mt.inval
	if mt.state.cfg.Branch == nil || iv == nil {
		return nil
	}
	return func(ctx context.Context, ev policy.Event) error {
		if ev.Op == policy.OpDelete || ev.Op == policy.OpUnlink {
			ev.Op = policy.OpWrite
		}
		if ev.Actor.Channel != policy.ChannelMount {
			return iv.observe(ctx, ev)
		}
		if mt.state.closed.Load() {
			return nil
		}
		select {
		case iv.jobs <- invalJob{ev: ev, done: make(chan struct{})}:
		case <-iv.stop:
		default:
			mt.state.log.Warn("kernel cache invalidation queue is full; the branch mount may show the workspace's old data for up to the attribute timeout",
				"path", ev.Target.DisplayPath)
		}
		return nil
	}
}
