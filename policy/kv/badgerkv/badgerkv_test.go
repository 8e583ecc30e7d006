package badgerkv_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/policy/kv"
	"github.com/dshmount/dshmount/policy/kv/badgerkv"
	"github.com/dshmount/dshmount/policy/kv/kvtest"
)

func TestConformance(t *testing.T) {
	kvtest.Run(t, func(t *testing.T) kvtest.Harness {
		dir := t.TempDir()
		return kvtest.Harness{Open: func(t *testing.T) kv.Engine {
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
