package fuse

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/overlay"
)

// node is one file, directory or symbolic link of the mount. It embeds
// go-fuse's LoopbackNode for the operations that need no hook (statfs,
// readlink) and overrides everything that reads the view or changes the
// backing tree.
type node struct {
	fs.LoopbackNode
	m *mountState
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
func (m *mountState) newNode(rootData *fs.LoopbackRoot) *node {
	return &node{LoopbackNode: fs.LoopbackNode{RootData: rootData}, m: m}
}

// rel is the node's workspace-relative path ("." for the root). A node whose
// file was unlinked while open has no path; rel then holds a go-fuse
// placeholder that exists nowhere, so path operations fail with ENOENT.
func (n *node) rel() string {
	p := n.Path(n.RootData.RootNode.EmbeddedInode())
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
	return n.NewInode(ctx, n.m.newNode(n.RootData), n.m.stableAttr(bs))
}

// lstat stats the node's backing file (the root follows its own symlink).
func (n *node) lstat() (backingStat, error) {
	return statAt(unix.AT_FDCWD, n.m.abs(n.rel()), n.IsRoot())
}

// Lookup implements fs.NodeLookuper. Hidden names do not exist.
func (n *node) Lookup(ctx context.Context, name string, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	rel := joinRel(n.rel(), name)
	if n.m.access(rel) == overlay.Hidden {
		return nil, syscall.ENOENT
	}
	bs, err := statAt(unix.AT_FDCWD, n.m.abs(rel), false)
	if err != nil {
		return nil, errnoOf(err)
	}
	fillAttr(&out.Attr, &bs.st)
	return n.newChild(ctx, &bs), 0
}

// Getattr implements fs.NodeGetattrer, from the open handle when there is
// one (a file unlinked while open still has attributes).
func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *gofuse.AttrOut) syscall.Errno {
	var bs backingStat
	var err error
	if h := asHandle(f); h != nil {
		bs, err = fstat(h.fd())
	} else {
		bs, err = n.lstat()
	}
	if err != nil {
		return errnoOf(err)
	}
	fillAttr(&out.Attr, &bs.st)
	return 0
}

// Statx implements fs.NodeStatxer; like Getattr, without following a
// symbolic link the node itself is.
func (n *node) Statx(ctx context.Context, f fs.FileHandle, flags uint32, mask uint32, out *gofuse.StatxOut) syscall.Errno {
	var x unix.Statx_t
	var err error
	flags &^= unix.AT_SYMLINK_NOFOLLOW | unix.AT_EMPTY_PATH
	if h := asHandle(f); h != nil {
		err = unix.Statx(h.fd(), "", int(flags)|unix.AT_EMPTY_PATH, int(mask), &x)
	} else {
		if !n.IsRoot() {
			flags |= unix.AT_SYMLINK_NOFOLLOW
		}
		err = unix.Statx(unix.AT_FDCWD, n.m.abs(n.rel()), int(flags), int(mask), &x)
	}
	if err != nil {
		return errnoOf(err)
	}
	out.FromStatx(&x)
	return 0
}

// Tmpfile implements fs.NodeTmpfiler: O_TMPFILE is not offered (a file
// without a name cannot be guarded or linked by path). EOPNOTSUPP, not
// ENOSYS, so programs fall back to a named temporary file.
func (n *node) Tmpfile(ctx context.Context, flags uint32, mode uint32, out *gofuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EOPNOTSUPP
}
