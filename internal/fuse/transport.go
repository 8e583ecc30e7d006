package fuse

import (
	"fmt"
	"syscall"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"
)

// Transport connects a built file system (NewFileSystem) to the kernel.
// DevFuse, go-fuse's /dev/fuse request loop, is the first; another (FUSE
// over io_uring) is a new type, not an edit of Mount.
//
// Every call the file system makes into the kernel goes through the Conn
// the Transport serves: the invalidator's notifications and passthrough's
// backing-file registrations leave go-fuse's node bridge through its
// fs.Options.ServerCallbacks (kernelCalls), which forward to the Conn
// attached, and the raw file system's Init does not replace them
// (keepCallbacks).
type Transport interface {
	// Serve mounts fsys at the absolute mountpoint with opts, serves it in
	// the background and returns once the kernel has answered INIT. It
	// calls attach with the connection before it serves the first request
	// after INIT: go-fuse gives up passthrough for good when its first
	// registration fails, so the file system's kernel calls must reach the
	// connection from the first OPEN on. When it fails, nothing stays
	// mounted.
	Serve(fsys gofuse.RawFileSystem, mountpoint string, opts *gofuse.MountOptions, attach func(Conn)) (Conn, error)
}

// Conn is a kernel connection a Transport serves, and the calls into the
// kernel made over it. Nodes are the kernel's node ids (go-fuse's bridge
// knows them; the mount's code names nodes by *fs.Inode).
type Conn interface {
	// Done is closed when the serve loop has exited: after an unmount, or
	// when the mount was removed from outside.
	Done() <-chan struct{}
	// NotifyContent drops the kernel's cached pages of node from off for
	// length bytes (0, 0: all of them) and its attributes; dirty pages
	// are written back first.
	NotifyContent(node uint64, off, length int64) gofuse.Status
	// NotifyEntry drops the kernel's entry name in the directory parent
	// (a positive or a negative one).
	NotifyEntry(parent uint64, name string) gofuse.Status
	// NotifyDelete tells the kernel that the entry name of parent, which
	// resolved to child, is gone.
	NotifyDelete(parent, child uint64, name string) gofuse.Status
	// RegisterBackingFile registers the open backing file of m for kernel
	// passthrough and returns its id for an OPEN's answer.
	RegisterBackingFile(m *gofuse.BackingMap) (int32, syscall.Errno)
	// UnregisterBackingFile drops the registration id.
	UnregisterBackingFile(id int32) syscall.Errno
}

// DevFuse serves over /dev/fuse with go-fuse's request loop
// (gofuse.NewServer): as root it calls mount(2) itself (MountOptions.
// DirectMount), otherwise it relies on fusermount3.
type DevFuse struct{}

var _ Transport = DevFuse{}

// Serve implements Transport. gofuse.NewServer mounts and answers INIT
// before it returns; the loop that serves the next requests starts after
// attach.
func (DevFuse) Serve(fsys gofuse.RawFileSystem, mountpoint string, opts *gofuse.MountOptions, attach func(Conn)) (Conn, error) {
	server, err := gofuse.NewServer(fsys, mountpoint, opts)
	if err != nil {
		return nil, err
	}
	c := &devFuseConn{server: server, done: make(chan struct{})}
	attach(c)
	go func() {
		defer close(c.done)
		server.Serve()
	}()
	if err := server.WaitMount(); err != nil {
		_ = server.Unmount()
		return nil, fmt.Errorf("kernel did not answer: %w", err)
	}
	return c, nil
}

// devFuseConn is a DevFuse connection: the life of go-fuse's serve loop,
// and its server's calls into the kernel.
type devFuseConn struct {
	server *gofuse.Server
	done   chan struct{}
}

var _ Conn = (*devFuseConn)(nil)

// Done implements Conn.
func (c *devFuseConn) Done() <-chan struct{} { return c.done }

// NotifyContent implements Conn.
func (c *devFuseConn) NotifyContent(node uint64, off, length int64) gofuse.Status {
	return c.server.InodeNotify(node, off, length)
}

// NotifyEntry implements Conn.
func (c *devFuseConn) NotifyEntry(parent uint64, name string) gofuse.Status {
	return c.server.EntryNotify(parent, name)
}

// NotifyDelete implements Conn.
func (c *devFuseConn) NotifyDelete(parent, child uint64, name string) gofuse.Status {
	return c.server.DeleteNotify(parent, child, name)
}

// RegisterBackingFile implements Conn.
func (c *devFuseConn) RegisterBackingFile(m *gofuse.BackingMap) (int32, syscall.Errno) {
	return c.server.RegisterBackingFd(m)
}

// UnregisterBackingFile implements Conn.
func (c *devFuseConn) UnregisterBackingFile(id int32) syscall.Errno {
	return c.server.UnregisterBackingFd(id)
}
