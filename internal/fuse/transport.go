package fuse

import (
	"fmt"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"
)

// Transport connects a built file system (NewFileSystem) to the kernel.
// DevFuse, go-fuse's /dev/fuse request loop, is the first; another (FUSE
// over io_uring) is a new type, not an edit of Mount.
//
// Kernel notifications (the invalidator's NotifyContent, NotifyEntry,
// NotifyDelete) and passthrough backing-file registration do not go
// through the Transport yet: go-fuse's node bridge makes both on the
// *gofuse.Server its RawFileSystem.Init receives, with kernel node ids only
// the bridge knows. Routing them through a Conn means giving the bridge
// fs.Options.ServerCallbacks that forward to the Conn, and not letting
// Init replace them.
type Transport interface {
	// Serve mounts fsys at the absolute mountpoint with opts, serves it in
	// the background and returns once the kernel has answered INIT. When it
	// fails, nothing stays mounted.
	Serve(fsys gofuse.RawFileSystem, mountpoint string, opts *gofuse.MountOptions) (Conn, error)
}

// Conn is a kernel connection a Transport serves.
type Conn interface {
	// Done is closed when the serve loop has exited: after an unmount, or
	// when the mount was removed from outside.
	Done() <-chan struct{}
}

// DevFuse serves over /dev/fuse with go-fuse's request loop
// (gofuse.NewServer): as root it calls mount(2) itself (MountOptions.
// DirectMount), otherwise it relies on fusermount3.
type DevFuse struct{}

var _ Transport = DevFuse{}

// Serve implements Transport.
func (DevFuse) Serve(fsys gofuse.RawFileSystem, mountpoint string, opts *gofuse.MountOptions) (Conn, error) {
	server, err := gofuse.NewServer(fsys, mountpoint, opts)
	if err != nil {
		return nil, err
	}
	c := &devFuseConn{done: make(chan struct{})}
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

// devFuseConn is a DevFuse connection: the life of go-fuse's serve loop.
type devFuseConn struct{ done chan struct{} }

// Done implements Conn.
func (c *devFuseConn) Done() <-chan struct{} { return c.done }
