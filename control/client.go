package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/dshmount/dshmount/internal/provider"
)

// ErrClientClosed is returned by calls on a closed Client or after the
// daemon hung up.
var ErrClientClosed = errors.New("control: connection to the daemon is closed")

// maxResponseBytes bounds one response line read by the client.
const maxResponseBytes int64 = 1 << 30

// Client is a connection to a daemon's control socket. It is safe for
// concurrent use; calls are pipelined on the one connection.
type Client struct {
	nc  net.Conn
	wmu sync.Mutex

	nextID atomic.Uint64

	mu      sync.Mutex
	pending map[uint64]*pendingCall
	watches map[string]*Watch
	err     error // set when the connection ends
	done    chan struct{}
}

type pendingCall struct {
	ch chan callResult
	// onResult runs in the reader goroutine before the next line is read,
	// so a watch is registered before its first notification arrives.
	onResult func(json.RawMessage)
	// fast, when set, decodes the result in the reader goroutine in the
	// same pass as the envelope (see decodeLine).
	fast fastResult
}

type callResult struct {
	result  json.RawMessage
	decoded any // the result fast decoded; result is then nil
	err     error
}

// Dial connects to the daemon's control socket.
func Dial(socketPath string) (*Client, error) {
	return DialContext(context.Background(), socketPath)
}

// DialContext connects to the daemon's control socket within ctx.
func DialContext(ctx context.Context, socketPath string) (*Client, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", socketPath)
	if err != nil {
		return nil, fmt.Errorf("control: connect to %s (is the daemon running? start it with 'dshmount serve'): %w", socketPath, err)
	}
	c := &Client{
		nc:      nc,
		pending: make(map[uint64]*pendingCall),
		watches: make(map[string]*Watch),
		done:    make(chan struct{}),
	}
	go c.readLoop()
	return c, nil
}

// Close hangs up; pending calls fail with ErrClientClosed and watch channels
// are closed.
func (c *Client) Close() error {
	err := c.nc.Close()
	<-c.done
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// incoming is any line from the daemon.
type incoming struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *ErrorObject    `json:"error"`
}

// readLoop routes responses to their callers and notifications to watches.
func (c *Client) readLoop() {
	lr := newLineReader(c.nc, maxResponseBytes)
	lr.asText = true
	var connErr error
	for {
		f, err := lr.nextFrame()
		if err != nil {
			break
		}
		if f.status != lineOK {
			connErr = fmt.Errorf("control: a response exceeded %d bytes", maxResponseBytes)
			break
		}
		d, err := decodeLine(f.text, c.fastDecoder)
		if err != nil {
			connErr = fmt.Errorf("control: the daemon sent a malformed line: %w", err)
			break
		}
		in, id := d.in, d.id
		if in.Method != "" && in.ID == nil {
			c.dispatchNotification(in)
			continue
		}
		if !d.hasID {
			// id null: a connection-level error (e.g. the peer was refused).
			if in.Error != nil {
				connErr = rpcErrorFromObject(in.Error)
			}
			continue
		}
		c.mu.Lock()
		pc := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if pc == nil {
			continue // the caller gave up
		}
		if in.Error != nil {
			pc.ch <- callResult{err: rpcErrorFromObject(in.Error)}
			continue
		}
		if pc.onResult != nil {
			pc.onResult(in.Result)
		}
		pc.ch <- callResult{result: in.Result, decoded: d.decoded}
	}
	c.shutdown(connErr)
}

// fastDecoder returns the fast result decoder of the pending call id, or nil.
func (c *Client) fastDecoder(id uint64) fastResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	if pc := c.pending[id]; pc != nil {
		return pc.fast
	}
	return nil
}

// shutdown fails pending calls and closes watches.
func (c *Client) shutdown(connErr error) {
	_ = c.nc.Close()
	c.mu.Lock()
	if connErr == nil {
		connErr = ErrClientClosed
	} else {
		connErr = fmt.Errorf("%w: %w", ErrClientClosed, connErr)
	}
	c.err = connErr
	pending := c.pending
	c.pending = map[uint64]*pendingCall{}
	watches := c.watches
	c.watches = map[string]*Watch{}
	c.mu.Unlock()
	for _, pc := range pending {
		pc.ch <- callResult{err: connErr}
	}
	for _, w := range watches {
		w.closeChan()
	}
	close(c.done)
}

// dispatchNotification delivers an fs.changed notification to its watch.
func (c *Client) dispatchNotification(in incoming) {
	if in.Method != NotifyChanged {
		return
	}
	var ev ChangeEvent
	if err := json.Unmarshal(in.Params, &ev); err != nil {
		return
	}
	c.mu.Lock()
	w := c.watches[ev.Watch]
	c.mu.Unlock()
	if w != nil {
		w.deliver(ev)
	}
}

