package fuse

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

// fakeConn is a connection without a kernel: it records the calls the
// file system makes into the kernel.
type fakeConn struct {
	done chan struct{}

	mu    sync.Mutex
	calls []string
}

func (c *fakeConn) record(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, fmt.Sprintf(format, args...))
}

// took returns the calls so far and forgets them.
func (c *fakeConn) took() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls := c.calls
	c.calls = nil
	return calls
}

func (c *fakeConn) Done() <-chan struct{} { return c.done }

func (c *fakeConn) NotifyContent(node uint64, off, length int64) gofuse.Status {
	c.record("content %d %d %d", node, off, length)
	return gofuse.OK
}

func (c *fakeConn) NotifyEntry(parent uint64, name string) gofuse.Status {
	c.record("entry %d %s", parent, name)
	return gofuse.OK
}

func (c *fakeConn) NotifyDelete(parent, child uint64, name string) gofuse.Status {
	c.record("delete %d %d %s", parent, child, name)
	return gofuse.OK
}

func (c *fakeConn) RegisterBackingFile(m *gofuse.BackingMap) (int32, syscall.Errno) {
	c.record("register %t", m.Fd > 2)
	return 7, 0
}

func (c *fakeConn) UnregisterBackingFile(id int32) syscall.Errno {
	c.record("unregister %d", id)
	return 0
}

// fakeTransport serves nothing: it attaches its connection and returns it.
type fakeTransport struct{ conn *fakeConn }

func (tr fakeTransport) Serve(_ gofuse.RawFileSystem, _ string, _ *gofuse.MountOptions, attach func(Conn)) (Conn, error) {
	attach(tr.conn)
	return tr.conn, nil
}

// TestFileSystem_KernelCallsGoThroughTheConn pins that every call into the
// kernel goes through the Transport's Conn, also after the server's Init
// (which would hand go-fuse's bridge the /dev/fuse server instead): an
// open with passthrough registers its backing file over the Conn and its
// release unregisters it; the invalidator's drops for a socket change are
// NotifyContent, NotifyEntry and NotifyDelete on the Conn.
func TestFileSystem_KernelCallsGoThroughTheConn(t *testing.T) {
	f, src, mnt := newUnservedFS(t, func(c *Config) { c.Passthrough = true })
	require.NoError(t, os.WriteFile(filepath.Join(src, "a.txt"), []byte("a"), 0o644))
	conn := &fakeConn{done: make(chan struct{})}
	srv, err := f.Serve(fakeTransport{conn}, mnt)
	require.NoError(t, err)
	t.Cleanup(func() {
		close(conn.done)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		require.NoError(t, srv.Unmount(ctx))
	})
	f.Raw.Init(nil) // what go-fuse's server does after INIT

	caller := gofuse.Caller{Pid: uint32(os.Getpid())}
	var entry gofuse.EntryOut
	require.Equal(t, gofuse.OK, f.Raw.Lookup(nil, &gofuse.InHeader{NodeId: gofuse.FUSE_ROOT_ID, Caller: caller}, "a.txt", &entry))
	a := entry.NodeId

	for _, tc := range []struct {
		name string
		do   func(t *testing.T)
		want []string
	}{
		{"PassthroughOpenRegistersTheBackingFile", func(t *testing.T) {
			var out gofuse.OpenOut
			require.Equal(t, gofuse.OK, f.Raw.Open(nil, &gofuse.OpenIn{InHeader: gofuse.InHeader{NodeId: a, Caller: caller},
				Flags: uint32(os.O_RDONLY)}, &out))
			assert.NotZero(t, out.OpenFlags&gofuse.FOPEN_PASSTHROUGH, "the open is passthrough")
			assert.EqualValues(t, 7, out.BackingID, "with the Conn's backing id")
			f.Raw.Release(nil, &gofuse.ReleaseIn{InHeader: gofuse.InHeader{NodeId: a, Caller: caller}, Fh: out.Fh})
		}, []string{"register true", "unregister 7"}},
		{"SocketWriteDropsTheDirectoryAndTheFile", func(t *testing.T) {
			srv.inval.apply(policy.Event{Op: policy.OpWrite, Target: provider.Target{DisplayPath: "a.txt"}})
		}, []string{"content 1 0 0", fmt.Sprintf("content %d 0 0", a)}},
		{"SocketCreateDropsTheNegativeEntry", func(t *testing.T) {
			srv.inval.apply(policy.Event{Op: policy.OpWrite, Target: provider.Target{DisplayPath: "b.txt"}})
		}, []string{"content 1 0 0", "entry 1 b.txt"}},
		{"SocketDeleteDeletesTheEntry", func(t *testing.T) {
			srv.inval.apply(policy.Event{Op: policy.OpDelete, Target: provider.Target{DisplayPath: "a.txt"}})
		}, []string{"content 1 0 0", fmt.Sprintf("content %d 0 0", a), fmt.Sprintf("delete 1 %d a.txt", a)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn.took()
			tc.do(t)
			got := conn.took()
			assert.Equal(t, tc.want, slices.Clip(got))
		})
	}
}
