// Package reqcount counts the FUSE requests a filesystem answers, by
// opcode, without debug logging: a wrapper around go-fuse's RawFileSystem
// whose counters can be read while the mount serves.
package reqcount

import (
	"sync/atomic"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Op is one counted request kind, named as go-fuse's debug log names its
// opcode.
type Op int

// The counted opcodes. INIT, INTERRUPT and NOTIFY_REPLY never reach the
// RawFileSystem and are not counted; each node of a BATCH_FORGET counts as
// one FORGET.
const (
	Lookup Op = iota
	Forget
	GetAttr
	SetAttr
	Mknod
	Mkdir
	Unlink
	Rmdir
	Rename
	Link
	Symlink
	Readlink
	Access
	GetXAttr
	ListXAttr
	SetXAttr
	RemoveXAttr
	Create
	Tmpfile
	Open
	Read
	Lseek
	GetLk
	SetLk
	SetLkw
	Release
	Write
	CopyFileRange
	Ioctl
	Flush
	Fsync
	Fallocate
	OpenDir
	ReadDir
	ReadDirPlus
	ReleaseDir
	FsyncDir
	StatFs
	Statx
	numOps
)

var opNames = [numOps]string{
	Lookup: "LOOKUP", Forget: "FORGET", GetAttr: "GETATTR", SetAttr: "SETATTR",
	Mknod: "MKNOD", Mkdir: "MKDIR", Unlink: "UNLINK", Rmdir: "RMDIR", Rename: "RENAME",
	Link: "LINK", Symlink: "SYMLINK", Readlink: "READLINK", Access: "ACCESS",
	GetXAttr: "GETXATTR", ListXAttr: "LISTXATTR", SetXAttr: "SETXATTR", RemoveXAttr: "REMOVEXATTR",
	Create: "CREATE", Tmpfile: "TMPFILE", Open: "OPEN", Read: "READ", Lseek: "LSEEK",
	GetLk: "GETLK", SetLk: "SETLK", SetLkw: "SETLKW", Release: "RELEASE", Write: "WRITE",
	CopyFileRange: "COPY_FILE_RANGE", Ioctl: "IOCTL", Flush: "FLUSH", Fsync: "FSYNC",
	Fallocate: "FALLOCATE", OpenDir: "OPENDIR", ReadDir: "READDIR", ReadDirPlus: "READDIRPLUS",
	ReleaseDir: "RELEASEDIR", FsyncDir: "FSYNCDIR", StatFs: "STATFS", Statx: "STATX",
}

// String is the opcode's name in go-fuse's debug log (LOOKUP, GETATTR, …).
func (o Op) String() string {
	if o < 0 || o >= numOps {
		return "UNKNOWN"
	}
	return opNames[o]
}

// Counts holds one counter per opcode; the zero value is ready to use and
// safe for concurrent use.
type Counts struct {
	n [numOps]atomic.Uint64
}

func (c *Counts) add(o Op) { c.n[o].Add(1) }

// Snapshot returns the non-zero counters by opcode name.
func (c *Counts) Snapshot() map[string]uint64 {
	out := map[string]uint64{}
	for o := Op(0); o < numOps; o++ {
		if v := c.n[o].Load(); v > 0 {
			out[o.String()] = v
		}
	}
	return out
}

// Wrap returns raw with every request it answers counted in c.
func Wrap(raw fuse.RawFileSystem, c *Counts) fuse.RawFileSystem {
	return &counting{RawFileSystem: raw, c: c}
}

// counting forwards every request to the wrapped filesystem after counting
// it; methods not overridden (String, SetDebug, Init, OnUnmount) are not
// requests.
type counting struct {
	fuse.RawFileSystem
	c *Counts
}

func (f *counting) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	f.c.add(Lookup)
	return f.RawFileSystem.Lookup(cancel, h, name, out)
}

func (f *counting) Forget(nodeid, nlookup uint64) {
	f.c.add(Forget)
	f.RawFileSystem.Forget(nodeid, nlookup)
}

func (f *counting) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	f.c.add(GetAttr)
	return f.RawFileSystem.GetAttr(cancel, in, out)
}

func (f *counting) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	f.c.add(SetAttr)
	return f.RawFileSystem.SetAttr(cancel, in, out)
}

func (f *counting) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	f.c.add(Mknod)
	return f.RawFileSystem.Mknod(cancel, in, name, out)
}

func (f *counting) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	f.c.add(Mkdir)
	return f.RawFileSystem.Mkdir(cancel, in, name, out)
}

