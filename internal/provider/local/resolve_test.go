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

func TestNew_RootMustBeDirectory(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	_, err := New(file, Options{})
	require.ErrorContains(t, err, "not a directory")
	_, err = New(filepath.Join(dir, "missing"), Options{})
	require.Error(t, err)
}

func TestNew_RootIsCanonical(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	require.NoError(t, os.Mkdir(real, 0o755))
	require.NoError(t, os.Symlink(real, filepath.Join(dir, "link")))
	fs, err := New(filepath.Join(dir, "link", "."), Options{})
	require.NoError(t, err)
	defer fs.Close()
	canon, err := filepath.EvalSymlinks(real)
	require.NoError(t, err)
	assert.Equal(t, canon, fs.Root())
	// The spelling through the link is accepted as an alias of the root.
	tg, err := fs.Resolve(context.Background(), filepath.Join(dir, "link", "a.txt"), provider.ResolveOptions{})
	require.NoError(t, err)
	assert.Equal(t, "a.txt", tg.DisplayPath)
}

func TestResolve_AliasesGiveOneKey(t *testing.T) {
	fs, root := newTestFS(t, Options{Aliases: []string{"/mnt/dsh-test-alias"}})
	put(t, root, "b/file.txt", "x")
	require.NoError(t, os.Mkdir(filepath.Join(root, "a"), 0o755))
	require.NoError(t, os.Symlink("b", filepath.Join(root, "lnk")))
	require.NoError(t, os.Symlink(filepath.Join(root, "b", "file.txt"), filepath.Join(root, "abs-link")))
	want := provider.Target{Key: provider.Key(filepath.Join(root, "b", "file.txt")), DisplayPath: "b/file.txt"}
	for _, tc := range []struct {
		name, path string
		opts       provider.ResolveOptions
	}{
		{"plain", "b/file.txt", provider.ResolveOptions{}},
		{"dot-dot", "a/../b/file.txt", provider.ResolveOptions{}},
		{"dot segments", "./b/./file.txt", provider.ResolveOptions{}},
		{"dir symlink", "lnk/file.txt", provider.ResolveOptions{}},
		{"file symlink inside root", "abs-link", provider.ResolveOptions{}},
		{"absolute", filepath.Join(root, "b/file.txt"), provider.ResolveOptions{}},
		{"alias", "/mnt/dsh-test-alias/b/file.txt", provider.ResolveOptions{}},
		{"relative cwd", "file.txt", provider.ResolveOptions{Cwd: "b"}},
		{"absolute cwd", "file.txt", provider.ResolveOptions{Cwd: filepath.Join(root, "b")}},
		{"alias cwd", "../b/file.txt", provider.ResolveOptions{Cwd: "/mnt/dsh-test-alias/a"}},
		{"absolute path ignores cwd", filepath.Join(root, "b/file.txt"), provider.ResolveOptions{Cwd: "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg, err := fs.Resolve(context.Background(), tc.path, tc.opts)
			require.NoError(t, err)
			assert.Equal(t, want, tg)
		})
	}
}

func TestResolve_MissingFileViaDeepestCanonicalParent(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	require.NoError(t, os.Mkdir(filepath.Join(root, "real"), 0o755))
	require.NoError(t, os.Symlink("real", filepath.Join(root, "alias")))
	tg := target(t, fs, "alias/new/deeper/file.txt")
	assert.Equal(t, provider.Key(filepath.Join(root, "real/new/deeper/file.txt")), tg.Key)
	assert.Equal(t, "real/new/deeper/file.txt", tg.DisplayPath)
	tg = target(t, fs, "alias/missing/../x.txt")
	assert.Equal(t, "real/x.txt", tg.DisplayPath)
	tg = target(t, fs, ".")
	assert.Equal(t, provider.Target{Key: provider.Key(root), DisplayPath: "."}, tg)
}

func TestResolve_SandboxDenied(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	outside := filepath.Dir(root)
	put(t, outside, "secret.txt", "s")
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(root, "abs-escape")))
	require.NoError(t, os.Symlink("../secret.txt", filepath.Join(root, "rel-escape")))
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "dir-escape")))
	require.NoError(t, os.Mkdir(filepath.Join(root, "sub"), 0o755))
	require.NoError(t, os.Symlink("../../ws/../secret.txt", filepath.Join(root, "sub", "deep-escape")))
	for _, tc := range []struct {
		name, path string
		opts       provider.ResolveOptions
	}{
		{"dot-dot", "../secret.txt", provider.ResolveOptions{}},
		{"dot-dot after dir", "sub/../../secret.txt", provider.ResolveOptions{}},
		{"absolute outside", filepath.Join(outside, "secret.txt"), provider.ResolveOptions{}},
		{"absolute with dot-dot", filepath.Join(root, "../secret.txt"), provider.ResolveOptions{}},
		{"absolute symlink", "abs-escape", provider.ResolveOptions{}},
		{"relative symlink", "rel-escape", provider.ResolveOptions{}},
		{"directory symlink", "dir-escape/secret.txt", provider.ResolveOptions{}},
		{"missing file under escaping directory", "dir-escape/new.txt", provider.ResolveOptions{}},
		{"nested symlink", "sub/deep-escape", provider.ResolveOptions{}},
		{"cwd escape", "secret.txt", provider.ResolveOptions{Cwd: ".."}},
		{"cwd outside", "secret.txt", provider.ResolveOptions{Cwd: outside}},
		{"NUL byte", "a\x00b", provider.ResolveOptions{}},
		{"NUL in cwd", "a", provider.ResolveOptions{Cwd: "x\x00"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fs.Resolve(context.Background(), tc.path, tc.opts)
			requireCode(t, err, provider.CodeSandboxDenied)
			assert.ErrorIs(t, err, provider.ErrSandboxDenied)
		})
	}
}

