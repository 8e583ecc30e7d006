package local

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

func TestDelete_GuardedUnguardedMissing(t *testing.T) {
	ctx := context.Background()
	t.Run("unguarded", func(t *testing.T) {
		fs, root := newTestFS(t, Options{})
		put(t, root, "f.txt", "a\r\nb")
		out, err := fs.DeleteFile(ctx, target(t, fs, "f.txt"), nil)
		require.NoError(t, err)
		require.NotNil(t, out.Before)
		assert.Equal(t, "a\nb", *out.Before)
		assert.NoFileExists(t, filepath.Join(root, "f.txt"))
	})
	t.Run("guarded at the current version", func(t *testing.T) {
		fs, root := newTestFS(t, Options{})
		put(t, root, "f.txt", "x")
		tg := target(t, fs, "f.txt")
		_, err := fs.DeleteFile(ctx, tg, &provider.VersionGuard{Version: versionOf(t, fs, tg)})
		require.NoError(t, err)
		assert.NoFileExists(t, filepath.Join(root, "f.txt"))
	})
	t.Run("guarded at a stale version", func(t *testing.T) {
		fs, root := newTestFS(t, Options{})
		put(t, root, "f.txt", "x")
		tg := target(t, fs, "f.txt")
		v := versionOf(t, fs, tg)
		put(t, root, "f.txt", "changed")
		_, err := fs.DeleteFile(ctx, tg, &provider.VersionGuard{Version: v})
		requireCode(t, err, provider.CodeStaleVersion)
		assert.Equal(t, "changed", get(t, root, "f.txt"))
	})
	t.Run("missing is stale guarded or not", func(t *testing.T) {
		fs, _ := newTestFS(t, Options{})
		tg := target(t, fs, "missing.txt")
		_, err := fs.DeleteFile(ctx, tg, nil)
		requireCode(t, err, provider.CodeStaleVersion)
		_, err = fs.DeleteFile(ctx, tg, &provider.VersionGuard{Version: "v1-0"})
		requireCode(t, err, provider.CodeStaleVersion)
	})
	t.Run("directory is not a regular file", func(t *testing.T) {
		fs, root := newTestFS(t, Options{})
		require.NoError(t, os.Mkdir(filepath.Join(root, "d"), 0o755))
		_, err := fs.DeleteFile(ctx, target(t, fs, "d"), nil)
		requireCode(t, err, provider.CodeNotRegularFile)
		assert.DirExists(t, filepath.Join(root, "d"))
	})
	t.Run("binary and oversized files have no basis", func(t *testing.T) {
		fs, root := newTestFS(t, Options{MaxBasisBytes: 4})
		put(t, root, "bin", "\x00")
		put(t, root, "big", "0123456789")
		for _, p := range []string{"bin", "big"} {
			out, err := fs.DeleteFile(ctx, target(t, fs, p), nil)
			require.NoError(t, err)
			assert.Nil(t, out.Before, p)
			assert.NoFileExists(t, filepath.Join(root, p))
		}
	})
	t.Run("pre-abort keeps the file", func(t *testing.T) {
		fs, root := newTestFS(t, Options{})
		put(t, root, "f.txt", "x")
		_, err := fs.DeleteFile(cancelled(), target(t, fs, "f.txt"), nil)
		requireCode(t, err, provider.CodeAborted)
		assert.FileExists(t, filepath.Join(root, "f.txt"))
	})
}

func TestDelete_HardLinkKeepsItsContentVersion(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "a.txt", "x")
	require.NoError(t, os.Link(filepath.Join(root, "a.txt"), filepath.Join(root, "b.txt")))
	b := target(t, fs, "b.txt")
	v := versionOf(t, fs, b)
	_, err := fs.DeleteFile(context.Background(), target(t, fs, "a.txt"), nil)
	require.NoError(t, err)
	assert.Equal(t, v, versionOf(t, fs, b), "removing another name changes no byte of the surviving link")
}
