package local

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/patch"
)

func TestMove_PublishesDestinationThenRemovesSource(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "src.sh", "#!/bin/sh\r\necho hi\r\n")
	require.NoError(t, os.Chmod(filepath.Join(root, "src.sh"), 0o700))
	dst := target(t, fs, "bin/dst.sh")
	out, err := fs.MoveFile(context.Background(), target(t, fs, "src.sh"), dst, provider.MoveOptions{})
	require.NoError(t, err)
	assert.True(t, out.SourceDeleted)
	assert.Nil(t, out.SourceFailure)
	require.NotNil(t, out.SourceBefore)
	assert.Equal(t, "#!/bin/sh\necho hi\n", *out.SourceBefore)
	assert.Equal(t, provider.OpCreate, out.Destination.Operation)
	assert.Nil(t, out.Destination.Before)
	assert.Equal(t, "#!/bin/sh\necho hi\n", out.Destination.After)
	assert.Equal(t, versionOf(t, fs, dst), out.Destination.Version)
	assert.NoFileExists(t, filepath.Join(root, "src.sh"))
	assert.Equal(t, "#!/bin/sh\r\necho hi\r\n", get(t, root, "bin/dst.sh"), "bytes carried over")
	st, err := os.Stat(filepath.Join(root, "bin/dst.sh"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm(), "mode carried over")
}

func TestMove_WithHunksKeepsSourceLineEndings(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "a.txt", "one\r\ntwo\r\n")
	put(t, root, "b.txt", "old dest\n")
	hunks := []patch.Hunk{{Line: 4, OldLines: []string{"two"}, NewLines: []string{"2"}}}
	out, err := fs.MoveFile(context.Background(), target(t, fs, "a.txt"), target(t, fs, "b.txt"), provider.MoveOptions{Hunks: hunks})
	require.NoError(t, err)
	assert.Equal(t, "one\r\n2\r\n", get(t, root, "b.txt"))
	assert.Equal(t, "one\n2\n", out.Destination.After)
	assert.Equal(t, provider.OpUpdate, out.Destination.Operation)
	require.NotNil(t, out.Destination.Before)
	assert.Equal(t, "old dest\n", *out.Destination.Before)
	assert.Equal(t, "one\ntwo\n", *out.SourceBefore)
	assert.True(t, out.SourceDeleted)

	put(t, root, "c.txt", "x\n")
	bad := []patch.Hunk{{Line: 5, OldLines: []string{"nope"}, NewLines: []string{"y"}}}
	_, err = fs.MoveFile(context.Background(), target(t, fs, "c.txt"), target(t, fs, "d.txt"), provider.MoveOptions{Hunks: bad})
	requireCode(t, err, provider.CodePatchMismatch)
	assert.FileExists(t, filepath.Join(root, "c.txt"))
	assert.NoFileExists(t, filepath.Join(root, "d.txt"))
}

func TestMove_SameTarget(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "a.txt", "x")
	require.NoError(t, os.Symlink("a.txt", filepath.Join(root, "alias.txt")))
	_, err := fs.MoveFile(context.Background(), target(t, fs, "a.txt"), target(t, fs, "alias.txt"), provider.MoveOptions{})
	requireCode(t, err, provider.CodeSameTarget)
	assert.Equal(t, "x", get(t, root, "a.txt"))
}

