package daemon

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/policy/kv"
	"github.com/dshmount/dshmount/internal/policy/kv/badgerkv"
	"github.com/dshmount/dshmount/internal/policy/localstore"
)

// oldLayoutState makes a state directory with a Badger store at
// <state>/db/db (the layout before <state>/db) holding one session, and
// returns the state directory and the session's id.
func oldLayoutState(t *testing.T) (string, policy.SessionID) {
	t.Helper()
	state := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := localstore.Open(filepath.Join(state, "db"), policy.DefaultOptions().WithLogger(quiet))
	require.NoError(t, err)
	sess, err := store.OpenSession("before-migration")
	require.NoError(t, err)
	require.NoError(t, store.Close())
	require.DirExists(t, filepath.Join(state, "db", "db"), "localstore.Open(<state>/db) is the old layout")
	return state, sess.ID
}

func TestStoreLayout_MigratesOldLayoutAtEveryCrashPoint(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, crashAt := range []int{0, 1, 2, 3} { // 0: no crash
		state, id := oldLayoutState(t)
		if crashAt > 0 {
			err := migrateStoreLayout(state, func(step int) bool { return step == crashAt })
			require.ErrorIs(t, err, errStoreMigrationStopped, "crash after step %d", crashAt)
		}
		// The next start finishes the move and finds the records.
		store, err := OpenStore(context.Background(), StoreConfig{}, "/ws", state, log)
		require.NoError(t, err, "crash after step %d", crashAt)
		_, ok := store.Session(id)
		assert.True(t, ok, "crash after step %d: the session survives the move", crashAt)
		require.NoError(t, store.Close())
		assert.NoDirExists(t, filepath.Join(state, "db", "db"), "crash after step %d", crashAt)
		assert.NoDirExists(t, filepath.Join(state, migratingName), "crash after step %d", crashAt)
		assert.FileExists(t, filepath.Join(state, "db", "MANIFEST"), "crash after step %d: Badger at <state>/db", crashAt)
	}
}

func TestStoreLayout_NewLayoutAndFreshStateAreLeftAlone(t *testing.T) {
	state := t.TempDir()
	require.NoError(t, migrateStoreLayout(state, nil), "nothing yet")
	assert.NoDirExists(t, filepath.Join(state, "db"))
	e, err := badgerkv.Open(filepath.Join(state, "db"), badgerkv.Config{})
	require.NoError(t, err)
	require.NoError(t, e.Close())
	require.NoError(t, migrateStoreLayout(state, nil), "new layout")
	assert.FileExists(t, filepath.Join(state, "db", "MANIFEST"))
}

func TestStoreLayout_RefusesOldStoreInUse(t *testing.T) {
	state, _ := oldLayoutState(t)
	e, err := badgerkv.Open(filepath.Join(state, "db", "db"), badgerkv.Config{})
	require.NoError(t, err)
	defer e.Close()
	err = migrateStoreLayout(state, nil)
	require.ErrorIs(t, err, kv.ErrLocked, "a daemon still on the old layout keeps its files")
	assert.DirExists(t, filepath.Join(state, "db", "db"))
}

func TestStoreLayout_KeepsADbDirectoryWithOtherFiles(t *testing.T) {
	state, _ := oldLayoutState(t)
	stray := filepath.Join(state, "db", "notes")
	require.NoError(t, os.WriteFile(stray, []byte("x"), 0o600))
	err := migrateStoreLayout(state, nil)
	require.Error(t, err, "db/ is removed only when empty")
	assert.FileExists(t, stray)
	assert.DirExists(t, filepath.Join(state, migratingName), "the data waits, whole, for the next start")
}
