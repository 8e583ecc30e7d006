package service

import (
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/policy/localstore"
	"github.com/dshmount/dshmount/internal/provider/local"
)

// newTestService returns a service over provider/local and a policy store
// in temp dirs, and the workspace root.
func newTestService(tb testing.TB) (*Service, string) {
	tb.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := localstore.Open(tb.TempDir(), policy.DefaultOptions().WithLogger(quiet))
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, store.Close()) })
	root := tb.TempDir()
	lfs, err := local.New(root, local.Options{Digests: store})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = lfs.Close() })
	s, err := New(Config{Engine: policy.NewEngine(store, lfs), Source: root, Mount: "/mnt/test", Logger: quiet})
	require.NoError(tb, err)
	return s, lfs.Root()
}
