package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/policy/kv"
)

// The default Badger store lives in <state>/db. Daemons before it kept it
// one level deeper, in <state>/db/db; migrateStoreLayout moves it up on
// start, in steps of which each is one atomic rename or rmdir followed by an
// fsync of the directory that changed, so a crash at any point leaves a
// layout the next start finishes:
//
//	0  <state>/db/db/…                            old layout
//	1  rename db/db → db.migrating; fsync <state>  db/ is empty, db.migrating/… holds the data
//	2  rmdir db; fsync <state>                     only db.migrating/…
//	3  rename db.migrating → db; fsync <state>     new layout: <state>/db/…
//
// On start, db.migrating present means a crash after step 1 or 2: an empty
// db/ is removed and db.migrating renamed into place. The old directory is
// locked (Badger's own flock) for the move, so a daemon still using it is
// refused with kv.ErrLocked instead of losing its files.
const migratingName = "db.migrating"

// migrateStoreLayout brings stateDir's default store to <state>/db. crash,
// when not nil, is asked after each step whether to stop there (tests of
// the crash points); a stop returns errStoreMigrationStopped.
func migrateStoreLayout(stateDir string, crash func(step int) bool) error {
	db := filepath.Join(stateDir, "db")
	old := filepath.Join(db, "db")
	mid := filepath.Join(stateDir, migratingName)
	stop := func(step int) bool { return crash != nil && crash(step) }

	if !exists(mid) {
		if !isDir(old) {
			return nil // new layout, or nothing yet
		}
		lock, err := lockDir(old)
		if err != nil {
			return err
		}
		defer lock.Close()
		if err := renameSync(old, mid, stateDir); err != nil {
			return err
		}
		if stop(1) {
			return errStoreMigrationStopped
		}
	}
	if exists(db) {
		// Removed only when empty: a db/ with files is not ours to drop.
		if err := os.Remove(db); err != nil {
			return fmt.Errorf("migrate store %s → %s: remove the old directory: %w", filepath.Join(db, "db"), db, err)
		}
		if err := syncDir(stateDir); err != nil {
			return err
		}
	}
	if stop(2) {
		return errStoreMigrationStopped
	}
	if err := renameSync(mid, db, stateDir); err != nil {
		return err
	}
	if stop(3) {
		return errStoreMigrationStopped
	}
	return nil
}

// errStoreMigrationStopped is what a test's crash hook makes
// migrateStoreLayout return.
var errStoreMigrationStopped = errors.New("store migration stopped")

// lockDir takes Badger's exclusive lock on dir (flock on the directory).
func lockDir(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("migrate store %s: %w", dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("migrate store %s: %w: another dshmount daemon uses it: %w", dir, kv.ErrLocked, err)
	}
	return f, nil
}

// renameSync renames from to to and syncs parent, the directory of both.
func renameSync(from, to, parent string) error {
	if err := os.Rename(from, to); err != nil {
		return fmt.Errorf("migrate store: %w", err)
	}
	return syncDir(parent)
}

// syncDir makes dir's entries durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("migrate store: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("migrate store: sync %s: %w", dir, err)
	}
	return nil
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return !errors.Is(err, fs.ErrNotExist)
}

func isDir(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.IsDir()
}