func TestResolve_SymlinkLoopAndNotDirectory(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	require.NoError(t, os.Symlink("loop2", filepath.Join(root, "loop1")))
	require.NoError(t, os.Symlink("loop1", filepath.Join(root, "loop2")))
	put(t, root, "file", "x")
	_, err := fs.Resolve(context.Background(), "loop1", provider.ResolveOptions{})
	requireCode(t, err, provider.CodeIOError)
	_, err = fs.Resolve(context.Background(), "file/child", provider.ResolveOptions{})
	requireCode(t, err, provider.CodeNotDirectory)
	_, err = fs.Resolve(context.Background(), "", provider.ResolveOptions{})
	requireCode(t, err, provider.CodeInvalidArgument)
	_, err = fs.Resolve(cancelled(), "file", provider.ResolveOptions{})
	requireCode(t, err, provider.CodeAborted)
}

func TestTargetForRel_MatchesResolve(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "d/f.txt", "x")
	for _, rel := range []string{".", "d", "d/f.txt", "d/missing.txt"} {
		assert.Equal(t, target(t, fs, rel), fs.TargetForRel(rel), rel)
	}
}

func TestLstat_DoesNotFollowFinalSymlink(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "f.txt", "hello")
	require.NoError(t, os.Symlink("f.txt", filepath.Join(root, "link")))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(root, "escape")))
	ctx := context.Background()

	info, err := fs.Lstat(ctx, "link", provider.ResolveOptions{})
	require.NoError(t, err)
	require.NotNil(t, info)
	assert.Equal(t, provider.TypeSymlink, info.Type)

	// A link leading outside can still be inspected (it is not followed).
	info, err = fs.Lstat(ctx, "escape", provider.ResolveOptions{})
	require.NoError(t, err)
	assert.Equal(t, provider.TypeSymlink, info.Type)

	info, err = fs.Lstat(ctx, "f.txt", provider.ResolveOptions{})
	require.NoError(t, err)
	assert.Equal(t, provider.TypeFile, info.Type)
	assert.Equal(t, int64(5), info.Size)
	assert.Equal(t, versionOf(t, fs, target(t, fs, "f.txt")), info.Version)

	info, err = fs.Lstat(ctx, ".", provider.ResolveOptions{})
	require.NoError(t, err)
	assert.Equal(t, provider.TypeDirectory, info.Type)

	info, err = fs.Lstat(ctx, "missing", provider.ResolveOptions{})
	require.NoError(t, err)
	assert.Nil(t, info)

	_, err = fs.Lstat(ctx, "../x", provider.ResolveOptions{})
	requireCode(t, err, provider.CodeSandboxDenied)
}

func TestProcessPathAndFileURL(t *testing.T) {
	fs, root := newTestFS(t, Options{Aliases: []string{"/mnt/dsh-alias"}})
	put(t, root, "dir with space/a#b?.txt", "x")
	tg := target(t, fs, "dir with space/a#b?.txt")
	assert.Equal(t, filepath.Join(root, "dir with space/a#b?.txt"), fs.ProcessPath(tg))
	assert.Equal(t, "file://"+root+"/dir%20with%20space/a%23b%3F.txt", fs.FileURL(tg))

	p, ok := fs.ProcessPathFromHostPath("/mnt/dsh-alias/dir with space/a#b?.txt")
	require.True(t, ok)
	assert.Equal(t, fs.ProcessPath(tg), p)
	p, ok = fs.ProcessPathFromHostPath(filepath.Join(root, "new.txt"))
	require.True(t, ok)
	assert.Equal(t, filepath.Join(root, "new.txt"), p)
	for _, bad := range []string{"relative.txt", "/etc/passwd", filepath.Join(root, "../x")} {
		_, ok = fs.ProcessPathFromHostPath(bad)
		assert.False(t, ok, bad)
	}
}

func TestContains_IdentityAndDescendants(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	put(t, root, "a/b/c.txt", "x")
	put(t, root, "ab.txt", "x")
	rootT, a, c, ab := target(t, fs, "."), target(t, fs, "a"), target(t, fs, "a/b/c.txt"), target(t, fs, "ab.txt")
	assert.True(t, fs.Contains(rootT, c))
	assert.True(t, fs.Contains(a, c))
	assert.True(t, fs.Contains(a, a))
	assert.False(t, fs.Contains(c, a))
	assert.False(t, fs.Contains(a, ab), "a sibling sharing a name prefix is not a descendant")
}