func TestMove_Guards(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) (*FS, string, provider.Target, provider.Target) {
		fs, root := newTestFS(t, Options{})
		put(t, root, "src.txt", "src")
		put(t, root, "dst.txt", "dst")
		return fs, root, target(t, fs, "src.txt"), target(t, fs, "dst.txt")
	}
	t.Run("missing source is stale", func(t *testing.T) {
		fs, _, _, dst := setup(t)
		_, err := fs.MoveFile(ctx, target(t, fs, "nope.txt"), dst, provider.MoveOptions{})
		requireCode(t, err, provider.CodeStaleVersion)
	})
	t.Run("stale source", func(t *testing.T) {
		fs, root, src, dst := setup(t)
		v := versionOf(t, fs, src)
		put(t, root, "src.txt", "changed")
		_, err := fs.MoveFile(ctx, src, dst, provider.MoveOptions{ExpectedSource: &provider.VersionGuard{Version: v}})
		requireCode(t, err, provider.CodeStaleVersion)
		assert.Equal(t, "dst", get(t, root, "dst.txt"))
	})
	t.Run("destination CreateIfAbsent over an existing file", func(t *testing.T) {
		fs, root, src, dst := setup(t)
		_, err := fs.MoveFile(ctx, src, dst, provider.MoveOptions{ExpectedDestination: &provider.WriteIntent{Kind: provider.CreateIfAbsent}})
		requireCode(t, err, provider.CodeNotObserved)
		assert.Equal(t, "src", get(t, root, "src.txt"))
		assert.Equal(t, "dst", get(t, root, "dst.txt"))
	})
	t.Run("destination CreateIfAbsent loses to a file created after the probe", func(t *testing.T) {
		fs, root, src, _ := setup(t)
		fs.hooks.beforePublish = func(_ *os.File, name string) {
			require.NoError(t, os.WriteFile(filepath.Join(root, name), []byte("theirs"), 0o644))
		}
		_, err := fs.MoveFile(ctx, src, target(t, fs, "new.txt"), provider.MoveOptions{ExpectedDestination: &provider.WriteIntent{Kind: provider.CreateIfAbsent}})
		requireCode(t, err, provider.CodeNotObserved)
		assert.Equal(t, "theirs", get(t, root, "new.txt"))
		assert.Equal(t, "src", get(t, root, "src.txt"))
		assert.Empty(t, tempFiles(t, root))
	})
	t.Run("destination ReplaceIfVersion", func(t *testing.T) {
		fs, root, src, dst := setup(t)
		_, err := fs.MoveFile(ctx, src, dst, provider.MoveOptions{ExpectedDestination: &provider.WriteIntent{Kind: provider.ReplaceIfVersion, Version: "v1-0"}})
		requireCode(t, err, provider.CodeStaleVersion)
		out, err := fs.MoveFile(ctx, src, dst, provider.MoveOptions{
			ExpectedSource:      &provider.VersionGuard{Version: versionOf(t, fs, src)},
			ExpectedDestination: &provider.WriteIntent{Kind: provider.ReplaceIfVersion, Version: versionOf(t, fs, dst)},
		})
		require.NoError(t, err)
		assert.Equal(t, "src", get(t, root, "dst.txt"))
		assert.Equal(t, "dst", *out.Destination.Before)
	})
	t.Run("non-regular source and destination", func(t *testing.T) {
		fs, root, src, _ := setup(t)
		require.NoError(t, os.Mkdir(filepath.Join(root, "d"), 0o755))
		_, err := fs.MoveFile(ctx, target(t, fs, "d"), target(t, fs, "x"), provider.MoveOptions{})
		requireCode(t, err, provider.CodeNotRegularFile)
		_, err = fs.MoveFile(ctx, src, target(t, fs, "d"), provider.MoveOptions{})
		requireCode(t, err, provider.CodeNotRegularFile)
	})
	t.Run("binary source", func(t *testing.T) {
		fs, root, _, dst := setup(t)
		put(t, root, "bin", "\x00\x01")
		_, err := fs.MoveFile(ctx, target(t, fs, "bin"), dst, provider.MoveOptions{})
		requireCode(t, err, provider.CodeNotText)
	})
	t.Run("pre-abort changes nothing", func(t *testing.T) {
		fs, root, src, dst := setup(t)
		_, err := fs.MoveFile(cancelled(), src, dst, provider.MoveOptions{})
		requireCode(t, err, provider.CodeAborted)
		assert.Equal(t, "src", get(t, root, "src.txt"))
		assert.Equal(t, "dst", get(t, root, "dst.txt"))
	})
}

func TestMove_SourceThatCannotBeRemovedIsAnOutcome(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "src.txt", "data")
	fs.hooks.removeSource = func(*os.File, string) error {
		return &os.PathError{Op: "unlinkat", Path: "src.txt", Err: unix.EBUSY}
	}
	out, err := fs.MoveFile(context.Background(), target(t, fs, "src.txt"), target(t, fs, "dst.txt"), provider.MoveOptions{})
	require.NoError(t, err, "a failed removal is not an error")
	assert.False(t, out.SourceDeleted)
	require.NotNil(t, out.SourceFailure)
	assert.Equal(t, provider.CodeIOError, out.SourceFailure.Code)
	assert.Contains(t, out.SourceFailure.Message, "src.txt")
	assert.Equal(t, "data", get(t, root, "dst.txt"), "the destination is published")
	assert.Equal(t, "data", get(t, root, "src.txt"), "the source stays")
}

func TestMove_SourceInAppendOnlyDirectory(t *testing.T) {
	// A directory with the append-only attribute refuses unlink even to root.
	fs, root := newTestFS(t, Options{})
	put(t, root, "locked/src.txt", "data")
	dir := filepath.Join(root, "locked")
	if err := setAppendOnly(dir, true); err != nil {
		t.Skipf("the file system does not support the append-only attribute: %v", err)
	}
	defer func() { require.NoError(t, setAppendOnly(dir, false)) }()
	out, err := fs.MoveFile(context.Background(), target(t, fs, "locked/src.txt"), target(t, fs, "dst.txt"), provider.MoveOptions{})
	require.NoError(t, err)
	assert.False(t, out.SourceDeleted)
	require.NotNil(t, out.SourceFailure)
	assert.Equal(t, provider.CodePermissionDenied, out.SourceFailure.Code)
	assert.Equal(t, "data", get(t, root, "dst.txt"))
	assert.Equal(t, "data", get(t, root, "locked/src.txt"))
}

// fsAppendFL is FS_APPEND_FL from linux/fs.h.
const fsAppendFL = 0x20

// setAppendOnly sets or clears FS_APPEND_FL on a directory.
func setAppendOnly(path string, on bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var flags int
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.FS_IOC_GETFLAGS, uintptr(unsafe.Pointer(&flags))); e != 0 {
		return e
	}
	if on {
		flags |= fsAppendFL
	} else {
		flags &^= fsAppendFL
	}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.FS_IOC_SETFLAGS, uintptr(unsafe.Pointer(&flags))); e != 0 {
		return e
	}
	return nil
}
