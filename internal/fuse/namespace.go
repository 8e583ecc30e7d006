package fuse

import (
	"context"
	"errors"
	"path"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/version"
	"github.com/dshmount/dshmount/internal/viewrules"
)

// creatable checks that a new name may appear at rel: hidden names cannot
// be created (EACCES: the name is outside the view), read-only ones neither
// (EROFS).
func (m *mountState) creatable(rel string) syscall.Errno {
	switch m.access(rel) {
	case viewrules.Hidden:
		return syscall.EACCES
	case viewrules.ReadOnly:
		return syscall.EROFS
	}
	return 0
}

// changeable checks that the existing entry rel may change: hidden entries
// do not exist (ENOENT), read-only ones cannot change (EROFS).
func (m *mountState) changeable(rel string) syscall.Errno {
	switch m.access(rel) {
	case viewrules.Hidden:
		return syscall.ENOENT
	case viewrules.ReadOnly:
		return syscall.EROFS
	}
	return 0
}

// Create implements fs.NodeCreater. A name that exists (open(O_CREAT)
// without O_EXCL racing with its creation, or a file created out of band
// since the kernel's lookup) is opened like Open for writing, with the same
// guard; an absent name is created exclusively and recorded as a create.
func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *gofuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	m := n.m
	rel := joinRel(n.rel(), name)
	if errno := m.creatable(rel); errno != 0 {
		return nil, nil, 0, errno
	}
	a := m.actor(ctx)
	t := m.target(rel)
	flags &^= syscall.O_APPEND | gofuse.FMODE_EXEC
	writable := isWrite(flags)
	defer m.cfg.Engine.Changing(t)()

	existing, err := m.be.stat(rel)
	switch {
	case err == nil && flags&syscall.O_EXCL != 0:
		return nil, nil, 0, syscall.EEXIST
	case err == nil:
		return n.createExisting(ctx, a, t, rel, flags, &existing, out)
	case !errors.Is(err, unix.ENOENT):
		return nil, nil, 0, errnoOf(err)
	}

	if errno := m.checkCreate(a, "create", t); errno != 0 {
		return nil, nil, 0, errno
	}
	f, err := m.openBacking(rel, int(createFlags(a, flags))|syscall.O_CREAT|syscall.O_EXCL, mode&07777)
	if errors.Is(err, unix.EEXIST) && flags&syscall.O_EXCL == 0 {
		if existing, err = m.be.stat(rel); err == nil {
			return n.createExisting(ctx, a, t, rel, flags, &existing, out)
		}
	}
	if err != nil {
		return nil, nil, 0, errnoOf(err)
	}
	fd := int(f.Fd())
	m.chownToCaller(ctx, fd, entry{dir: -1}, rel)
	// The kernel has applied the caller's umask already; the daemon's own
	// umask must not apply a second time.
	if err := unix.Fchmod(fd, mode&07777); err != nil {
		m.log.Warn("set mode of created file", "path", rel, "err", err)
	}
	bs, err := fstat(fd)
	if err != nil {
		_ = f.Close()
		return nil, nil, 0, errnoOf(err)
	}
	after := m.createdVersion(a, t, fd, &bs.st)
	m.record(ctx, a, policy.OpCreate, t, "", after, nil)

	fillAttr(&out.Attr, &bs.st)
	child := n.newChild(ctx, &bs)
	cn := nodeOf(child, n)
	h, errno := cn.newHandle(f, rel, a, writable, &bs.st)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	h.lastVer = after
	h.recorded = true // the create is recorded; later writes change the stat
	if writable {
		cn.own.note(a.Session, &bs.st)
	}
	return child, m.wrap(h), h.openFlags(), 0
}

// createFlags are the backing open flags of a CREATE with flags by a. A
// bound writer's write-only file is opened for reading and writing on the
// backing side, so the records of its writes hash the bytes through the
// handle's own descriptor instead of reopening it through /proc at every
// flush. The caller still cannot read it: the kernel checks its own open
// file's mode. An open that creates the file is never refused for the new
// file's mode, so this cannot fail where the write-only open would not.
func createFlags(a policy.Actor, flags uint32) uint32 {
	if a.Session == "" || flags&syscall.O_ACCMODE != syscall.O_WRONLY {
		return flags
	}
	return flags&^syscall.O_ACCMODE | syscall.O_RDWR
}

// createdVersion is recordVersion for the file the mount just created
// exclusively as fd with stat st: a regular file of size 0 holds no bytes,
// so its version is the empty content's, known without reading it.
func (m *mountState) createdVersion(a policy.Actor, t provider.Target, fd int, st *unix.Stat_t) provider.Version {
	if isRegularStat(st) && st.Size == 0 && a.Session != "" && !m.cfg.Engine.OutsideGuard(a, t) {
		return version.OfBytes(nil)
	}
	return m.recordVersion(a, t, fd)
}

