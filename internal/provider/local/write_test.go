package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/provider"
)

func TestWrite_CreateThenUpdate(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	tg := target(t, fs, "new/dir/f.txt")
	ctx := context.Background()
	out, err := fs.WriteText(ctx, tg, "one\n", nil)
	require.NoError(t, err)
	assert.Equal(t, provider.OpCreate, out.Operation)
	assert.Nil(t, out.Before)
	assert.Equal(t, "one\n", out.After)
	assert.Equal(t, "one\n", get(t, root, "new/dir/f.txt"))
	st, err := os.Stat(filepath.Join(root, "new/dir/f.txt"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644)&^umask(t), st.Mode().Perm())

	out, err = fs.WriteText(ctx, tg, "two\n", nil)
	require.NoError(t, err)
	assert.Equal(t, provider.OpUpdate, out.Operation)
	require.NotNil(t, out.Before)
	assert.Equal(t, "one\n", *out.Before)
	assert.Equal(t, "two\n", get(t, root, "new/dir/f.txt"))
	assert.Empty(t, tempFiles(t, root))
}

// umask reads the process umask from /proc without changing it.
func umask(t *testing.T) os.FileMode {
	data, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			require.NoError(t, err)
			return os.FileMode(m)
		}
	}
	t.Fatal("no Umask line in /proc/self/status")
	return 0
}

func TestWrite_Guards(t *testing.T) {
	ctx := context.Background()
	t.Run("CreateIfAbsent refuses an existing file", func(t *testing.T) {
		fs, root := newTestFS(t, Options{})
		put(t, root, "f.txt", "old")
		_, err := fs.WriteText(ctx, target(t, fs, "f.txt"), "new", &provider.WriteIntent{Kind: provider.CreateIfAbsent})
		requireCode(t, err, provider.CodeNotObserved)
		assert.Equal(t, "old", get(t, root, "f.txt"))
	})
	t.Run("CreateIfAbsent creates a missing file", func(t *testing.T) {
		fs, root := newTestFS(t, Options{})
		out, err := fs.WriteText(ctx, target(t, fs, "f.txt"), "new", &provider.WriteIntent{Kind: provider.CreateIfAbsent})
		require.NoError(t, err)
		assert.Equal(t, provider.OpCreate, out.Operation)
		assert.Equal(t, "new", get(t, root, "f.txt"))
	})
	t.Run("ReplaceIfVersion on a missing file is stale", func(t *testing.T) {
		fs, root := newTestFS(t, Options{})
		_, err := fs.WriteText(ctx, target(t, fs, "d/f.txt"), "new", &provider.WriteIntent{Kind: provider.ReplaceIfVersion, Version: "v1-0"})
		requireCode(t, err, provider.CodeStaleVersion)
		assert.NoDirExists(t, filepath.Join(root, "d"), "a refused write creates no directories")
	})
	t.Run("ReplaceIfVersion on a changed file is stale", func(t *testing.T) {
		fs, root := newTestFS(t, Options{})
		put(t, root, "f.txt", "old")
		tg := target(t, fs, "f.txt")
		v := versionOf(t, fs, tg)
		put(t, root, "f.txt", "changed out of band")
		_, err := fs.WriteText(ctx, tg, "new", &provider.WriteIntent{Kind: provider.ReplaceIfVersion, Version: v})
		requireCode(t, err, provider.CodeStaleVersion)
		assert.Equal(t, "changed out of band", get(t, root, "f.txt"))
	})
	t.Run("ReplaceIfVersion at the current version replaces", func(t *testing.T) {
		fs, root := newTestFS(t, Options{})
		put(t, root, "f.txt", "old")
		tg := target(t, fs, "f.txt")
		out, err := fs.WriteText(ctx, tg, "new", &provider.WriteIntent{Kind: provider.ReplaceIfVersion, Version: versionOf(t, fs, tg)})
		require.NoError(t, err)
		assert.Equal(t, "new", get(t, root, "f.txt"))
		assert.Equal(t, versionOf(t, fs, tg), out.Version, "the returned version equals a fresh stat")
	})
	t.Run("unknown intent", func(t *testing.T) {
		fs, _ := newTestFS(t, Options{})
		_, err := fs.WriteText(ctx, target(t, fs, "f.txt"), "x", &provider.WriteIntent{Kind: "bogus"})
		requireCode(t, err, provider.CodeInvalidArgument)
	})
}

