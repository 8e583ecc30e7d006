package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dshmount/dshmount/internal/service"
	"golang.org/x/sys/unix"
)

// maxInflight bounds the requests one connection runs at once (its worker
// goroutines); further pipelined requests wait for a worker.
const maxInflight = 32

// conn is one client connection: its peer identity, its implicit session,
// its watches and a serialized writer.
type conn struct {
	s  *Server
	id uint64
	nc *net.UnixConn
	// caller is the peer as the service sees it (made once the peer is
	// checked).
	caller *service.Caller
	creds  *creds // the peer's filesystem credentials; nil: requests run as the daemon
	// limitUID is the uid the connection counts against (connlimit.go);
	// cred and credErr are its peer's credentials, read once on accept.
	limitUID uint32
	cred     *unix.Ucred
	credErr  error
	ctx      context.Context
	cancel   context.CancelFunc

	wmu sync.Mutex
	w   *bufio.Writer

	smu     sync.Mutex
	watches map[string]func()
	closing bool

	closeOnce sync.Once
	inflight  sync.WaitGroup
	busy      atomic.Int64 // requests being served
}

func newConn(s *Server, nc *net.UnixConn, id uint64) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	return &conn{
		s: s, id: id, nc: nc, ctx: ctx, cancel: cancel,
		w:       bufio.NewWriterSize(nc, 64<<10),
		watches: make(map[string]func()),
	}
}

// serve runs the connection until the peer hangs up or the server closes.
func (c *conn) serve(serverCtx context.Context) {
	defer c.s.dropConn(c)
	defer c.finish()
	stop := context.AfterFunc(serverCtx, c.close)
	defer stop()

	log := c.s.log.With("conn", c.id)
	cred, err := c.cred, c.credErr
	if cred == nil && err == nil { // made without newConn (tests)
		cred, _, err = c.s.connPeer(c.nc)
	}
	if err == nil {
		err = checkPeer(cred, c.s.uid, c.s.cfg.AllowUIDs)
	}
	if err != nil {
		log.Warn("refused peer", "err", err)
		c.writeError(nil, &ErrorObject{Code: CodePeerRefused, Message: err.Error()})
		return
	}
	if c.s.uid == 0 && cred.Uid != 0 {
		// A root daemon serves another uid with that uid's permissions.
		lookup := peerCreds
		if c.s.hooks.peerCreds != nil {
			lookup = c.s.hooks.peerCreds
		}
		if c.creds, err = lookup(c.nc, cred); err != nil {
			log.Warn("refused peer", "err", err)
			c.writeError(nil, &ErrorObject{Code: CodePeerRefused, Message: err.Error()})
			return
		}
	}
	bound, err := c.s.peerSession(c.nc, cred.Pid)
	if err != nil {
		log.Warn("refused peer", "err", err)
		c.writeError(nil, &ErrorObject{Code: CodePeerRefused, Message: err.Error()})
		return
	}
	var runAs func(fn func()) error
	if c.creds != nil {
		runAs = func(fn func()) error { return c.creds.run(c.s.self, fn) }
	}
	c.caller = c.s.svc.NewCaller(service.CallerConfig{ID: c.id, UID: cred.Uid, PID: cred.Pid, Bound: bound, RunAs: runAs, Transport: c})
	log.Debug("connection opened", "uid", cred.Uid, "pid", cred.Pid, "session", bound)

	cfg := c.s.cfg
	lr := newLineReader(c.nc, cfg.MaxRequestBytes)
	lr.budget = c.s.pending
	begun := false
	lr.began = func() {
		begun = true
		_ = c.nc.SetReadDeadline(time.Now().Add(cfg.RequestTimeout))
	}
	lr.overBudget = func() {
		c.s.count(invalidMethod, true)
		c.writeError(nil, &ErrorObject{Code: CodeUnavailable,
			Message: fmt.Sprintf("the daemon already holds %d bytes of unanswered requests (its --max-pending-bytes); this request is dropped unread: retry it later, or send smaller requests", cfg.MaxPendingBytes)})
	}
	work := make(chan frame)
	defer close(work)
	workers := 0
	for {
		begun = false
		_ = c.nc.SetReadDeadline(time.Now().Add(cfg.IdleTimeout))
		f, err := lr.nextFrame()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if !begun && c.holdsState() {
				continue // quiet, not idle: it holds a session, a watch or a request
			}
			c.timedOut(begun)
			return
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				log.Debug("read failed", "err", err)
			}
			return
		}
		switch f.status {
		case lineTooLong:
			c.s.count(invalidMethod, true)
			c.writeError(nil, &ErrorObject{Code: CodeInvalidRequest,
				Message: fmt.Sprintf("request line exceeds %d bytes; send smaller requests (split large writes, or patch instead of writing whole files)", cfg.MaxRequestBytes)})
			continue
		case lineOverBudget:
			continue // answered when it was dropped
		}
		if len(bytes.TrimSpace(f.line)) == 0 {
			c.s.pending.release(f.held)
			continue
		}
		// Hand the line to an idle worker; start one while under the bound;
		// else wait for one (back-pressure on a pipelining client).
		select {
		case work <- f:
			continue
		default:
		}
		if workers < maxInflight {
			workers++
			c.inflight.Add(1)
			go c.worker(work)
		}
		select {
		case work <- f:
		case <-c.ctx.Done():
			c.s.pending.release(f.held)
			return
		}
	}
}