func (f *counting) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	f.c.add(Unlink)
	return f.RawFileSystem.Unlink(cancel, h, name)
}

func (f *counting) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	f.c.add(Rmdir)
	return f.RawFileSystem.Rmdir(cancel, h, name)
}

func (f *counting) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	f.c.add(Rename)
	return f.RawFileSystem.Rename(cancel, in, oldName, newName)
}

func (f *counting) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	f.c.add(Link)
	return f.RawFileSystem.Link(cancel, in, name, out)
}

func (f *counting) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	f.c.add(Symlink)
	return f.RawFileSystem.Symlink(cancel, h, target, name, out)
}

func (f *counting) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	f.c.add(Readlink)
	return f.RawFileSystem.Readlink(cancel, h)
}

func (f *counting) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	f.c.add(Access)
	return f.RawFileSystem.Access(cancel, in)
}

func (f *counting) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	f.c.add(GetXAttr)
	return f.RawFileSystem.GetXAttr(cancel, h, attr, dest)
}

func (f *counting) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	f.c.add(ListXAttr)
	return f.RawFileSystem.ListXAttr(cancel, h, dest)
}

func (f *counting) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	f.c.add(SetXAttr)
	return f.RawFileSystem.SetXAttr(cancel, in, attr, data)
}

func (f *counting) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	f.c.add(RemoveXAttr)
	return f.RawFileSystem.RemoveXAttr(cancel, h, attr)
}

func (f *counting) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	f.c.add(Create)
	return f.RawFileSystem.Create(cancel, in, name, out)
}

func (f *counting) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	f.c.add(Tmpfile)
	return f.RawFileSystem.Tmpfile(cancel, in, out)
}

func (f *counting) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	f.c.add(Open)
	return f.RawFileSystem.Open(cancel, in, out)
}

func (f *counting) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	f.c.add(Read)
	return f.RawFileSystem.Read(cancel, in, buf)
}

func (f *counting) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	f.c.add(Lseek)
	return f.RawFileSystem.Lseek(cancel, in, out)
}

func (f *counting) GetLk(cancel <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	f.c.add(GetLk)
	return f.RawFileSystem.GetLk(cancel, in, out)
}

func (f *counting) SetLk(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	f.c.add(SetLk)
	return f.RawFileSystem.SetLk(cancel, in)
}

func (f *counting) SetLkw(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	f.c.add(SetLkw)
	return f.RawFileSystem.SetLkw(cancel, in)
}

func (f *counting) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	f.c.add(Release)
	f.RawFileSystem.Release(cancel, in)
}

// Write is not counted: go-fuse calls it only after Writev answered
// ENOSYS, and Writev counted the request.
func (f *counting) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	return f.RawFileSystem.Write(cancel, in, data)
}

func (f *counting) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	f.c.add(Write)
	return f.RawFileSystem.Writev(cancel, in, data)
}

func (f *counting) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	f.c.add(CopyFileRange)
	return f.RawFileSystem.CopyFileRange(cancel, in)
}

func (f *counting) Ioctl(cancel <-chan struct{}, in *fuse.IoctlIn, inbuf []byte, out *fuse.IoctlOut, outbuf []byte) fuse.Status {
	f.c.add(Ioctl)
	return f.RawFileSystem.Ioctl(cancel, in, inbuf, out, outbuf)
}

func (f *counting) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	f.c.add(Flush)
	return f.RawFileSystem.Flush(cancel, in)
}

func (f *counting) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	f.c.add(Fsync)
	return f.RawFileSystem.Fsync(cancel, in)
}

func (f *counting) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	f.c.add(Fallocate)
	return f.RawFileSystem.Fallocate(cancel, in)
}

func (f *counting) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	f.c.add(OpenDir)
	return f.RawFileSystem.OpenDir(cancel, in, out)
}

func (f *counting) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	f.c.add(ReadDir)
	return f.RawFileSystem.ReadDir(cancel, in, out)
}

func (f *counting) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	f.c.add(ReadDirPlus)
	return f.RawFileSystem.ReadDirPlus(cancel, in, out)
}

func (f *counting) ReleaseDir(in *fuse.ReleaseIn) {
	f.c.add(ReleaseDir)
	f.RawFileSystem.ReleaseDir(in)
}

func (f *counting) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	f.c.add(FsyncDir)
	return f.RawFileSystem.FsyncDir(cancel, in)
}

func (f *counting) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	f.c.add(StatFs)
	return f.RawFileSystem.StatFs(cancel, h, out)
}

func (f *counting) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	f.c.add(Statx)
	return f.RawFileSystem.Statx(cancel, in, out)
}