func TestWrite_CreateIfAbsentLosesToFileCreatedAfterProbe(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	fs.hooks.beforePublish = func(dir *os.File, name string) {
		// Someone else creates the file between the probe and the rename.
		require.NoError(t, os.WriteFile(filepath.Join(root, name), []byte("theirs"), 0o644))
	}
	_, err := fs.WriteText(context.Background(), target(t, fs, "f.txt"), "mine", &provider.WriteIntent{Kind: provider.CreateIfAbsent})
	requireCode(t, err, provider.CodeNotObserved)
	assert.Equal(t, "theirs", get(t, root, "f.txt"))
	assert.Empty(t, tempFiles(t, root), "the staged temp file is removed")
}

func TestWrite_RenameFallbackRefusesExisting(t *testing.T) {
	// The link+unlink fallback used where RENAME_NOREPLACE is missing also
	// refuses an existing name.
	fs, root := newTestFS(t, Options{})
	put(t, root, "tmp", "staged")
	put(t, root, "dst", "existing")
	dir, err := fs.fence.OpenFile(".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	require.NoError(t, err)
	defer dir.Close()
	fd := int(dir.Fd())
	assert.ErrorIs(t, linkNoReplace(fd, "tmp", "dst"), unix.EEXIST)
	assert.Equal(t, "existing", get(t, root, "dst"))
	require.NoError(t, linkNoReplace(fd, "tmp", "fresh"))
	assert.Equal(t, "staged", get(t, root, "fresh"))
	assert.NoFileExists(t, filepath.Join(root, "tmp"), "the staged name is gone")

	assert.ErrorIs(t, renameInto(fd, "fresh", "dst", true), unix.EEXIST)
	require.NoError(t, renameInto(fd, "fresh", "dst", false))
	assert.Equal(t, "staged", get(t, root, "dst"))
}

func TestWrite_PreAbortLeavesFileUnchanged(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "f.txt", "old")
	_, err := fs.WriteText(cancelled(), target(t, fs, "f.txt"), "new", nil)
	requireCode(t, err, provider.CodeAborted)
	assert.Equal(t, "old", get(t, root, "f.txt"))
	_, err = fs.WriteText(cancelled(), target(t, fs, "g.txt"), "new", nil)
	requireCode(t, err, provider.CodeAborted)
	assert.NoFileExists(t, filepath.Join(root, "g.txt"))
}

func TestWrite_AbortAfterStagingRemovesTempFile(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "f.txt", "old")
	ctx, cancel := context.WithCancel(context.Background())
	fs.hooks.beforePublish = func(*os.File, string) { cancel() }
	_, err := fs.WriteText(ctx, target(t, fs, "f.txt"), "new", nil)
	requireCode(t, err, provider.CodeAborted)
	assert.Equal(t, "old", get(t, root, "f.txt"))
	assert.Empty(t, tempFiles(t, root))
}

func TestWrite_KeepsCRLFAndMode(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "w.txt", "a\r\nb\r\n")
	require.NoError(t, os.Chmod(filepath.Join(root, "w.txt"), 0o751))
	out, err := fs.WriteText(context.Background(), target(t, fs, "w.txt"), "x\ny\n", nil)
	require.NoError(t, err)
	assert.Equal(t, "x\r\ny\r\n", get(t, root, "w.txt"))
	assert.Equal(t, "a\nb\n", *out.Before, "Before is LF-normalized")
	assert.Equal(t, "x\ny\n", out.After, "After is LF-normalized")
	st, err := os.Stat(filepath.Join(root, "w.txt"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o751), st.Mode().Perm())

	// An LF file stays as written.
	put(t, root, "lf.txt", "a\n")
	_, err = fs.WriteText(context.Background(), target(t, fs, "lf.txt"), "b\n", nil)
	require.NoError(t, err)
	assert.Equal(t, "b\n", get(t, root, "lf.txt"))
}