// Call sends one request and decodes its result into result (may be nil).
// Errors from the daemon are *RPCError.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	return c.call(ctx, method, params, result, nil)
}

func (c *Client) call(ctx context.Context, method string, params, result any, onResult func(json.RawMessage)) error {
	p, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("control: encode %s params: %w", method, err)
	}
	id := c.nextID.Add(1)
	b, err := json.Marshal(request{JSONRPC: jsonrpcVersion, ID: json.RawMessage(strconv.FormatUint(id, 10)), Method: method, Params: p})
	if err != nil {
		return fmt.Errorf("control: encode %s request: %w", method, err)
	}
	pc := &pendingCall{ch: make(chan callResult, 1), onResult: onResult}
	if onResult == nil {
		switch result.(type) {
		case *ReadResult:
			pc.fast = readResultDecoder
		case *EditResult:
			pc.fast = editResultDecoder
		}
	}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	c.pending[id] = pc
	c.mu.Unlock()

	b = append(b, '\n')
	c.wmu.Lock()
	_, err = c.nc.Write(b)
	c.wmu.Unlock()
	if err != nil {
		c.forget(id)
		return fmt.Errorf("%w: send %s: %w", ErrClientClosed, method, err)
	}
	select {
	case r := <-pc.ch:
		if r.err != nil {
			return r.err
		}
		switch d := r.decoded.(type) {
		case *ReadResult:
			*result.(*ReadResult) = *d
			return nil
		case *EditResult:
			*result.(*EditResult) = *d
			return nil
		}
		if result != nil {
			if err := json.Unmarshal(r.result, result); err != nil {
				return fmt.Errorf("control: decode %s result: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		c.forget(id)
		return ctx.Err()
	}
}

func (c *Client) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// OpenSession opens a session (name is for people).
func (c *Client) OpenSession(ctx context.Context, name string) (SessionID, error) {
	return c.OpenSessionWith(ctx, SessionOpenParams{Name: name})
}

// OpenSessionWith opens a session with every session.open parameter (e.g.
// Channel "mcp" to have this connection's requests audited as MCP).
func (c *Client) OpenSessionWith(ctx context.Context, p SessionOpenParams) (SessionID, error) {
	var r SessionOpenResult
	err := c.Call(ctx, MethodSessionOpen, p, &r)
	return r.Session, err
}

// CloseSession closes a session.
func (c *Client) CloseSession(ctx context.Context, id SessionID) error {
	return c.Call(ctx, MethodSessionClose, SessionCloseParams{Session: id}, nil)
}

// BindSession makes pid and its descendants act for the session on the
// mount.
func (c *Client) BindSession(ctx context.Context, id SessionID, pid int) error {
	_, err := c.Bind(ctx, id, pid)
	return err
}

// Bind calls session.bind and returns the session pid was bound to: id,
// or the caller's own session when the caller is a bound process.
func (c *Client) Bind(ctx context.Context, id SessionID, pid int) (SessionID, error) {
	return c.BindWith(ctx, SessionBindParams{Session: id, PID: pid})
}

// BindWith is Bind with all of session.bind's params (Strict).
func (c *Client) BindWith(ctx context.Context, p SessionBindParams) (SessionID, error) {
	res, err := callTyped[SessionBindResult](ctx, c, MethodSessionBind, p)
	if err != nil {
		return "", err
	}
	if res.Session == "" {
		return p.Session, nil // an older daemon answers {}
	}
	return res.Session, nil
}

// Stat calls fs.stat.
func (c *Client) Stat(ctx context.Context, p StatParams) (*StatResult, error) {
	return callTyped[StatResult](ctx, c, MethodStat, p)
}

// List calls fs.list.
func (c *Client) List(ctx context.Context, p ListParams) (*ListResult, error) {
	return callTyped[ListResult](ctx, c, MethodList, p)
}

// Read calls fs.read.
func (c *Client) Read(ctx context.Context, p ReadParams) (*ReadResult, error) {
	return callTyped[ReadResult](ctx, c, MethodRead, p)
}

// Write calls fs.write.
func (c *Client) Write(ctx context.Context, p WriteParams) (*WriteResult, error) {
	if err := checkText("write", p.Path, "content", p.Content); err != nil {
		return nil, err
	}
	return callTyped[WriteResult](ctx, c, MethodWrite, p)
}

// Edit calls fs.edit.
func (c *Client) Edit(ctx context.Context, p EditParams) (*EditResult, error) {
	if err := checkText("edit", p.Path, "oldString", p.OldString); err != nil {
		return nil, err
	}
	if err := checkText("edit", p.Path, "newString", p.NewString); err != nil {
		return nil, err
	}
	return callTyped[EditResult](ctx, c, MethodEdit, p)
}

// Patch calls fs.patch. A commit that stopped part-way is not an error:
// check PatchResult.Complete.
func (c *Client) Patch(ctx context.Context, p PatchParams) (*PatchResult, error) {
	if err := checkText("patch", "", "patch", p.Patch); err != nil {
		return nil, err
	}
	return callTyped[PatchResult](ctx, c, MethodPatch, p)
}

// Delete calls fs.delete.
func (c *Client) Delete(ctx context.Context, p DeleteParams) (*DeleteResult, error) {
	return callTyped[DeleteResult](ctx, c, MethodDelete, p)
}

// Move calls fs.move.
func (c *Client) Move(ctx context.Context, p MoveParams) (*MoveResult, error) {
	return callTyped[MoveResult](ctx, c, MethodMove, p)
}

// Log calls fs.log.
func (c *Client) Log(ctx context.Context, p LogParams) (*LogResult, error) {
	return callTyped[LogResult](ctx, c, MethodLog, p)
}

// Status calls daemon.status.
func (c *Client) Status(ctx context.Context) (*StatusResult, error) {
	return callTyped[StatusResult](ctx, c, MethodStatus, Empty{})
}

func callTyped[T any](ctx context.Context, c *Client, method string, params any) (*T, error) {
	var r T
	if err := c.Call(ctx, method, params, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// watchBuffer is the number of change events a Watch holds for a slow
// reader. When it is full the watch ends with a lost event (one more slot
// is kept for it), never silently dropping a change.
const watchBuffer = 1024

// Watch is a running fs.watch. Events arrive on C in seq order. C is
// closed after Close, after the connection ends, or after a ChangeLost
// event (the daemon ended the watch, or C was full): then rescan and watch
// again with since = that event's Seq.
type Watch struct {
	ID string
	// Seq is the seq the watch started after (WatchResult.Seq).
	Seq uint64
	C   <-chan ChangeEvent

	c      *Client
	ch     chan ChangeEvent
	mu     sync.Mutex
	closed bool
	last   uint64 // seq of the last event delivered
}

// Watch calls fs.watch and returns the running watch.
func (c *Client) Watch(ctx context.Context, p WatchParams) (*Watch, error) {
	var w *Watch
	register := func(raw json.RawMessage) {
		var r WatchResult
		if json.Unmarshal(raw, &r) != nil {
			return
		}
		ch := make(chan ChangeEvent, watchBuffer+1)
		w = &Watch{ID: r.Watch, Seq: r.Seq, C: ch, c: c, ch: ch, last: r.Seq}
		c.mu.Lock()
		c.watches[r.Watch] = w
		c.mu.Unlock()
	}
	var r WatchResult
	if err := c.call(ctx, MethodWatch, p, &r, register); err != nil {
		return nil, err
	}
	if w == nil {
		return nil, fmt.Errorf("control: the daemon answered fs.watch without a watch id")
	}
	return w, nil
}

// Close stops the watch on the daemon and closes C.
func (w *Watch) Close(ctx context.Context) error {
	if !w.forget() {
		w.closeChan()
		return nil
	}
	w.closeChan()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return w.c.Call(ctx, MethodUnwatch, UnwatchParams{Watch: w.ID}, nil)
}

// forget unregisters the watch from its client; false when it was not
// registered any more.
func (w *Watch) forget() bool {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	_, live := w.c.watches[w.ID]
	delete(w.c.watches, w.ID)
	return live
}

// deliver queues ev (from the reader goroutine, never blocking). A lost
// event ends the watch; so does a full C: a lost event is queued in the
// slot kept for it, and the daemon is told to stop the watch.
func (w *Watch) deliver(ev ChangeEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	if ev.Kind != ChangeLost && len(w.ch) >= watchBuffer {
		w.ch <- ChangeEvent{Watch: w.ID, Seq: w.last, Kind: ChangeLost}
		w.closeLocked()
		if w.forget() {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = w.c.Call(ctx, MethodUnwatch, UnwatchParams{Watch: w.ID}, nil)
			}()
		}
		return
	}
	w.ch <- ev
	w.last = max(w.last, ev.Seq)
	if ev.Kind == ChangeLost {
		w.closeLocked()
		w.forget()
	}
}

func (w *Watch) closeChan() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closeLocked()
}

func (w *Watch) closeLocked() {
	if !w.closed {
		w.closed = true
		close(w.ch)
	}
}

// checkText refuses invalid UTF-8 before encoding, which would silently
// replace the bad bytes.
func checkText(op, path, field, s string) error {
	if utf8.ValidString(s) {
		return nil
	}
	return provider.NewError(provider.CodeNotText, op, path, nil,
		"%s is not valid UTF-8; dshmount stores text, so convert it to UTF-8 first", field)
}

// Discover returns the daemon's OpenRPC document (rpc.discover).
func (c *Client) Discover(ctx context.Context) (*OpenRPC, error) {
	return callTyped[OpenRPC](ctx, c, MethodDiscover, Empty{})
}
