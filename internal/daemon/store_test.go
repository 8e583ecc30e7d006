package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy/kv"
	"github.com/dshmount/dshmount/internal/policy/kv/etcdkv"
	"github.com/dshmount/dshmount/internal/policy/kv/etcdkv/etcdtest"
)

func TestStoreFlag_ParsesEtcdURL(t *testing.T) {
	t.Setenv(EnvEtcdUser, "agent")
	t.Setenv(EnvEtcdPassword, "secret")
	cases := []struct {
		url       string
		endpoints []string
		prefix    string
	}{
		{"etcd://127.0.0.1:2379/team/ws1", []string{"127.0.0.1:2379"}, "/team/ws1/"},
		{"etcd://a:2379,b:2379,c:2379/ws/", []string{"a:2379", "b:2379", "c:2379"}, "/ws/"},
		{"etcd://a:2379", []string{"a:2379"}, DefaultEtcdPrefix},
		{"etcd://a:2379/", []string{"a:2379"}, DefaultEtcdPrefix},
	}
	for _, c := range cases {
		sc := StoreConfig{URL: c.url}
		require.NoError(t, sc.Check(), c.url)
		rest, _ := strings.CutPrefix(c.url, "etcd://")
		eps, prefix, err := etcdkv.ParseURL(rest)
		require.NoError(t, err, c.url)
		assert.Equal(t, c.endpoints, eps, c.url)
		assert.Equal(t, c.prefix, prefix, c.url)
		cfg, err := sc.etcdBase()
		require.NoError(t, err)
		assert.Equal(t, "agent", cfg.Username)
		assert.Equal(t, "secret", cfg.Password)
		assert.Nil(t, cfg.TLS, "no TLS flag: plain")
	}
}

func TestStoreFlag_RefusesBadValues(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	require.NoError(t, os.WriteFile(junk, []byte("not a certificate"), 0o600))
	cases := []struct {
		name string
		c    StoreConfig
		want string
	}{
		{"scheme", StoreConfig{URL: "http://a:2379/x"}, `unknown store scheme "http": want one of badger, etcd`},
		{"not a URL", StoreConfig{URL: "/var/db"}, "malformed store URL"},
		{"badger relative", StoreConfig{URL: "badger://var/db"}, "want badger:///ABSOLUTE/PATH"},
		{"badger root", StoreConfig{URL: "badger:///"}, "needs a directory"},
		{"no port", StoreConfig{URL: "etcd://a/x"}, "not HOST:PORT"},
		{"empty host", StoreConfig{URL: "etcd://a:1,/x"}, "not HOST:PORT"},
		{"cert without key", StoreConfig{URL: "etcd://a:1/x", Cert: junk}, "go together"},
		{"missing CA", StoreConfig{URL: "etcd://a:1/x", CACert: filepath.Join(dir, "none")}, "--store-cacert"},
		{"CA not PEM", StoreConfig{URL: "etcd://a:1/x", CACert: junk}, "no PEM certificate"},
		{"bad pair", StoreConfig{URL: "etcd://a:1/x", Cert: junk, Key: junk}, "--store-cert/--store-key"},
	}
	for _, c := range cases {
		err := c.c.Check()
		require.Error(t, err, c.name)
		assert.Contains(t, err.Error(), c.want, c.name)
	}
}

func TestOpenStore_EtcdIsShared(t *testing.T) {
	srv, err := etcdtest.Start(t.TempDir(), etcdtest.Options{})
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	log := slog.New(slog.DiscardHandler)
	ctx := context.Background()
	cfgA := Config{Source: "/hostA/ws", StateDir: t.TempDir(), Store: StoreConfig{URL: "etcd://" + srv.Endpoint() + "/t"}}
	cfgB := cfgA
	cfgB.Source, cfgB.StateDir = "/hostB/ws", t.TempDir()
	a, err := OpenStore(ctx, cfgA.Store, cfgA.Source, cfgA.StateDir, log)
	require.NoError(t, err)
	defer a.Close()
	b, err := OpenStore(ctx, cfgB.Store, cfgB.Source, cfgB.StateDir, log)
	require.NoError(t, err, "two daemons share one etcd (Badger would refuse the second)")
	defer b.Close()
	sess, err := a.OpenSession("x")
	require.NoError(t, err)
	_, ok := b.Session(sess.ID)
	assert.True(t, ok)

	srv.Stop()
	_, err = OpenStore(ctx, cfgA.Store, cfgA.Source, cfgA.StateDir, log)
	require.ErrorContains(t, err, "start etcd or fix --store")
}

func TestOpenStore_BadgerURLAndLock(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "records")
	cfg := Config{Source: "/ws", StateDir: t.TempDir(), Store: StoreConfig{URL: "badger://" + dir}}
	a, err := OpenStore(ctx, cfg.Store, cfg.Source, cfg.StateDir, log)
	require.NoError(t, err)
	defer a.Close()
	assert.DirExists(t, dir, "badger:///PATH puts the database at PATH")
	cfg.StateDir = t.TempDir()
	_, err = OpenStore(ctx, cfg.Store, cfg.Source, cfg.StateDir, log)
	require.ErrorIs(t, err, kv.ErrLocked, "a second daemon on one Badger directory is refused")
	assert.ErrorContains(t, err, "another dshmount daemon uses badger://"+dir)
}
