package fuse

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/dshmount/dshmount/internal/viewrules"
)

// dirHandle is an open directory: go-fuse's loopback directory stream with
// the hidden children left out, and the attributes READDIRPLUS carries
// (see Lookup).
type dirHandle struct {
	inner  fs.DirStream
	hidden func(name string) bool
	dir    *node
	plus   ReaddirPlusMode
	// fromStart is how many entries the stream produced since it was at
	// the listing's start (-1: it was sought elsewhere).
	fromStart int
}

// readdirPlusCold is how many entries from a listing's start carry
// attributes in ReaddirPlusAuto although the kernel holds no inode for
// them: about the kernel's first READDIRPLUS batch for a 32 KiB getdents
// buffer (glibc's), what the kernel's own auto mode asked attributes for.
const readdirPlusCold = 256

var (
	_ fs.FileReaddirenter = (*dirHandle)(nil)
	_ fs.FileLookuper     = (*dirHandle)(nil)
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
			if d.fromStart >= 0 {
				d.fromStart++
			}
			return de, 0
		}
	}
}

// Lookup implements fs.FileLookuper: go-fuse calls it for each entry of a
// READDIRPLUS batch (the kernel asks for attributes with every batch unless
// ReaddirPlusOff). An entry whose inode the kernel holds gets its current
// attributes: the kernel drops a file's size and times after every write
// to it, so a stat after the listing would otherwise cost a GETATTR per
// file. An entry the kernel does not hold gets them only among the first
// readdirPlusCold of a listing (ReaddirPlusAuto; every entry with
// ReaddirPlusAlways); the others go as names only (node id 0), which the
// kernel looks up when a program uses them, so a plain listing (find, ls)
// of a large directory costs no lookup per entry. The attributes come from
// node.Lookup, the one a LOOKUP runs: as exact as a GETATTR.
func (d *dirHandle) Lookup(ctx context.Context, name string, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	cold := d.plus == ReaddirPlusAlways || (d.fromStart >= 0 && d.fromStart <= readdirPlusCold)
	if !cold && d.dir.GetChild(name) == nil {
		return nil, syscall.ENOENT // a name only: the kernel ignores the entry's attributes
	}
	return d.dir.Lookup(ctx, name, out)
}

// Seekdir implements fs.FileSeekdirer.
func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	s, ok := d.inner.(fs.FileSeekdirer)
	if !ok {
		return syscall.ENOTSUP
	}
	d.fromStart = -1
	if off == 0 {
		d.fromStart = 0
	}
	return s.Seekdir(ctx, off)
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
	return func(name string) bool { return n.m.access(joinRel(rel, name)) == viewrules.Hidden }
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
	return &dirHandle{inner: ds, hidden: n.hiddenIn(rel), dir: n, plus: n.m.cfg.ReaddirPlus}, n.m.dirOpenFlags(), 0
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

// relisting is a directory listing made in memory (a branch's merged
// children) that a seek to its start makes again: rewinddir(3) must show
// the directory as it is now, as the backing directory's stream does. A
// seek elsewhere keeps the listing, so the offsets the kernel holds stay
// valid.
type relisting struct {
	list    func() ([]gofuse.DirEntry, error)
	entries []gofuse.DirEntry
	idx     int
}

var (
	_ fs.DirStream        = (*relisting)(nil)
	_ fs.FileReaddirenter = (*relisting)(nil)
	_ fs.FileSeekdirer    = (*relisting)(nil)
)

// newRelisting lists once with list and returns the stream.
func newRelisting(list func() ([]gofuse.DirEntry, error)) (*relisting, error) {
	entries, err := list()
	if err != nil {
		return nil, err
	}
	return &relisting{list: list, entries: entries}, nil
}

// HasNext implements fs.DirStream.
func (r *relisting) HasNext() bool { return r.idx < len(r.entries) }

// Next implements fs.DirStream; an entry's offset is its position + 1.
func (r *relisting) Next() (gofuse.DirEntry, syscall.Errno) {
	e := r.entries[r.idx]
	r.idx++
	e.Off = uint64(r.idx)
	return e, 0
}

// Close implements fs.DirStream.
func (r *relisting) Close() {}

// Readdirent implements fs.FileReaddirenter.
func (r *relisting) Readdirent(context.Context) (*gofuse.DirEntry, syscall.Errno) {
	if !r.HasNext() {
		return nil, 0
	}
	e, errno := r.Next()
	return &e, errno
}

// Seekdir implements fs.FileSeekdirer: 0 lists the directory again.
func (r *relisting) Seekdir(_ context.Context, off uint64) syscall.Errno {
	if off == 0 {
		entries, err := r.list()
		if err != nil {
			return errnoOf(err)
		}
		r.entries = entries
	}
	if off > uint64(len(r.entries)) {
		return syscall.EINVAL
	}
	r.idx = int(off)
	return 0
}
