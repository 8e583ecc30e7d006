package fuse

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/policy/localstore"
	"github.com/dshmount/dshmount/internal/provider/local"
	"github.com/dshmount/dshmount/internal/viewrules"
)

// recordingTransport serves through next (or fails with err) and records
// what it was asked to serve.
type recordingTransport struct {
	next   Transport
	err    error
	served gofuse.RawFileSystem
	mp     string
}

func (r *recordingTransport) Serve(fsys gofuse.RawFileSystem, mp string, opts *gofuse.MountOptions, attach func(Conn)) (Conn, error) {
	r.served, r.mp = fsys, mp
	if r.err != nil {
		return nil, r.err
	}
	return r.next.Serve(fsys, mp, opts, attach)
}

// newUnservedFS builds the file system of a fresh workspace without
// mounting it; it returns the workspace and the mountpoint directory.
func newUnservedFS(t *testing.T, adjust ...func(*Config)) (f *FileSystem, src, mnt string) {
	t.Helper()
	dir := t.TempDir()
	src, mnt = filepath.Join(dir, "src"), filepath.Join(dir, "mnt")
	require.NoError(t, os.Mkdir(src, 0o755))
	require.NoError(t, os.Mkdir(mnt, 0o755))
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := localstore.Open(filepath.Join(dir, "state"), policy.DefaultOptions().WithLogger(quiet))
	require.NoError(t, err)
	lfs, err := local.New(src, local.Options{Digests: store})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = lfs.Close()
		require.NoError(t, store.Close())
	})
	view, err := viewrules.New(lfs, viewrules.Rules{})
	require.NoError(t, err)
	cfg := Config{Local: lfs, View: view, Engine: policy.NewEngine(store, view), Logger: quiet}
	for _, a := range adjust {
		a(&cfg)
	}
	f, err = NewFileSystem(cfg)
	require.NoError(t, err)
	return f, src, mnt
}

// TestFileSystem_TransportServesTheBuiltFileSystem pins the split of Mount:
// NewFileSystem mounts nothing, the Transport given to Serve is handed the
// built raw file system, and a transport that fails leaves nothing mounted
// and the file system closed.
func TestFileSystem_TransportServesTheBuiltFileSystem(t *testing.T) {
	t.Run("failing transport", func(t *testing.T) {
		f, src, mnt := newUnservedFS(t)
		assert.False(t, isMounted(t, mnt), "NewFileSystem mounts nothing")
		tr := &recordingTransport{err: errors.New("no kernel today")}
		_, err := f.Serve(tr, mnt)
		require.Error(t, err)
		assert.Equal(t, "mount "+src+" at "+mnt+": no kernel today", err.Error())
		assert.Same(t, f.Raw, tr.served, "the transport serves the built file system")
		assert.True(t, f.state.closed.Load(), "a file system that was not served is closed")
		assert.False(t, isMounted(t, mnt))
	})
	t.Run("devfuse", func(t *testing.T) {
		requireFuse(t)
		f, src, mnt := newUnservedFS(t)
		require.NoError(t, os.WriteFile(filepath.Join(src, "a"), []byte("hi"), 0o644))
		tr := &recordingTransport{next: DevFuse{}}
		srv, err := f.Serve(tr, mnt)
		require.NoError(t, err)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			require.NoError(t, srv.Unmount(ctx))
		})
		assert.Same(t, f.Raw, tr.served)
		assert.Equal(t, mnt, tr.mp)
		got, err := os.ReadFile(filepath.Join(mnt, "a"))
		require.NoError(t, err)
		assert.Equal(t, "hi", string(got))
		assert.NotZero(t, srv.Requests()["LOOKUP"], "requests reach the counter the transport serves")
	})
}
