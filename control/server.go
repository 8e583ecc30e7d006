package control

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dshmount/dshmount/internal/service"
	"golang.org/x/sys/unix"
)

// Config configures a Server. SocketPath and Service are required.
type Config struct {
	SocketPath      string           // where to listen; its directory is created 0700 when missing
	Service         *service.Service // runs every method
	AllowUIDs       []uint32         // peers allowed besides the daemon's uid and root
	MaxRequestBytes int64            // bound on one request line; default DefaultMaxRequestBytes
	// MaxPendingBytes bounds the bytes of request lines the daemon holds
	// across all connections (arriving, queued or being served); a line
	// that would pass it is refused and dropped. Default
	// DefaultMaxPendingBytes; at least MaxRequestBytes.
	MaxPendingBytes int64
	// MaxConnections bounds concurrent connections; the next one is
	// answered with a CodeUnavailable error line and closed. Default
	// DefaultMaxConnections.
	MaxConnections int
	// MaxConnectionsPerUID bounds the connections of one uid other than
	// root and the daemon's, and is also the reserve those two keep
	// (connlimit.go). Default a quarter of MaxConnections, at least 1; at
	// most MaxConnections.
	MaxConnectionsPerUID int
	// MaxRequests bounds the requests served at once across connections
	// (each may hold a few descriptors); more wait. Default
	// DefaultMaxRequests.
	MaxRequests int
	// RequestTimeout bounds how long a request line may take to arrive
	// once its first byte has, and how long a response may wait for the
	// peer to take it; past it the connection is closed. Default
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// IdleTimeout closes a connection that sent nothing for this long and
	// holds no request in flight, no watch and no open session it opened.
	// Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// FuseRequests reports the mount's FUSE requests by opcode for
	// daemon.status; nil: none are reported.
	FuseRequests func() map[string]uint64
	Logger       *slog.Logger // nil: slog.Default()

	hooks testHooks // in-package tests only
}

// Resource defaults of Config.
const (
	DefaultMaxConnections = 256
	DefaultMaxRequests    = 64
	DefaultRequestTimeout = 30 * time.Second
	DefaultIdleTimeout    = 10 * time.Minute
)

// fdsPerRequest is the most descriptors one request holds at once (a
// directory, the file, a temp file, with slack).
const fdsPerRequest = 8

