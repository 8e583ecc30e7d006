package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/provider"
)

func TestLongPaths_WorkBelowPathMaxRelativeToTheRoot(t *testing.T) {
	ctx := context.Background()
	// The workspace root itself sits deep, so the absolute backing path is
	// longer than PATH_MAX while every path relative to the root is not.
	root := t.TempDir()
	for i := 0; i < 4; i++ {
		root = filepath.Join(root, strings.Repeat("r", 200))
	}
	require.NoError(t, os.MkdirAll(root, 0o755))
	fsys, err := New(root, Options{})
	require.NoError(t, err)
	comps := make([]string, 19)
	for i := range comps {
		comps[i] = strings.Repeat(string(rune('a'+i)), 200)
	}
	rel := strings.Join(comps, "/") + "/f.txt"
	require.Less(t, len(rel), unix.PathMax)
	require.Greater(t, len(root)+len(rel), unix.PathMax)
	tg, err := fsys.Resolve(ctx, rel, provider.ResolveOptions{})
	require.NoError(t, err)
	_, err = fsys.WriteText(ctx, tg, "deep\n", nil)
	require.NoError(t, err)
	tg, err = fsys.Resolve(ctx, rel, provider.ResolveOptions{})
	require.NoError(t, err)
	got, err := fsys.ReadText(ctx, tg)
	require.NoError(t, err)
	require.Equal(t, "deep\n", got)
}

func TestLongPaths_OverlongNameIsAClearInvalidArgument(t *testing.T) {
	ctx := context.Background()
	fsys, err := New(t.TempDir(), Options{})
	require.NoError(t, err)
	tg, err := fsys.Resolve(ctx, strings.Repeat("n", 300), provider.ResolveOptions{})
	if err == nil {
		_, err = fsys.WriteText(ctx, tg, "x", nil)
	}
	require.Error(t, err)
	require.ErrorIs(t, err, provider.ErrInvalidArgument)
	require.Contains(t, err.Error(), "too long")
}
