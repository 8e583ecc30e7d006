package mcp

import (
	"context"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioTransport returns the transport `dshmount mcp` serves on: newline-
// delimited JSON-RPC read from in and written to out. Unlike a bare
// sdk.IOTransport, it answers every request read before in ends: the end of
// input is passed on only once each of those requests has had its response
// written, so `printf '…requests…' | dshmount mcp` carries them all out.
// Closing the connection leaves in and out open.
func StdioTransport(in io.Reader, out io.Writer) sdk.Transport {
	return &drainTransport{inner: &sdk.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}}}
}

// nopWriteCloser keeps the process's stdout open when the connection
// closes.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// drainTransport wraps a transport so that its connections hold back the
// end of input until every request read has been answered.
type drainTransport struct{ inner sdk.Transport }

// Connect implements sdk.Transport.
func (t *drainTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &drainConn{Connection: c, pending: map[any]bool{}, answered: make(chan struct{}, 1)}, nil
}

// drainConn counts the requests read and not yet answered.
type drainConn struct {
	sdk.Connection

	mu       sync.Mutex
	pending  map[any]bool  // raw ids of requests read and not answered
	answered chan struct{} // signalled after each answer
}

// Read implements sdk.Connection: it records each request read, and holds
// back an error (the end of input) until no request is pending or ctx ends.
func (c *drainConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err != nil {
		c.waitAnswered(ctx)
		return nil, err
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		c.mu.Lock()
		c.pending[req.ID.Raw()] = true
		c.mu.Unlock()
	}
	return msg, nil
}

// Write implements sdk.Connection: a response written settles its request.
func (c *drainConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.mu.Lock()
		delete(c.pending, resp.ID.Raw())
		c.mu.Unlock()
		select {
		case c.answered <- struct{}{}:
		default:
		}
	}
	return err
}

// waitAnswered returns once no request is pending, or ctx ends.
func (c *drainConn) waitAnswered(ctx context.Context) {
	for {
		c.mu.Lock()
		n := len(c.pending)
		c.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-c.answered:
		}
	}
}