// withDefaults fills the zero knobs.
func (c Config) withDefaults() Config {
	if c.MaxRequestBytes <= 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.MaxPendingBytes <= 0 {
		c.MaxPendingBytes = max(DefaultMaxPendingBytes, c.MaxRequestBytes)
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.MaxConnectionsPerUID <= 0 {
		c.MaxConnectionsPerUID = max(1, c.MaxConnections/4)
	}
	c.MaxConnectionsPerUID = min(c.MaxConnectionsPerUID, c.MaxConnections)
	if c.MaxRequests <= 0 {
		c.MaxRequests = DefaultMaxRequests
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Descriptors returns the most file descriptors the server holds at once
// with this configuration (defaults applied): one per connection,
// fdsPerRequest per request served, and the listener (a watch is a feed
// subscription and holds none). The daemon
// keeps its descriptor limit above this plus what the mount needs.
func (c Config) Descriptors() int {
	c = c.withDefaults()
	return c.MaxConnections + fdsPerRequest*c.MaxRequests + 2
}

// Server serves the control socket. Create it with NewServer, run Serve, stop
// it with Close.
type Server struct {
	cfg     Config
	log     *slog.Logger
	svc     *service.Service
	uid     uint32
	self    *creds // the daemon's filesystem credentials, restored after a peer's request
	started time.Time
	ln      *net.UnixListener

	mu     sync.Mutex
	conns  map[*conn]struct{}
	byUID  map[uint32]int // open connections per peer uid (connlimit.go)
	closed bool
	wg     sync.WaitGroup // connection goroutines

	pending  *byteBudget   // bytes of request lines held, all connections
	requests chan struct{} // a slot per request being served

	connSeq  atomic.Uint64
	table    map[string]handler        // method table, built once
	counters map[string]*methodCounter // fixed key set, built once
	done     chan struct{}
	closeErr error
	once     sync.Once

	hooks testHooks
}

// testHooks let in-package tests interleave with request handling.
type testHooks struct {
	// peerCred, when set, replaces the SO_PEERCRED lookup of a connection.
	peerCred func(nc *net.UnixConn) (*unix.Ucred, error)
	// peerCreds, when set, replaces the lookup of a peer's filesystem
	// credentials.
	peerCreds func(nc *net.UnixConn, cred *unix.Ucred) (*creds, error)
}

type methodCounter struct {
	requests atomic.Uint64
	errors   atomic.Uint64
}

// invalidMethod is the counter key of requests that named no known method.
const invalidMethod = "(invalid)"

// NewServer validates cfg, prepares the socket directory (0700), removes a
// stale socket file, refuses a socket held by a live daemon and listens
// (socket file 0600). With AllowUIDs (a root daemon only) the socket is
// opened to them: see openForAllowed.
func NewServer(cfg Config) (*Server, error) {
	if cfg.SocketPath == "" {
		return nil, errors.New("control: no socket path; pass --socket or set DSH_SOCKET")
	}
	if cfg.Service == nil {
		return nil, errors.New("control: no service configured")
	}
	cfg = cfg.withDefaults()
	if cfg.MaxPendingBytes < cfg.MaxRequestBytes {
		return nil, fmt.Errorf("control: the pending-bytes bound (%d) is below the request bound (%d); a largest request could never be accepted",
			cfg.MaxPendingBytes, cfg.MaxRequestBytes)
	}
	self, err := selfCreds()
	if err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	if len(cfg.AllowUIDs) > 0 && self.uid != 0 {
		return nil, fmt.Errorf("control: --allow-uid needs a daemon running as root (this one runs as uid %d): only root can serve another uid's requests with that uid's permissions", self.uid)
	}
	s := &Server{
		self:     self,
		cfg:      cfg,
		log:      cfg.Logger.With("component", "control"),
		svc:      cfg.Service,
		uid:      uint32(os.Getuid()),
		started:  time.Now(),
		conns:    make(map[*conn]struct{}),
		byUID:    make(map[uint32]int),
		counters: make(map[string]*methodCounter),
		done:     make(chan struct{}),
		hooks:    cfg.hooks,
		pending:  &byteBudget{max: cfg.MaxPendingBytes},
		requests: make(chan struct{}, cfg.MaxRequests),
	}
	s.table = s.handlers()
	for name := range s.table {
		s.counters[name] = &methodCounter{}
	}
	s.counters[invalidMethod] = &methodCounter{}
	if err := s.listen(); err != nil {
		return nil, err
	}
	return s, nil
}

// listen creates the directory, clears a stale socket and binds.
func (s *Server) listen() error {
	path := s.cfg.SocketPath
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("control: create socket directory %s: %w", dir, err)
	}
	if st, err := os.Stat(dir); err == nil && st.Mode().Perm()&0o077 != 0 {
		s.log.Warn("socket directory is accessible to other users; prefer a private (0700) directory",
			"dir", dir, "mode", fmt.Sprintf("%#o", st.Mode().Perm()))
	}
	if err := clearStaleSocket(path); err != nil {
		return err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return fmt.Errorf("control: listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = ln.Close()
		return fmt.Errorf("control: restrict socket %s to its owner: %w", path, err)
	}
	if len(s.cfg.AllowUIDs) > 0 {
		if err := s.openForAllowed(); err != nil {
			_ = ln.Close()
			_ = os.Remove(path)
			return err
		}
	}
	s.ln = ln
	return nil
}

// clearStaleSocket removes a socket file nobody listens on, and refuses a
// live one or a path that is not a socket.
func clearStaleSocket(path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("control: inspect socket path %s: %w", path, err)
	}
	if st.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("control: %s exists and is not a socket; remove it or choose another --socket", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		_ = c.Close()
		return fmt.Errorf("control: %s is held by a running daemon; stop it (dshmount unmount) or choose another --socket", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("control: remove stale socket %s: %w", path, err)
	}
	return nil
}

// Addr returns the socket path.
func (s *Server) Addr() string { return s.cfg.SocketPath }

// Serve accepts connections until ctx ends or Close is called; it then
// closes every connection and returns nil. Other accept failures are
// returned.
func (s *Server) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { _ = s.Close() })
	defer stop()
	var delay time.Duration
	for {
		nc, err := s.ln.AcceptUnix()
		if err != nil {
			select {
			case <-s.done:
				s.wg.Wait()
				return nil
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) || isTemporary(err) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", "err", err, "delay", delay)
				time.Sleep(delay)
				continue
			}
			_ = s.Close()
			s.wg.Wait()
			return fmt.Errorf("control: accept on %s: %w", s.cfg.SocketPath, err)
		}
		delay = 0
		c := s.newConn(nc)
		if c == nil {
			continue // closed meanwhile
		}
		go c.serve(ctx)
	}
}

// isTemporary reports accept errors worth retrying (EMFILE and friends).
func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// Close stops accepting, closes every connection and removes the socket
// file. It is safe to call more than once.
func (s *Server) Close() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		conns := make([]*conn, 0, len(s.conns))
		for c := range s.conns {
			conns = append(conns, c)
		}
		s.mu.Unlock()
		close(s.done)
		s.closeErr = s.ln.Close()
		for _, c := range conns {
			c.close()
		}
	})
	return s.closeErr
}

// newConn registers a connection, or closes it when the server is closing
// or a connection limit is reached (after an error line naming it).
func (s *Server) newConn(nc *net.UnixConn) *conn {
	cred, uid, credErr := s.connPeer(nc)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = nc.Close()
		return nil
	}
	if why := s.overLimit(uid); why != "" {
		s.refuseBusy(nc, uid, why)
		return nil
	}
	c := newConn(s, nc, s.connSeq.Add(1))
	c.limitUID, c.cred, c.credErr = uid, cred, credErr
	s.conns[c] = struct{}{}
	s.byUID[uid]++
	s.wg.Add(1)
	return c
}

// dropConn unregisters a finished connection.
func (s *Server) dropConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if s.byUID[c.limitUID]--; s.byUID[c.limitUID] <= 0 {
		delete(s.byUID, c.limitUID)
	}
	s.mu.Unlock()
	s.wg.Done()
}

// connCount returns the number of open connections.
func (s *Server) connCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// count records one request of method and whether it failed.
func (s *Server) count(method string, failed bool) {
	mc, ok := s.counters[method]
	if !ok {
		mc = s.counters[invalidMethod]
	}
	mc.requests.Add(1)
	if failed {
		mc.errors.Add(1)
	}
}
