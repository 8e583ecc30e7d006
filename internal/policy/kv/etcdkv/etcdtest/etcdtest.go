// Package etcdtest runs a single-member etcd in the test's process
// (go.etcd.io/etcd/server/v3/embed) on 127.0.0.1 ports chosen at start, with
// its data in a directory the caller gives. Tests stop and restart it to
// see what clients do when the cluster goes away and comes back.
package etcdtest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Server is one embedded etcd member.
type Server struct {
	mu         sync.Mutex
	dir        string
	clientPort int
	peerPort   int
	maxTxnOps  uint
	etcd       *embed.Etcd
}

// Options tune the member; the zero value keeps etcd's defaults.
type Options struct {
	// MaxTxnOps is the server's --max-txn-ops (0: etcd's default, 128).
	MaxTxnOps uint
}

// Start starts a member with its data in dir. A port picked free may be
// taken by someone else before etcd binds it (another test's outgoing
// connection, say): then it picks new ports.
func Start(dir string, o Options) (*Server, error) {
	var err error
	for range 10 {
		var cp, pp int
		if cp, err = freePort(); err != nil {
			return nil, err
		}
		if pp, err = freePort(); err != nil {
			return nil, err
		}
		s := &Server{dir: dir, clientPort: cp, peerPort: pp, maxTxnOps: o.MaxTxnOps}
		if err = s.start(1); err == nil {
			return s, nil
		}
		if !addrInUse(err) {
			return nil, err
		}
	}
	return nil, err
}

// Endpoint is the member's client address, host:port.
func (s *Server) Endpoint() string { return fmt.Sprintf("127.0.0.1:%d", s.clientPort) }

// Restart starts the member again on the same ports and data (after Stop).
// A port just released by Stop may linger briefly: it tries for 5 s.
func (s *Server) Restart() error { return s.start(50) }

// start starts the member, trying up to attempts times 100 ms apart.
func (s *Server) start(attempts int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.etcd != nil {
		return nil
	}
	cfg := embed.NewConfig()
	cfg.Name = "dshtest"
	cfg.Dir = s.dir
	cu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", s.clientPort)}
	pu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", s.peerPort)}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.LogLevel = "error"
	if s.maxTxnOps > 0 {
		cfg.MaxTxnOps = s.maxTxnOps
	}
	var e *embed.Etcd
	var err error
	for i := range attempts {
		if i > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		if e, err = embed.StartEtcd(cfg); err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("start embedded etcd in %s: %w", s.dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		return fmt.Errorf("embedded etcd in %s did not become ready", s.dir)
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("embedded etcd in %s failed: %w", s.dir, err)
	}
	s.etcd = e
	return nil
}

// Stop stops the member; its data stays for Restart.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.etcd != nil {
		s.etcd.Close()
		s.etcd = nil
	}
}

// addrInUse reports a port someone else holds (etcd does not always wrap
// the listener's error).
func addrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
