package localstore_test

import (
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/policy/localstore"
)

func TestOpen_SecondOpenerRefusedWithStateLocked(t *testing.T) {
	dir := t.TempDir()
	opts := policy.DefaultOptions().WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	first, err := localstore.Open(dir, opts)
	require.NoError(t, err)

	_, err = localstore.Open(dir, opts)
	require.ErrorIs(t, err, policy.ErrStateLocked)
	assert.Contains(t, err.Error(), "another dshmount daemon is using state directory "+dir)
	assert.Contains(t, err.Error(), "stop it or pass a different --state")

	require.NoError(t, first.Close())
	again, err := localstore.Open(dir, opts)
	require.NoError(t, err, "the lock is released by Close")
	require.NoError(t, again.Close())
}