// childNode is the node the kernel holds for name under n, or nil.
func (n *node) childNode(name string) *node {
	if c := n.GetChild(name); c != nil {
		if cn, ok := c.Operations().(*node); ok {
			return cn
		}
	}
	return nil
}

// nodeOf is the *node of a child inode (the handle of a created file
// belongs to the file, not to the directory it was created in), or fallback.
func nodeOf(child *fs.Inode, fallback *node) *node {
	if cn, ok := child.Operations().(*node); ok {
		return cn
	}
	return fallback
}

// createExisting serves a CREATE whose name exists: an open for writing.
func (n *node) createExisting(ctx context.Context, a policy.Actor, t provider.Target, rel string, flags uint32,
	existing *backingStat, out *gofuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	m := n.m
	if existing.st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		return nil, nil, 0, syscall.EISDIR
	}
	if isWrite(flags) {
		unlock, errno := m.lock(ctx, t)
		if errno != 0 {
			return nil, nil, 0, errno
		}
		defer unlock()
		if st, err := m.be.stat(rel); err == nil {
			existing = &st
		}
	}
	if isWrite(flags) {
		cn := n.childNode(path.Base(rel))
		if errno := m.guardChange(a, "open", cn, t, &existing.st, func() (provider.Version, error) {
			return m.versionOfRel(rel, &existing.st)
		}); errno != 0 {
			return nil, nil, 0, errno
		}
		if cn != nil && cn.io.busyFor(a) {
			return nil, nil, 0, m.refusePassthrough(a, t)
		}
	}
	f, err := m.openBacking(rel, int(flags&^(syscall.O_CREAT|syscall.O_EXCL)), 0)
	if err != nil {
		return nil, nil, 0, errnoOf(err)
	}
	bs, err := fstat(int(f.Fd()))
	if err != nil {
		_ = f.Close()
		return nil, nil, 0, errnoOf(err)
	}
	fillAttr(&out.Attr, &bs.st)
	child := n.newChild(ctx, &bs)
	cn := nodeOf(child, n)
	h, errno := cn.newHandle(f, rel, a, isWrite(flags), &existing.st)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	if !h.writable && a.Session != "" {
		ver, err := m.cachedVersionOfFd(int(f.Fd()), &bs.st)
		if err != nil {
			_ = f.Close()
			return nil, nil, 0, errnoOf(err)
		}
		m.observe(a, t, policy.Present(ver))
	}
	if h.writable {
		cn.own.note(a.Session, &bs.st)
	}
	return child, m.wrap(h), h.openFlags(), 0
}

// finishCreate stats a just-created entry, records it and returns its inode.
func (n *node) finishCreate(ctx context.Context, a policy.Actor, rel string, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	m := n.m
	bs, err := m.be.stat(rel)
	if err != nil {
		return nil, errnoOf(err)
	}
	var after provider.Version
	if a.Session != "" { // the creator's observation of what it made
		if after, err = m.versionOfRel(rel, &bs.st); err != nil {
			m.log.Warn("version of created entry", "path", rel, "err", err)
		}
	}
	m.record(ctx, a, policy.OpCreate, m.target(rel), "", after, nil)
	fillAttr(&out.Attr, &bs.st)
	return n.newChild(ctx, &bs), 0
}

// Mkdir implements fs.NodeMkdirer.
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	m := n.m
	rel := joinRel(n.rel(), name)
	if errno := m.creatable(rel); errno != 0 {
		return nil, errno
	}
	a := m.actor(ctx)
	defer m.cfg.Engine.Changing(m.target(rel))()
	e, err := m.be.mkdir(ctx, rel, mode&07777)
	if err != nil {
		return nil, errnoOf(err)
	}
	defer e.close()
	m.dirs.forget(rel) // a descriptor cached under this name was of a directory gone since
	m.chownToCaller(ctx, -1, e, rel)
	dirMode := mode & 07777
	if dirSetgid(e.dir) {
		dirMode |= unix.S_ISGID // inherited, as mkdir(2) does on the disk
	}
	if err := chmodAt(e.dir, e.name, dirMode); err != nil {
		m.log.Warn("set mode of created directory", "path", rel, "err", err)
	}
	return n.finishCreate(ctx, a, rel, out)
}

// Mknod implements fs.NodeMknoder (FIFOs, sockets, device nodes).
func (n *node) Mknod(ctx context.Context, name string, mode uint32, rdev uint32, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	m := n.m
	rel := joinRel(n.rel(), name)
	if errno := m.creatable(rel); errno != 0 {
		return nil, errno
	}
	a := m.actor(ctx)
	t := m.target(rel)
	if errno := m.checkCreate(a, "mknod", t); errno != 0 {
		return nil, errno
	}
	defer m.cfg.Engine.Changing(t)()
	e, err := m.be.mknod(rel, mode, rdev)
	if err != nil {
		return nil, errnoOf(err)
	}
	defer e.close()
	m.chownToCaller(ctx, -1, e, rel)
	return n.finishCreate(ctx, a, rel, out)
}

