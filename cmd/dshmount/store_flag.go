package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/dshmount/dshmount/policy"
	"github.com/dshmount/dshmount/policy/kv/etcdkv"
)

// storeConfig is where the daemon keeps its policy records: Badger in the
// state directory (the default) or a shared etcd (--store etcd://…).
type storeConfig struct {
	// URL is the --store value: "" for Badger, etcd://HOST:PORT[,…]/PREFIX.
	URL string
	// CACert, Cert and Key are the TLS files for etcd (--store-cacert,
	// --store-cert, --store-key).
	CACert, Cert, Key string
}

// defaultEtcdPrefix is the key prefix of --store etcd://HOST:PORT without a
// path.
const defaultEtcdPrefix = "/dshmount/"

// Environment variables with etcd's credentials (kept off the command line,
// where ps shows them).
const (
	envEtcdUser     = "DSH_ETCD_USER"
	envEtcdPassword = "DSH_ETCD_PASSWORD"
)

// addStoreFlags registers the store flags on fs.
func addStoreFlags(fs *flag.FlagSet, c *storeConfig) {
	fs.StringVar(&c.URL, "store", "", "where sessions, observations, claims and the audit log live: empty for Badger in the state directory; "+
		"etcd://HOST:PORT[,HOST:PORT…]/PREFIX for an etcd cluster that every daemon guarding this workspace shares "+
		"(user and password from "+envEtcdUser+" and "+envEtcdPassword+"; see the README's \"several machines\")")
	fs.StringVar(&c.CACert, "store-cacert", "", "etcd: CA certificate `FILE` to verify the servers (turns TLS on)")
	fs.StringVar(&c.Cert, "store-cert", "", "etcd: client certificate `FILE` (with --store-key; turns TLS on)")
	fs.StringVar(&c.Key, "store-key", "", "etcd: client key `FILE`")
}

// etcdConfig parses an etcd:// store URL and the TLS files into the etcd
// engine's configuration.
func (c storeConfig) etcdConfig() (etcdkv.Config, error) {
	rest, ok := strings.CutPrefix(c.URL, "etcd://")
	if !ok {
		return etcdkv.Config{}, fmt.Errorf("--store %q: want etcd://HOST:PORT[,HOST:PORT…]/PREFIX (or nothing, for Badger)", c.URL)
	}
	hosts, prefix, _ := strings.Cut(rest, "/")
	var eps []string
	for h := range strings.SplitSeq(hosts, ",") {
		if h == "" || !strings.Contains(h, ":") {
			return etcdkv.Config{}, fmt.Errorf("--store %q: %q is not HOST:PORT", c.URL, h)
		}
		eps = append(eps, h)
	}
	prefix = "/" + strings.Trim(prefix, "/") + "/"
	if prefix == "//" {
		prefix = defaultEtcdPrefix
	}
	cfg := etcdkv.Config{Endpoints: eps, Prefix: prefix,
		Username: os.Getenv(envEtcdUser), Password: os.Getenv(envEtcdPassword)}
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

// openPolicyStore opens the policy store the configuration names. Keys are
// stored relative to the workspace (source), so daemons that see it under
// different paths share its records.
func openPolicyStore(ctx context.Context, cfg serveConfig, log *slog.Logger) (*policy.Store, error) {
	opts := policy.DefaultOptions().WithLogger(log.With("component", "policy")).WithWorkspaceRoot(cfg.Source)
	if cfg.Store.URL == "" {
		store, err := policy.Open(filepath.Join(cfg.StateDir, "db"), opts)
		if err != nil {
			if errors.Is(err, policy.ErrStateLocked) {
				return nil, fmt.Errorf("%w: another dshmount daemon uses state directory %s; stop it or pass --state", err, cfg.StateDir)
			}
			return nil, fmt.Errorf("open state: %w", err)
		}
		return store, nil
	}
	ecfg, err := cfg.Store.etcdConfig()
	if err != nil {
		return nil, err
	}
	engine, err := etcdkv.Open(ctx, ecfg)
	if err != nil {
		return nil, fmt.Errorf("policy store %s: %w; start etcd or fix --store", cfg.Store.URL, err)
	}
	store, err := policy.OpenEngine(engine, cfg.Store.URL, opts)
	if err != nil {
		return nil, fmt.Errorf("policy store %s: %w", cfg.Store.URL, err)
	}
	return store, nil
}
