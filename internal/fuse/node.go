package fuse

import (
	"context"
	"errors"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/viewrules"
)

// node is one file, directory or symbolic link of the mount. It embeds a
// bare go-fuse Inode (not LoopbackNode, whose operations work on absolute
// paths and follow links planted in the backing tree) and implements every
// operation relative to the root descriptor (backing.go).
type node struct {
	fs.Inode
	m   *mountState
	own ownWrites // a bound session's own changes (guard.go)
	io  ioModes   // open handles by kernel I/O mode (guard.go)
	xa  xaAbsent  // attributes known to be absent (xattrcache.go)
}

// The go-fuse interfaces node implements. Anything not listed falls back to
// go-fuse defaults: Access checks the mode bits of Getattr (and is never
// sent, as default_permissions is on), Ioctl answers ENOTTY, and locks are
// handled by the kernel (EnableLocks is off).
var (
	_ fs.InodeEmbedder      = (*node)(nil)
	_ fs.NodeStatfser       = (*node)(nil)
	_ fs.NodeLookuper       = (*node)(nil)
	_ fs.NodeGetattrer      = (*node)(nil)
	_ fs.NodeStatxer        = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeOpendirHandler = (*node)(nil)
	_ fs.NodeReaddirer      = (*node)(nil)
	_ fs.NodeReadlinker     = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeTmpfiler       = (*node)(nil)
	_ fs.NodeReader         = (*node)(nil)
	_ fs.NodeWriter         = (*node)(nil)
	_ fs.NodeWritever       = (*node)(nil)
	_ fs.NodeFlusher        = (*node)(nil)
	_ fs.NodeFsyncer        = (*node)(nil)
	_ fs.NodeReleaser       = (*node)(nil)
	_ fs.NodeAllocater      = (*node)(nil)
	_ fs.NodeLseeker        = (*node)(nil)
	_ fs.NodeCopyFileRanger = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeMknoder        = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeSymlinker      = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
	_ fs.NodeGetxattrer     = (*node)(nil)
	_ fs.NodeSetxattrer     = (*node)(nil)
	_ fs.NodeListxattrer    = (*node)(nil)
	_ fs.NodeRemovexattrer  = (*node)(nil)
)

// newNode returns an unattached node of mount m.
func (m *mountState) newNode() *node {
	return &node{m: m}
}

// rel is the node's workspace-relative path ("." for the root). A node whose
// file was unlinked while open has no path; rel then holds a go-fuse
// placeholder that exists nowhere, so path operations fail with ENOENT.
func (n *node) rel() string {
	p := n.Path(n.m.rootInode)
	if p == "" {
		return "."
	}
	return p
}

// linked reports whether the node still has a name in the tree.
func (n *node) linked() bool {
	if n.IsRoot() {
		return true
	}
	_, parent := n.Parent()
	return parent != nil
}

// stableAttr is the go-fuse identity of a backing file: its inode number
// (mixed with the device when it is not the root's), and a generation from
// its birth time, so a recycled inode number gets a new generation.
func (m *mountState) stableAttr(bs *backingStat) fs.StableAttr {
	if id, ok := m.be.carried(bs); ok {
		return id // a copy-up keeps the identity the mount showed
	}
	dev := bs.st.Dev
	swapped := (dev << 32) | (dev >> 32)
	rootSwapped := (m.rootDev << 32) | (m.rootDev >> 32)
	gen := bs.btime
	if gen == 0 {
		gen = 1
	}
	return fs.StableAttr{
		Mode: bs.st.Mode & syscall.S_IFMT,
		Ino:  (swapped ^ rootSwapped) ^ bs.st.Ino,
		Gen:  gen,
	}
}

// newChild creates (or finds) the inode of a backing file just looked up or
// created under n.
func (n *node) newChild(ctx context.Context, bs *backingStat) *fs.Inode {
	return n.NewInode(ctx, n.m.newNode(), n.m.stableAttr(bs))
}

// lstat stats the node's backing file: ESTALE when its name now holds a
// file of another type or none (see current and staleIfGone).
func (n *node) lstat() (backingStat, error) {
	return n.lstatAt(n.rel())
}

// lstatAt is lstat for a caller that holds the node's rel.
func (n *node) lstatAt(rel string) (backingStat, error) {
	bs, err := n.m.be.stat(rel)
	if err != nil {
		return bs, n.staleIfGone(err)
	}
	return bs, n.current(&bs)
}

// current checks that a stat of the node's name can stand for the node.
// An agent's edit over the socket (or a program in the backing directory)
// replaces the file under the name by a new inode while the kernel still
// holds the old node in its name cache. Operations on the old node work on
// what the name holds now (a new open reads the new file, a stat shows its
// attributes under the node's inode number), as a name-based program
// expects; answering ESTALE instead would fail programs whenever the name
// is replaced again between the kernel's one retry and its open. Only a
// file of another type cannot stand for the node (the kernel would mark the
// inode bad): that answers ESTALE, on which the kernel walks the path again
// with LOOKUP_REVAL and gets a new node.
func (n *node) current(bs *backingStat) error {
	if n.IsRoot() {
		return nil
	}
	if n.StableAttr().Mode != bs.st.Mode&syscall.S_IFMT {
		return unix.ESTALE
	}
	return nil
}

