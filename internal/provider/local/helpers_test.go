package local

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

// newTestFS returns an FS rooted at a fresh workspace directory inside a
// fresh parent (so tests can place files "outside" the workspace).
func newTestFS(t testing.TB, opts Options) (*FS, string) {
	t.Helper()
	parent := t.TempDir()
	root := filepath.Join(parent, "ws")
	require.NoError(t, os.Mkdir(root, 0o755))
	fs, err := New(root, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = fs.Close() })
	return fs, fs.Root()
}

// put writes a file under root for a test.
func put(t testing.TB, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

// get reads a file under root for a test.
func get(t testing.TB, root, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, rel))
	require.NoError(t, err)
	return string(data)
}

// target resolves p for a test.
func target(t testing.TB, fs *FS, p string) provider.Target {
	t.Helper()
	tg, err := fs.Resolve(context.Background(), p, provider.ResolveOptions{})
	require.NoError(t, err)
	return tg
}

// versionOf stats tg for a test and returns its version.
func versionOf(t testing.TB, fs *FS, tg provider.Target) provider.Version {
	t.Helper()
	info, err := fs.Stat(context.Background(), tg)
	require.NoError(t, err)
	require.NotNil(t, info, "%s must exist", tg.DisplayPath)
	return info.Version
}

// requireCode asserts that err is a *provider.Error with code.
func requireCode(t testing.TB, err error, code provider.Code) *provider.Error {
	t.Helper()
	require.Error(t, err)
	var pe *provider.Error
	require.ErrorAs(t, err, &pe, "error %v is not a *provider.Error", err)
	require.Equal(t, code, pe.Code, "error: %v", err)
	require.NotEmpty(t, pe.Message)
	require.NotEmpty(t, pe.Op)
	return pe
}

// tempFiles lists the leftover temp files under root.
func tempFiles(t testing.TB, root string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if m, _ := filepath.Match(".*.dsh-*.tmp", d.Name()); m {
			out = append(out, p)
		}
		return nil
	}))
	return out
}

// cancelled returns an already cancelled context.
func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