// Symlink implements fs.NodeSymlinker.
func (n *node) Symlink(ctx context.Context, target, name string, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	m := n.m
	rel := joinRel(n.rel(), name)
	if errno := m.creatable(rel); errno != 0 {
		return nil, errno
	}
	a := m.actor(ctx)
	if errno := m.checkCreate(a, "symlink", m.target(rel)); errno != 0 {
		return nil, errno
	}
	defer m.cfg.Engine.Changing(m.target(rel))()
	e, err := m.be.symlink(ctx, target, rel)
	if err != nil {
		return nil, errnoOf(err)
	}
	defer e.close()
	m.chownToCaller(ctx, -1, e, rel)
	return n.finishCreate(ctx, a, rel, out)
}

// Link implements fs.NodeLinker. The new name shares the file's bytes, so
// its version is the file's; a bound caller's observation of the file is
// carried to the new name (a link grants nothing it did not have).
func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *gofuse.EntryOut) (*fs.Inode, syscall.Errno) {
	m := n.m
	src, ok := target.(*node)
	if !ok || !src.linked() {
		return nil, syscall.EXDEV
	}
	rel := joinRel(n.rel(), name)
	if errno := m.creatable(rel); errno != 0 {
		return nil, errno
	}
	srcRel := src.rel()
	switch m.access(srcRel) {
	case viewrules.Hidden:
		return nil, syscall.ENOENT
	case viewrules.ReadOnly:
		// A second name outside the rule would make the file writable.
		return nil, syscall.EROFS
	}
	a := m.actor(ctx)
	t := m.target(rel)
	if errno := m.checkCreate(a, "link", t); errno != 0 {
		return nil, errno
	}
	defer m.cfg.Engine.Changing(t)()
	if err := m.be.link(srcRel, rel); err != nil {
		return nil, errnoOf(err)
	}
	bs, err := m.be.stat(rel)
	if err != nil {
		return nil, errnoOf(err)
	}
	m.record(ctx, a, policy.OpLink, t, "", m.knownVersion(a, &bs.st), nil)
	if err := m.cfg.Engine.CopyMount(a, m.target(srcRel), t); err != nil {
		m.log.Warn("carry observation to a new link", "path", rel, "session", a.Session, "err", err)
	}
	fillAttr(&out.Attr, &bs.st)
	return n.newChild(ctx, &bs), 0
}

// Unlink implements fs.NodeUnlinker. A bound caller needs a fresh
// observation of what it removes.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	m := n.m
	rel := joinRel(n.rel(), name)
	if errno := m.changeable(rel); errno != 0 {
		return errno
	}
	a := m.actor(ctx)
	t := m.target(rel)
	unlock, errno := m.lock(ctx, t)
	if errno != 0 {
		return errno
	}
	defer unlock()
	e, err := m.be.entry(rel)
	if err != nil {
		return errnoOf(err)
	}
	defer e.close()
	bs, err := statAt(e.dir, e.name, false)
	if err != nil {
		return errnoOf(err)
	}
	var before provider.Version
	if errno := m.guardChange(a, "unlink", n.childNode(name), t, &bs.st, func() (provider.Version, error) {
		v, err := m.versionOfEntry(e, &bs.st)
		before = v
		return v, err
	}); errno != 0 {
		return errno
	}
	if before == "" {
		before = m.knownVersion(a, &bs.st)
	}
	defer m.cfg.Engine.Changing(t)()
	if err := m.be.unlink(ctx, rel, e); err != nil {
		return errnoOf(err)
	}
	m.record(ctx, a, policy.OpUnlink, t, before, "", nil)
	return 0
}

// Rmdir implements fs.NodeRmdirer.
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	m := n.m
	rel := joinRel(n.rel(), name)
	if errno := m.changeable(rel); errno != 0 {
		return errno
	}
	a := m.actor(ctx)
	e, err := m.be.entry(rel)
	if err != nil {
		return errnoOf(err)
	}
	defer e.close()
	bs, err := statAt(e.dir, e.name, false)
	if err != nil {
		return errnoOf(err)
	}
	before := version.OfMetadata(&bs.st)
	defer m.cfg.Engine.Changing(m.target(rel))()
	if err := m.be.rmdir(ctx, rel, e); err != nil {
		return errnoOf(err)
	}
	m.dirs.forget(rel)
	m.record(ctx, a, policy.OpUnlink, m.target(rel), before, "", nil)
	return 0
}

// linkRel gives the file at srcRel the second name dstRel (linkat without
// following a final link).
func (m *mountState) linkRel(srcRel, dstRel string) error {
	src, err := m.entryAt(srcRel)
	if err != nil {
		return err
	}
	defer src.close()
	dst, err := m.entryAt(dstRel)
	if err != nil {
		return err
	}
	defer dst.close()
	return unix.Linkat(src.dir, src.name, dst.dir, dst.name, 0)
}
