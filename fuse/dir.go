package fuse

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/dshmount/dshmount/overlay"
)

// dirHandle is an open directory: go-fuse's loopback directory stream with
// the hidden children left out.
type dirHandle struct {
	inner  fs.DirStream
	hidden func(name string) bool
}

var (
	_ fs.FileReaddirenter = (*dirHandle)(nil)
	_ fs.FileSeekdirer    = (*dirHandle)(nil)
	_ fs.FileReleasedirer = (*dirHandle)(nil)
	_ fs.FileFsyncdirer   = (*dirHandle)(nil)
)

// Readdirent implements fs.FileReaddirenter, skipping hidden entries.
func (d *dirHandle) Readdirent(ctx context.Context) (*gofuse.DirEntry, syscall.Errno) {
	r, ok := d.inner.(fs.FileReaddirenter)
	if !ok {
		return nil, syscall.EIO
	}
	for {
		de, errno := r.Readdirent(ctx)
		if errno != 0 || de == nil {
			return de, errno
		}
		if de.Name == "." || de.Name == ".." || !d.hidden(de.Name) {
			return de, 0
		}
	}
}

// Seekdir implements fs.FileSeekdirer.
func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if s, ok := d.inner.(fs.FileSeekdirer); ok {
		return s.Seekdir(ctx, off)
	}
	return syscall.ENOTSUP
}

// Releasedir implements fs.FileReleasedirer.
func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {
	if r, ok := d.inner.(fs.FileReleasedirer); ok {
		r.Releasedir(ctx, flags)
		return
	}
	d.inner.Close()
}

// Fsyncdir implements fs.FileFsyncdirer.
func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	if s, ok := d.inner.(fs.FileFsyncdirer); ok {
		return s.Fsyncdir(ctx, flags)
	}
	return 0
}

// hiddenIn returns the filter for the children of the directory rel.
func (n *node) hiddenIn(rel string) func(string) bool {
	return func(name string) bool { return n.m.access(joinRel(rel, name)) == overlay.Hidden }
}

// OpendirHandle implements fs.NodeOpendirHandler.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	rel := n.rel()
	if errno := n.m.awaitCommit(ctx, rel); errno != 0 {
		return nil, 0, errno
	}
	ds, errno := n.openDirStream(rel)
	if errno != 0 {
		return nil, 0, errno
	}
	return &dirHandle{inner: ds, hidden: n.hiddenIn(rel)}, n.m.dirOpenFlags(), 0
}

// Readdir implements fs.NodeReaddirer (go-fuse uses OpendirHandle; this
// keeps the promoted loopback version, which does not filter, out of reach).
func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	rel := n.rel()
	ds, errno := n.openDirStream(rel)
	if errno != 0 {
		return nil, errno
	}
	defer ds.Close()
	hidden := n.hiddenIn(rel)
	var list []gofuse.DirEntry
	for ds.HasNext() {
		de, errno := ds.Next()
		if errno != 0 {
			return nil, errno
		}
		if de.Name == "." || de.Name == ".." || !hidden(de.Name) {
			list = append(list, de)
		}
	}
	return fs.NewListDirStream(list), 0
}

// openDirStream opens the directory rel (no links) as a go-fuse directory
// stream (the backend's: the backing directory, or a branch's merged
// listing).
func (n *node) openDirStream(rel string) (fs.DirStream, syscall.Errno) {
	ds, err := n.m.be.dirStream(n, rel)
	if err != nil {
		return nil, errnoOf(err)
	}
	return ds, 0
}
