package integration

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/provider"
)

// Disk full (issue 10, item 6): the workspace is a 2 MiB tmpfs filled up to
// a small headroom. Writes too big for it fail through the socket with
// FS_IO_ERROR and through the mount with ENOSPC, leave the previous content
// intact and leave no temp files behind; freeing space makes writes work
// again.

const (
	enospcOriginal = "original content\nline two\n"
	enospcHeadroom = 64 << 10
	enospcBig      = 512 << 10
)

func TestENOSPC_FailedWritesKeepPreviousContentAndLeaveNoTempFiles(t *testing.T) {
	requireFUSE(t)
	for _, mode := range []struct {
		name string
		args []string
	}{
		{"Passthrough", nil},
		{"DaemonReadWrite", []string{"--passthrough=false"}},
	} {
		t.Run(mode.name, func(t *testing.T) { enospcScenario(t, mode.args) })
	}
}

// enospcScenario runs every disk-full case on one daemon started with args.
func enospcScenario(t *testing.T, args []string) {
	base := t.TempDir()
	dirs := &daemonDirs{Src: filepath.Join(base, "src"), Mnt: filepath.Join(base, "mnt"), State: filepath.Join(base, "state")}
	require.NoError(t, os.MkdirAll(dirs.Src, 0o755))
	require.NoError(t, os.MkdirAll(dirs.Mnt, 0o755))
	// Registered before startDaemon: cleanups run last-in first-out, so the
	// tmpfs is unmounted after the daemon has stopped.
	mountTmpfs(t, dirs.Src, "2m")
	files := map[string]string{"keep.txt": enospcOriginal, "edit.txt": enospcOriginal, "inplace.txt": enospcOriginal}
	d := startDaemon(t, daemonOptions{Dirs: dirs, Files: files, Args: args})
	fillLeaving(t, filepath.Join(d.Src, "filler"), enospcHeadroom)
	names := []string{"edit.txt", "filler", "inplace.txt", "keep.txt"}
	big := strings.Repeat("0123456789abcde\n", enospcBig/16)
	ctx := testCtx(t)

	t.Run("SocketWriteReplacing", func(t *testing.T) {
		_, err := d.Client.Write(ctx, control.WriteParams{Path: "keep.txt", Content: big, Unconditional: true})
		requireNoSpaceRPC(t, err)
		t.Logf("socket write error: %v", err)
		assertBacking(t, d, "keep.txt", enospcOriginal)
		assertMount(t, d, "keep.txt", enospcOriginal)
		assertNames(t, d.Src, names)
	})
	t.Run("SocketWriteCreating", func(t *testing.T) {
		_, err := d.Client.Write(ctx, control.WriteParams{Path: "new.txt", Content: big,
			Expected: &control.WriteExpected{Kind: provider.CreateIfAbsent}})
		requireNoSpaceRPC(t, err)
		_, err = os.Lstat(filepath.Join(d.Src, "new.txt"))
		assert.True(t, errors.Is(err, os.ErrNotExist), "no partial new file: %v", err)
		assertNames(t, d.Src, names)
	})
	t.Run("SocketGuardedEdit", func(t *testing.T) {
		st, err := d.Client.Stat(ctx, control.StatParams{Path: "edit.txt"})
		require.NoError(t, err)
		_, err = d.Client.Edit(ctx, control.EditParams{Path: "edit.txt", OldString: "line two", NewString: big,
			Expected: &control.VersionExpected{Version: st.Version}})
		requireNoSpaceRPC(t, err)
		assertBacking(t, d, "edit.txt", enospcOriginal)
		assertMount(t, d, "edit.txt", enospcOriginal)
		after, err := d.Client.Stat(ctx, control.StatParams{Path: "edit.txt"})
		require.NoError(t, err)
		assert.Equal(t, st.Version, after.Version, "a failed edit does not change the version")
		assertNames(t, d.Src, names)
	})
	t.Run("MountEditorSaveViaTempAndRename", func(t *testing.T) {
		// An editor writes a temp file, fsyncs and closes it, and renames
		// it over the original only when all of that succeeded.
		tmp := d.m(".keep.txt.swp")
		err := writeFileSynced(tmp, []byte(big))
		require.Error(t, err, "a 512 KiB save into 64 KiB of space must fail")
		assert.True(t, errors.Is(err, syscall.ENOSPC), "the mount reports ENOSPC, got %v", err)
		require.NoError(t, os.Remove(tmp), "the editor removes its temp file")
		assertMount(t, d, "keep.txt", enospcOriginal)
		assertBacking(t, d, "keep.txt", enospcOriginal)
		assertNames(t, d.Src, names)
	})
	t.Run("MountInPlaceWrite", func(t *testing.T) {
		// In place, a failed write may leave part of the data, as on any
		// disk; the error must reach the writer and both views must agree.
		f, err := os.OpenFile(d.m("inplace.txt"), os.O_WRONLY|os.O_APPEND, 0)
		require.NoError(t, err)
		_, werr := f.Write([]byte(big))
		serr := f.Sync()
		cerr := f.Close()
		err = errors.Join(werr, serr, cerr)
		require.Error(t, err, "write, fsync or close reports the full disk")
		assert.True(t, errors.Is(err, syscall.ENOSPC), "got %v", err)
		t.Logf("in-place write: write %v, fsync %v, close %v", werr, serr, cerr)
		viaMount, err := os.ReadFile(d.m("inplace.txt"))
		require.NoError(t, err)
		backing, err := os.ReadFile(filepath.Join(d.Src, "inplace.txt"))
		require.NoError(t, err)
		assert.Equal(t, len(backing), len(viaMount), "the mount and the disk agree on the size")
		assert.True(t, strings.HasPrefix(string(backing), enospcOriginal), "the original bytes are untouched")
		assertNames(t, d.Src, names)
	})
	t.Run("WritesWorkAgainOnceSpaceIsFreed", func(t *testing.T) {
		require.NoError(t, os.Remove(d.m("filler")))
		_, err := d.Client.Write(ctx, control.WriteParams{Path: "keep.txt", Content: big, Unconditional: true})
		require.NoError(t, err)
		assertMount(t, d, "keep.txt", big)
		require.NoError(t, writeFileSynced(d.m("saved.txt"), []byte(big[:enospcHeadroom*2])))
		assertBacking(t, d, "saved.txt", big[:enospcHeadroom*2])
	})
}

