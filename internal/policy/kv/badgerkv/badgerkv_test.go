package badgerkv_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy/kv"
	"github.com/dshmount/dshmount/internal/policy/kv/badgerkv"
	"github.com/dshmount/dshmount/internal/policy/kv/kvtest"
)

func TestConformance(t *testing.T) {
	kvtest.Run(t, func(t *testing.T) kvtest.Harness {
		dir := t.TempDir()
		return kvtest.Harness{Open: func(t *testing.T) kv.Store {
			e, err := badgerkv.Open(dir, badgerkv.Config{MemTableSize: 4 << 20, NumMemtables: 2, BaseTableSize: 1 << 20})
			require.NoError(t, err)
			return e
		}}
	})
}

func TestOpen_SecondOpenerIsLocked(t *testing.T) {
	dir := t.TempDir()
	e, err := badgerkv.Open(dir, badgerkv.Config{})
	require.NoError(t, err)
	defer e.Close()
	_, err = badgerkv.Open(dir, badgerkv.Config{})
	require.ErrorIs(t, err, badgerkv.ErrLocked)
}

// TestClose_ReturnsWhenTheDirectoryWasRemoved: Badger retries writing its
// memory table forever once its directory is gone; a daemon stopping then
// must still exit.
func TestClose_ReturnsWhenTheDirectoryWasRemoved(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	e, err := badgerkv.Open(dir, badgerkv.Config{})
	require.NoError(t, err)
	for i := range 100 {
		_, err := e.Txn(context.Background(), nil, []kv.Op{{Key: []byte(fmt.Sprintf("k%03d", i)), Value: []byte("v")}})
		require.NoError(t, err)
	}
	require.NoError(t, os.RemoveAll(dir))
	done := make(chan error, 1)
	go func() { done <- e.Close() }()
	select {
	case err := <-done:
		require.ErrorContains(t, err, "directory was removed")
	case <-time.After(20 * time.Second):
		t.Fatal("Close hung on a removed directory")
	}
}

// TestURL_ADirectoryReadsBackAsItself pins that the default store URL of
// any state directory opens that directory: a '#', '?', '%' or space in
// the path once made serve refuse its own default store.
func TestURL_ADirectoryReadsBackAsItself(t *testing.T) {
	for _, dir := range []string{"/var/lib/dsh", "/tmp/a#b/state", "/tmp/what?/db", "/tmp/100%/db", "/tmp/with space/db", "/tmp/%23/db"} {
		u := badgerkv.URL(dir)
		require.True(t, strings.HasPrefix(u, badgerkv.Scheme+":///"), u)
		got, err := badgerkv.DirFromURL(strings.TrimPrefix(u, badgerkv.Scheme+"://"))
		require.NoError(t, err, "%s from %s", u, dir)
		assert.Equal(t, dir, got, "%s", u)
	}
	_, err := badgerkv.DirFromURL("/tmp/a#b")
	require.ErrorIs(t, err, kv.ErrBadURL, "a raw fragment is still refused")
}
