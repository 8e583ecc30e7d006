package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/policy/kv"
	"github.com/dshmount/dshmount/internal/policy/kv/badgerkv"
	"github.com/dshmount/dshmount/internal/policy/kv/etcdkv"
	"github.com/dshmount/dshmount/internal/policy/localstore"
)

// StoreConfig is where the daemon keeps its policy records: a store URL
// (--store; empty: Badger in the state directory) and the TLS files a
// networked engine uses.
type StoreConfig struct {
	// URL is the --store value: "" for the default, badger:///ABS/PATH or
	// etcd://HOST:PORT[,…][/PREFIX].
	URL string
	// CACert, Cert and Key are the TLS files for etcd (--store-cacert,
	// --store-cert, --store-key).
	CACert, Cert, Key string
}

// DefaultEtcdPrefix is the key prefix of --store etcd://HOST:PORT without a
// path.
const DefaultEtcdPrefix = etcdkv.DefaultPrefix

// Environment variables with etcd's credentials (kept off the command line,
// where ps shows them).
const (
	EnvEtcdUser     = "DSH_ETCD_USER"
	EnvEtcdPassword = "DSH_ETCD_PASSWORD"
)

// URLIn is the store URL: --store, or Badger under stateDir.
func (c StoreConfig) URLIn(stateDir string) string {
	if c.URL != "" {
		return c.URL
	}
	return badgerkv.URL(DefaultBadgerDir(stateDir))
}

// DefaultBadgerDir is the Badger directory of a daemon without --store.
func DefaultBadgerDir(stateDir string) string {
	return filepath.Join(stateDir, "db")
}

// etcdBase is the etcd engine's configuration apart from what the URL
// names: credentials from the environment and the TLS files.
func (c StoreConfig) etcdBase() (etcdkv.Config, error) {
	cfg := etcdkv.Config{Username: os.Getenv(EnvEtcdUser), Password: os.Getenv(EnvEtcdPassword)}
	if (c.Cert == "") != (c.Key == "") {
		return cfg, errors.New("--store-cert and --store-key go together")
	}
	if c.CACert == "" && c.Cert == "" {
		return cfg, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CACert != "" {
		pem, err := os.ReadFile(c.CACert)
		if err != nil {
			return cfg, fmt.Errorf("--store-cacert: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return cfg, fmt.Errorf("--store-cacert %s: no PEM certificate in it", c.CACert)
		}
	}
	if c.Cert != "" {
		pair, err := tls.LoadX509KeyPair(c.Cert, c.Key)
		if err != nil {
			return cfg, fmt.Errorf("--store-cert/--store-key: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	cfg.TLS = tc
	return cfg, nil
}

// registry is the daemon's store registry: every engine it knows, sized and
// credentialed by the configuration and opts.
func (c StoreConfig) registry(opts policy.Options) (*kv.Registry, error) {
	base, err := c.etcdBase()
	if err != nil {
		return nil, err
	}
	var r kv.Registry
	badgerkv.Register(&r, localstore.BadgerConfig(opts))
	etcdkv.Register(&r, base)
	return &r, nil
}

// Check refuses a bad --store (URL or TLS files) before the daemon starts.
func (c StoreConfig) Check() error {
	r, err := c.registry(policy.DefaultOptions())
	if err != nil {
		return err
	}
	if c.URL == "" {
		return nil
	}
	if err := r.Check(c.URL); err != nil {
		return fmt.Errorf("--store: %w", err)
	}
	return nil
}

// OpenStore opens the policy store sc names (Badger under stateDir when
// sc.URL is empty, after moving an old layout up). Keys are stored
// relative to the workspace (source), so daemons that see it under
// different paths share its records.
func OpenStore(ctx context.Context, sc StoreConfig, source, stateDir string, log *slog.Logger) (*policy.Store, error) {
	opts := policy.DefaultOptions().WithLogger(log.With("component", "policy")).WithWorkspaceRoot(source)
	reg, err := sc.registry(opts)
	if err != nil {
		return nil, err
	}
	if sc.URL == "" {
		if err := migrateStoreLayout(stateDir, nil); err != nil {
			return nil, fmt.Errorf("policy store: %w", err)
		}
	}
	url := sc.URLIn(stateDir)
	engine, err := reg.Open(ctx, url)
	switch {
	case errors.Is(err, kv.ErrLocked):
		return nil, fmt.Errorf("%w: another dshmount daemon uses %s; stop it or pass another --state or --store", err, url)
	case errors.Is(err, kv.ErrUnavailable):
		return nil, fmt.Errorf("policy store: %w; start etcd or fix --store", err)
	case err != nil:
		return nil, fmt.Errorf("policy store: %w", err)
	}
	store, err := policy.Open(engine, url, opts)
	if err != nil {
		return nil, fmt.Errorf("policy store %s: %w", url, err)
	}
	return store, nil
}
