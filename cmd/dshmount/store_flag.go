package main

import (
	"flag"

	"github.com/dshmount/dshmount/internal/daemon"
)

// addStoreFlags registers the store flags on fs.
func addStoreFlags(fs *flag.FlagSet, c *daemon.StoreConfig) {
	fs.StringVar(&c.URL, "store", "", "where sessions, observations, claims and the audit log live, as a URL: "+
		"empty for Badger in the state directory (<state>/db); badger:///ABS/PATH for Badger in another directory; "+
		"etcd://HOST:PORT[,HOST:PORT…]/PREFIX for an etcd cluster that every daemon guarding this workspace shares "+
		"(user and password from "+daemon.EnvEtcdUser+" and "+daemon.EnvEtcdPassword+"; see the README's \"several machines\")")
	fs.StringVar(&c.CACert, "store-cacert", "", "etcd: CA certificate `FILE` to verify the servers (turns TLS on)")
	fs.StringVar(&c.Cert, "store-cert", "", "etcd: client certificate `FILE` (with --store-key; turns TLS on)")
	fs.StringVar(&c.Key, "store-key", "", "etcd: client key `FILE`")
}
