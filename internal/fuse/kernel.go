package fuse

import (
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"
)

// kernelCalls is the node bridge's way to the kernel (fs.Options.
// ServerCallbacks, and the backing-file registration go-fuse looks for on
// it): every call goes to the Conn the Transport attached. The invalidator
// (fs.Inode.NotifyContent, NotifyEntry, NotifyDelete) and passthrough (the
// bridge registers a handle's backing file at OPEN) reach the kernel
// through it only.
//
// Before a Conn is attached a notification answers ENOTCONN, a
// registration ENOSYS; Transport.Serve attaches before the first OPEN.
type kernelCalls struct {
	conn atomic.Pointer[Conn]
}

var _ fs.ServerCallbacks = (*kernelCalls)(nil)

// attach routes the calls to c from now on.
func (k *kernelCalls) attach(c Conn) { k.conn.Store(&c) }

// to returns the attached Conn, or nil.
func (k *kernelCalls) to() Conn {
	if c := k.conn.Load(); c != nil {
		return *c
	}
	return nil
}

// InodeNotify implements fs.ServerCallbacks.
func (k *kernelCalls) InodeNotify(node uint64, off, length int64) gofuse.Status {
	if c := k.to(); c != nil {
		return c.NotifyContent(node, off, length)
	}
	return gofuse.Status(syscall.ENOTCONN)
}

// EntryNotify implements fs.ServerCallbacks.
func (k *kernelCalls) EntryNotify(parent uint64, name string) gofuse.Status {
	if c := k.to(); c != nil {
		return c.NotifyEntry(parent, name)
	}
	return gofuse.Status(syscall.ENOTCONN)
}

// DeleteNotify implements fs.ServerCallbacks.
func (k *kernelCalls) DeleteNotify(parent, child uint64, name string) gofuse.Status {
	if c := k.to(); c != nil {
		return c.NotifyDelete(parent, child, name)
	}
	return gofuse.Status(syscall.ENOTCONN)
}

// InodeRetrieveCache implements fs.ServerCallbacks; the mount never reads
// the kernel's cache back.
func (k *kernelCalls) InodeRetrieveCache(uint64, int64, []byte) (int, gofuse.Status) {
	return 0, gofuse.ENOSYS
}

// InodeNotifyStoreCache implements fs.ServerCallbacks; the mount never
// stores into the kernel's cache.
func (k *kernelCalls) InodeNotifyStoreCache(uint64, int64, []byte) gofuse.Status {
	return gofuse.ENOSYS
}

// RegisterBackingFd is what go-fuse's bridge calls to register a
// passthrough handle's backing file (its serverBackingFdCallbacks). A
// failure makes the bridge give up passthrough for the mount's life.
func (k *kernelCalls) RegisterBackingFd(m *gofuse.BackingMap) (int32, syscall.Errno) {
	if c := k.to(); c != nil {
		return c.RegisterBackingFile(m)
	}
	return 0, syscall.ENOSYS
}

// UnregisterBackingFd is what the bridge calls when the last handle using
// a registration is released.
func (k *kernelCalls) UnregisterBackingFd(id int32) syscall.Errno {
	if c := k.to(); c != nil {
		return c.UnregisterBackingFile(id)
	}
	return syscall.ENOSYS
}

// keepCallbacks is the raw file system with Init stopped: go-fuse's
// server calls Init with itself, and the bridge would take it as its
// ServerCallbacks instead of kernelCalls (in go-fuse v2.12.1 that is all
// the bridge's Init does).
type keepCallbacks struct{ gofuse.RawFileSystem }

// Init implements gofuse.RawFileSystem: the bridge keeps kernelCalls.
func (keepCallbacks) Init(*gofuse.Server) {}
