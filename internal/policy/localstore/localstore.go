// Package localstore opens a policy store on Badger in a directory: the
// one-daemon store of tests, benchmarks and embedders that have no store URL.
// It joins policy (which knows only kv.Store) and badgerkv; the daemon
// itself opens its store by URL through a kv.Registry.
package localstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/policy/kv/badgerkv"
)

// Open opens (creating if needed) the store on Badger under stateDir/db,
// sized by opts. A second opener of the same directory, in this process or
// another, fails with an error wrapping policy.ErrStateLocked.
func Open(stateDir string, opts policy.Options) (*policy.Store, error) {
	dir := filepath.Join(stateDir, "db")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create state directory %s: %w", dir, err)
	}
	db, err := badgerkv.Open(dir, BadgerConfig(opts))
	if err != nil {
		if errors.Is(err, badgerkv.ErrLocked) {
			return nil, fmt.Errorf("another dshmount daemon is using state directory %s; stop it or pass a different --state: %w", stateDir, err)
		}
		return nil, fmt.Errorf("open policy store in %s: %w", dir, err)
	}
	return policy.Open(db, stateDir, opts)
}

// BadgerConfig is the Badger sizing opts asks for (unset fields at
// policy's defaults).
func BadgerConfig(opts policy.Options) badgerkv.Config {
	opts = opts.Normalized()
	return badgerkv.Config{
		MemTableSize:     opts.MemTableSize,
		NumMemtables:     opts.NumMemtables,
		BlockCacheSize:   opts.BlockCacheSize,
		IndexCacheSize:   opts.IndexCacheSize,
		BaseTableSize:    opts.BaseTableSize,
		NumCompactors:    opts.NumCompactors,
		ValueLogFileSize: opts.ValueLogFileSize,
		Logger:           opts.Logger,
	}
}