// mountTmpfs mounts a tmpfs of the given size on dir and unmounts it in
// t.Cleanup. Without root the test is skipped; as root a failure to mount
// fails the test when DSH_REQUIRE_FUSE=1.
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a size-limited tmpfs needs root")
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0755"); err != nil {
		if os.Getenv("DSH_REQUIRE_FUSE") == "1" {
			t.Fatalf("mounting a tmpfs on %s as root: %v", dir, err)
		}
		t.Skipf("cannot mount a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmounting the tmpfs on %s: %v", dir, err)
			_ = unix.Unmount(dir, unix.MNT_DETACH)
		}
	})
}

// fillLeaving writes a file that leaves about headroom bytes free on the
// file system of path.
func fillLeaving(t *testing.T, path string, headroom int64) {
	t.Helper()
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(filepath.Dir(path), &st))
	free := int64(st.Bavail) * st.Bsize
	require.Greater(t, free, headroom, "the tmpfs is already full")
	require.NoError(t, os.WriteFile(path, make([]byte, free-headroom), 0o644))
	require.NoError(t, unix.Statfs(filepath.Dir(path), &st))
	left := int64(st.Bavail) * st.Bsize
	require.LessOrEqual(t, left, headroom+64<<10, "headroom after filling")
	require.Less(t, left, int64(enospcBig)/2, "the big writes cannot fit")
}

// requireNoSpaceRPC checks a socket error is FS_IO_ERROR about space.
func requireNoSpaceRPC(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err, "the write cannot fit on the disk")
	assert.ErrorIs(t, err, provider.ErrIOError)
	assert.Contains(t, strings.ToLower(err.Error()), "no space", "the message says the disk is full")
}

// writeFileSynced creates path, writes data, fsyncs and closes, returning
// the first error (and the close error).
func writeFileSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	serr := f.Sync()
	return errors.Join(werr, serr, f.Close())
}

// assertMount checks the content of rel read through the mount.
func assertMount(t *testing.T, d *daemon, rel, want string) {
	t.Helper()
	b, err := os.ReadFile(d.m(rel))
	require.NoError(t, err)
	assert.Equal(t, want, string(b), "file %s through the mount", rel)
}

// assertNames checks dir holds exactly names (no temp files left).
func assertNames(t *testing.T, dir string, names []string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := slices.Clone(names)
	slices.Sort(want)
	assert.Equal(t, want, got, "names in %s", dir)
}