// staleIfGone turns ENOENT for a name the kernel still holds into ESTALE
// (the kernel then looks the name up again and learns it is gone, so an
// open(O_CREAT) creates it); a node without a name keeps ENOENT.
func (n *node) staleIfGone(err error) error {
	if errors.Is(err, unix.ENOENT) && n.linked() {
		return unix.ESTALE
	}
	return err
}

// Lookup implements fs.NodeLookuper. Hidden names do not exist.
func (n *node) Lookup(ctx context.Context, name string, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	rel := joinRel(n.rel(), name)
	if n.m.access(rel) == viewrules.Hidden {
		return nil, syscall.ENOENT
	}
	bs, err := n.m.be.stat(rel)
	if err != nil {
		return nil, errnoOf(err)
	}
	fillAttr(&out.Attr, &bs.st)
	if name == ".git" {
		n.m.learnGitDir(rel, &bs.st)
	}
	attr := n.m.stableAttr(&bs)
	if held := n.GetChild(name); held != nil && held.StableAttr() == attr {
		// The kernel holds the name's file (a revalidation, a listing's
		// READDIRPLUS): answer with its node instead of a new one that
		// go-fuse would drop for it.
		out.Ino = attr.Ino
		return held, 0
	}
	child := n.NewInode(ctx, n.m.newNode(), attr)
	out.Ino = child.StableAttr().Ino
	return child, 0
}

// attrStat is the stat Getattr reports: the open handle's file when
// go-fuse passes one (a file unlinked while open still has attributes),
// else the file the node's name holds (node.current).
func (n *node) attrStat(h *handle) (backingStat, error) {
	if h == nil {
		return n.lstat()
	}
	return fstat(h.readFd())
}

// Getattr implements fs.NodeGetattrer (see attrStat).
func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *gofuse.AttrOut) syscall.Errno {
	bs, err := n.attrStat(asHandle(f))
	if err != nil {
		return errnoOf(err)
	}
	fillAttr(&out.Attr, &bs.st)
	out.Ino = n.StableAttr().Ino
	return 0
}

// Statx implements fs.NodeStatxer; like Getattr, without following a
// symbolic link the node itself is.
func (n *node) Statx(ctx context.Context, f fs.FileHandle, flags uint32, mask uint32, out *gofuse.StatxOut) syscall.Errno {
	var x unix.Statx_t
	var err error
	flags &^= unix.AT_SYMLINK_NOFOLLOW | unix.AT_EMPTY_PATH
	if h := asHandle(f); h != nil {
		err = unix.Statx(h.readFd(), "", int(flags)|unix.AT_EMPTY_PATH, int(mask), &x)
	} else {
		var e entry
		if e, err = n.m.be.entry(n.rel()); err == nil {
			err = unix.Statx(e.dir, e.name, int(flags)|unix.AT_SYMLINK_NOFOLLOW, int(mask)|unix.STATX_BTIME, &x)
			e.close()
		}
		if err != nil {
			err = n.staleIfGone(err)
		} else {
			bs := statxBacking(&x)
			err = n.current(&bs)
		}
	}
	if err != nil {
		return errnoOf(err)
	}
	out.FromStatx(&x)
	out.Ino = n.StableAttr().Ino
	return 0
}

// Statfs implements fs.NodeStatfser: the backing filesystem's numbers.
func (n *node) Statfs(ctx context.Context, out *gofuse.StatfsOut) syscall.Errno {
	var s syscall.Statfs_t
	if err := syscall.Fstatfs(n.m.rootFd, &s); err != nil {
		return errnoOf(err)
	}
	out.FromStatfsT(&s)
	return 0
}

// Readlink implements fs.NodeReadlinker.
func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	e, err := n.m.be.entry(n.rel())
	if err != nil {
		return nil, errnoOf(err)
	}
	defer e.close()
	for l := 256; ; l *= 2 {
		buf := make([]byte, l)
		sz, err := unix.Readlinkat(e.dir, e.name, buf)
		if err != nil {
			return nil, errnoOf(n.staleIfGone(err))
		}
		if sz < len(buf) {
			return buf[:sz], 0
		}
	}
}

// Tmpfile implements fs.NodeTmpfiler: O_TMPFILE is not offered (a file
// without a name cannot be guarded or linked by path). EOPNOTSUPP, not
// ENOSYS, so programs fall back to a named temporary file.
func (n *node) Tmpfile(ctx context.Context, flags uint32, mode uint32, out *gofuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EOPNOTSUPP
}