func TestWrite_BeforeIsBounded(t *testing.T) {
	fs, root := newTestFS(t, Options{MaxBasisBytes: 8})
	ctx := context.Background()
	put(t, root, "big.txt", "0123456789")
	out, err := fs.WriteText(ctx, target(t, fs, "big.txt"), "small", nil)
	require.NoError(t, err)
	assert.Nil(t, out.Before, "a prior file over the bound has no basis")
	out, err = fs.WriteText(ctx, target(t, fs, "big.txt"), "0123456789", nil)
	require.NoError(t, err)
	assert.Nil(t, out.Before, "new content over the bound declines the basis")
	put(t, root, "bin.txt", "a\x00b")
	out, err = fs.WriteText(ctx, target(t, fs, "bin.txt"), "text", nil)
	require.NoError(t, err)
	assert.Nil(t, out.Before, "a binary prior file has no basis")
	assert.Equal(t, "text", get(t, root, "bin.txt"))
}

func TestWrite_LargeCRLFFileOverBoundKeepsCRLF(t *testing.T) {
	fs, root := newTestFS(t, Options{MaxBasisBytes: 4})
	put(t, root, "w.txt", "0123456789\r\n")
	_, err := fs.WriteText(context.Background(), target(t, fs, "w.txt"), "a\n", nil)
	require.NoError(t, err)
	assert.Equal(t, "a\r\n", get(t, root, "w.txt"))
}

func TestWrite_RefusesNonRegularAndInvalidText(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	require.NoError(t, os.Mkdir(filepath.Join(root, "d"), 0o755))
	_, err := fs.WriteText(context.Background(), target(t, fs, "d"), "x", nil)
	requireCode(t, err, provider.CodeNotRegularFile)
	_, err = fs.WriteText(context.Background(), target(t, fs, "."), "x", nil)
	requireCode(t, err, provider.CodeNotRegularFile)
	_, err = fs.WriteText(context.Background(), target(t, fs, "f"), "\xff", nil)
	requireCode(t, err, provider.CodeInvalidArgument)
	put(t, root, "file", "x")
	_, err = fs.WriteText(context.Background(), provider.Target{Key: provider.Key(root + "/file/child"), DisplayPath: "file/child"}, "x", nil)
	requireCode(t, err, provider.CodeNotDirectory)
}

func TestVersion_NamesBytesEvenWithinOneTick(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	tg := target(t, fs, "f.txt")
	ctx := context.Background()
	seen := map[provider.Version]int{}
	for i := range 20 {
		// Same size every time, as fast as possible: many land in one tick.
		content := fmt.Sprintf("same-size-%02d", i)
		out, err := fs.WriteText(ctx, tg, content, nil)
		require.NoError(t, err)
		prev, dup := seen[out.Version]
		require.False(t, dup, "write %d repeated the version of write %d", i, prev)
		seen[out.Version] = i
		assert.Equal(t, versionOf(t, fs, tg), out.Version, "post-write version equals a fresh stat")
	}
	// Writing bytes the file already had gives the version it had.
	again, err := fs.WriteText(ctx, tg, "same-size-07", nil)
	require.NoError(t, err)
	assert.Equal(t, 7, seen[again.Version], "equal bytes, equal version")
	assert.Equal(t, "same-size-07", get(t, root, "f.txt"))
}

func TestVersion_OutOfBandChange(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "f.txt", "one")
	tg := target(t, fs, "f.txt")
	v1 := versionOf(t, fs, tg)
	assert.Equal(t, v1, versionOf(t, fs, tg), "an unchanged file keeps its version")
	assert.Regexp(t, `^c1-[0-9a-f]{64}$`, string(v1))

	// In-place write of another size.
	require.NoError(t, os.WriteFile(filepath.Join(root, "f.txt"), []byte("three"), 0o644))
	v2 := versionOf(t, fs, tg)
	assert.NotEqual(t, v1, v2)

	// Same size, and the times put back to what they were: the bytes count.
	var st unix.Stat_t
	require.NoError(t, unix.Stat(filepath.Join(root, "f.txt"), &st))
	require.NoError(t, os.WriteFile(filepath.Join(root, "f.txt"), []byte("THREE"), 0o644))
	ts := []unix.Timespec{st.Atim, st.Mtim}
	require.NoError(t, unix.UtimesNano(filepath.Join(root, "f.txt"), ts))
	v3 := versionOf(t, fs, tg)
	assert.NotEqual(t, v2, v3)

	// Metadata only: mode, times, a rewrite of identical bytes through a new inode.
	require.NoError(t, os.Chmod(filepath.Join(root, "f.txt"), 0o600))
	assert.Equal(t, v3, versionOf(t, fs, tg), "chmod")
	now := time.Now()
	require.NoError(t, os.Chtimes(filepath.Join(root, "f.txt"), now, now))
	assert.Equal(t, v3, versionOf(t, fs, tg), "touch")
	put(t, root, "f.tmp", "THREE")
	require.NoError(t, os.Rename(filepath.Join(root, "f.tmp"), filepath.Join(root, "f.txt")))
	assert.Equal(t, v3, versionOf(t, fs, tg), "identical bytes renamed over")
}

