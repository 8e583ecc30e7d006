package control

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/dshmount/dshmount/provider"
)

// watchState coalesces a provider watch's callbacks into fs.changed
// notifications on one connection. Bursts of changes collapse into one
// notification carrying the version current when it is sent.
type watchState struct {
	id     string
	target provider.Target
	signal chan struct{} // capacity 1: a pending change
	stopCh chan struct{}

	mu   sync.Mutex
	errs []string // watcher failures not yet reported

	once    sync.Once
	closer  interface{ Close() error }
	release func() // gives the watch's slot back
}

// watch starts watching a file or directory; notifications begin once the
// response with the watch id has been written.
func (s *Server) watch(ctx context.Context, c *conn, params json.RawMessage) (any, error) {
	var p WatchParams
	if err := decodeParams(MethodWatch, params, &p); err != nil {
		return nil, err
	}
	t, err := s.resolve(ctx, "path", p.Path, p.Cwd)
	if err != nil {
		return nil, err
	}
	if s.watches.Add(1) > int64(s.cfg.MaxWatches) {
		s.watches.Add(-1)
		return nil, &callError{obj: ErrorObject{Code: CodeUnavailable,
			Message: fmt.Sprintf("the daemon already runs %d watches (its limit); unwatch one or watch a common parent directory instead", s.cfg.MaxWatches)}}
	}
	w := &watchState{
		release: func() { s.watches.Add(-1) },
		id:      fmt.Sprintf("w%d", s.watchSeq.Add(1)),
		target:  t,
		signal:  make(chan struct{}, 1),
		stopCh:  make(chan struct{}),
	}
	closer, err := s.fs.Watch(c.ctx, t, w.changed)
	if err != nil {
		w.stop()
		return nil, fmt.Errorf("watch %s: %w", t.DisplayPath, err)
	}
	w.closer = closer
	if !c.addWatch(w.id, w.stop) {
		w.stop()
		return nil, fmt.Errorf("watch %s: the connection is closing", t.DisplayPath)
	}
	return withAfter{
		result: WatchResult{Watch: w.id},
		after:  func() { go s.deliver(c, w) },
	}, nil
}

// changed is the provider callback; it never blocks.
func (w *watchState) changed(err error) {
	if err != nil {
		w.mu.Lock()
		if len(w.errs) < 16 {
			w.errs = append(w.errs, err.Error())
		}
		w.mu.Unlock()
	}
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// stop ends the watch; idempotent.
func (w *watchState) stop() {
	w.once.Do(func() {
		close(w.stopCh)
		if w.closer != nil {
			_ = w.closer.Close()
		}
		w.release()
	})
}

// deliver sends notifications until the watch stops or the connection
// closes.
func (s *Server) deliver(c *conn, w *watchState) {
	for {
		select {
		case <-w.stopCh:
			return
		case <-c.ctx.Done():
			w.stop()
			return
		case <-w.signal:
		}
		w.mu.Lock()
		errs := w.errs
		w.errs = nil
		w.mu.Unlock()
		for _, e := range errs {
			c.notify(NotifyChanged, ChangeEvent{Watch: w.id, Path: w.target.DisplayPath, Kind: ChangeError, Error: e})
		}
		ev := ChangeEvent{Watch: w.id, Path: w.target.DisplayPath, Kind: ChangeRemoved}
		info, err := s.fs.Stat(c.ctx, w.target)
		switch {
		case err != nil:
			ev.Kind, ev.Error = ChangeError, err.Error()
		case info != nil:
			ev.Kind, ev.Version = ChangeModified, info.Version
		}
		c.notify(NotifyChanged, ev)
	}
}

// unwatch stops a watch of this connection.
func (s *Server) unwatch(_ context.Context, c *conn, params json.RawMessage) (any, error) {
	var p UnwatchParams
	if err := decodeParams(MethodUnwatch, params, &p); err != nil {
		return nil, err
	}
	stop, ok := c.removeWatch(p.Watch)
	if !ok {
		return nil, invalidParams("unknown watch %q on this connection; watches belong to the connection that started them", p.Watch)
	}
	stop()
	return Empty{}, nil
}