// timedOut tells the peer why its connection is closed: a request line
// that did not finish in time, or an idle connection.
func (c *conn) timedOut(midLine bool) {
	cfg := c.s.cfg
	if midLine {
		c.s.count(invalidMethod, true)
		c.writeError(nil, &ErrorObject{Code: CodeInvalidRequest,
			Message: fmt.Sprintf("request line unfinished after %s; the connection is closed: send each request as one line ending in a newline", cfg.RequestTimeout)})
		return
	}
	c.writeError(nil, &ErrorObject{Code: CodeUnavailable,
		Message: fmt.Sprintf("connection idle for %s with no session it opened, no watch and no request; it is closed: reconnect when you need the daemon", cfg.IdleTimeout)})
}

// worker serves requests from work until it is closed. Workers live as long
// as the connection, so their stacks stay grown between requests.
func (c *conn) worker(work <-chan frame) {
	defer c.inflight.Done()
	for f := range work {
		c.busy.Add(1)
		c.serveFrame(f)
		c.busy.Add(-1)
	}
}

// serveFrame runs one request in one of the server's request slots and
// releases the line's bytes once it is answered.
func (c *conn) serveFrame(f frame) {
	select {
	case c.s.requests <- struct{}{}:
	case <-c.ctx.Done():
		c.s.pending.release(f.held)
		return
	}
	out, after := c.s.handleLine(c.ctx, c, f.line)
	<-c.s.requests
	c.s.pending.release(f.held) // the line is decoded and served: its bytes are no longer held
	if out != nil {
		c.writeLine(out)
	}
	if after != nil {
		after()
	}
}

// finish waits for in-flight requests, stops watches and closes the
// implicit session.
func (c *conn) finish() {
	c.close()
	c.inflight.Wait()
	c.smu.Lock()
	c.closing = true
	stops := make([]func(), 0, len(c.watches))
	for _, stop := range c.watches {
		stops = append(stops, stop)
	}
	c.watches = map[string]func(){}
	c.smu.Unlock()
	for _, stop := range stops {
		stop()
	}
	if c.caller != nil {
		c.caller.Close()
	}
}

// close hangs up the connection; idempotent.
func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.cancel()
		_ = c.nc.Close()
	})
}

// writeLine writes one frame; a failed write closes the connection.
func (c *conn) writeLine(b []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	// A peer that stops taking responses cannot hold a worker forever.
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.RequestTimeout))
	_, err := c.w.Write(b)
	if err == nil {
		err = c.w.WriteByte('\n')
	}
	if err == nil {
		err = c.w.Flush()
	}
	if err != nil {
		c.close()
	}
}

// writeError writes an error response with the given raw id (nil: null).
func (c *conn) writeError(id json.RawMessage, e *ErrorObject) {
	c.writeLine(encodeResponse(id, nil, e))
}

// notify sends a notification on this connection.
func (c *conn) notify(method string, params any) {
	p, err := json.Marshal(params)
	if err != nil {
		c.s.log.Error("encode notification", "method", method, "err", err)
		return
	}
	b, err := json.Marshal(notification{JSONRPC: jsonrpcVersion, Method: method, Params: p})
	if err != nil {
		c.s.log.Error("encode notification", "method", method, "err", err)
		return
	}
	c.writeLine(b)
}

// holdsState reports whether the connection holds a watch or a session it
// opened that is still open: such a connection is never closed as idle.
func (c *conn) holdsState() bool {
	c.smu.Lock()
	defer c.smu.Unlock()
	if len(c.watches) > 0 || c.busy.Load() > 0 {
		return true
	}
	return c.caller != nil && c.caller.HoldsSession()
}

// addWatch registers a watch's stop function; false when closing.
func (c *conn) addWatch(id string, stop func()) bool {
	c.smu.Lock()
	defer c.smu.Unlock()
	if c.closing {
		return false
	}
	c.watches[id] = stop
	return true
}

// removeWatch unregisters and returns a watch's stop function.
func (c *conn) removeWatch(id string) (func(), bool) {
	c.smu.Lock()
	defer c.smu.Unlock()
	stop, ok := c.watches[id]
	delete(c.watches, id)
	return stop, ok
}

// The connection is the service's Transport for its caller's watches.
var _ service.Transport = (*conn)(nil)

// Context implements service.Transport: it ends with the connection.
func (c *conn) Context() context.Context { return c.ctx }

// Notify implements service.Transport.
func (c *conn) Notify(method string, params any) { c.notify(method, params) }

// AddWatch implements service.Transport.
func (c *conn) AddWatch(id string, stop func()) bool { return c.addWatch(id, stop) }

// RemoveWatch implements service.Transport.
func (c *conn) RemoveWatch(id string) (func(), bool) { return c.removeWatch(id) }