func TestMutations_SandboxEscapesRefused(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	outside := filepath.Dir(root)
	put(t, outside, "secret.txt", "secret")
	require.NoError(t, os.Mkdir(filepath.Join(root, "d"), 0o755))
	put(t, root, "d/f.txt", "mine")
	tg := target(t, fs, "d/f.txt")
	dirTarget := target(t, fs, "d/new.txt")
	// After resolution the directory is swapped for a link to the outside.
	require.NoError(t, os.Rename(filepath.Join(root, "d"), filepath.Join(root, "d.orig")))
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "d")))
	ctx := context.Background()
	forged := provider.Target{Key: provider.Key(filepath.Join(outside, "secret.txt")), DisplayPath: "../secret.txt"}
	for _, tc := range []struct {
		name string
		run  func(provider.Target) error
	}{
		{"write", func(tg provider.Target) error { _, err := fs.WriteText(ctx, tg, "pwned", nil); return err }},
		{"edit", func(tg provider.Target) error {
			_, err := fs.EditText(ctx, tg, provider.EditRequest{OldString: "secret", NewString: "pwned"}, nil)
			return err
		}},
		{"patch", func(tg provider.Target) error { _, err := fs.PatchText(ctx, tg, nil, nil); return err }},
		{"delete", func(tg provider.Target) error { _, err := fs.DeleteFile(ctx, tg, nil); return err }},
		{"move source", func(tg provider.Target) error {
			_, err := fs.MoveFile(ctx, tg, target(t, fs, "moved.txt"), provider.MoveOptions{})
			return err
		}},
		{"move destination", func(tg provider.Target) error {
			put(t, root, "src.txt", "src")
			_, err := fs.MoveFile(ctx, target(t, fs, "src.txt"), tg, provider.MoveOptions{})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, victim := range []provider.Target{tg, dirTarget, forged} {
				requireCode(t, tc.run(victim), provider.CodeSandboxDenied)
			}
			assert.Equal(t, "secret", get(t, outside, "secret.txt"))
			assert.NoFileExists(t, filepath.Join(outside, "new.txt"))
			assert.NoFileExists(t, filepath.Join(outside, "f.txt"))
		})
	}
	_, err := fs.WriteText(ctx, provider.Target{Key: provider.Key(root + "/../secret.txt"), DisplayPath: "x"}, "pwned", nil)
	requireCode(t, err, provider.CodeSandboxDenied)
	assert.Equal(t, "secret", get(t, outside, "secret.txt"))
	assert.Empty(t, tempFiles(t, outside))
}

func TestWrite_KeepsOwnerAndNewFilesTakeTheDirectoryOwner(t *testing.T) {
	if unix.Geteuid() != 0 {
		t.Skip("giving files away needs root")
	}
	fs, root := newTestFS(t, Options{})
	require.NoError(t, os.Mkdir(filepath.Join(root, "home"), 0o755))
	require.NoError(t, os.Chown(filepath.Join(root, "home"), 1234, 5678))
	put(t, root, "owned.txt", "x")
	require.NoError(t, os.Chown(filepath.Join(root, "owned.txt"), 4321, 8765))
	ctx := context.Background()

	_, err := fs.WriteText(ctx, target(t, fs, "owned.txt"), "y", nil)
	require.NoError(t, err)
	_, err = fs.WriteText(ctx, target(t, fs, "home/new/file.txt"), "z", nil)
	require.NoError(t, err)
	for _, tc := range []struct {
		rel      string
		uid, gid uint32
	}{
		{"owned.txt", 4321, 8765},
		{"home/new", 1234, 5678},
		{"home/new/file.txt", 1234, 5678},
	} {
		var st unix.Stat_t
		require.NoError(t, unix.Stat(filepath.Join(root, tc.rel), &st))
		assert.Equal(t, [2]uint32{tc.uid, tc.gid}, [2]uint32{st.Uid, st.Gid}, tc.rel)
	}
}
