package service

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sync"
	"time"

	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

// fs.watch is served from the store's change feed (policy.Subscribe):
// every change made through the socket, the mount or (with serve --watch)
// directly in the workspace directory is an audit entry with a seq. A
// watch keeps the entries in its scope, maps each to an event (changeOf),
// merges the changes of one path by one actor within WatchWindow
// (coalescer) and sends them as fs.changed notifications in seq order.
// When the feed cannot vouch for every change any more (the watch fell
// behind by WatchBuffer changes, the backing-tree watcher overflowed, the
// store closes), the watch sends one "lost" event and ends.
//
// Who sees what: a peer may only watch a path it can read (checked with
// its own credentials when the watch starts: a directory must be
// listable, a file readable; a missing path needs a listable directory).
// A peer served with its own credentials (another uid, root daemon) is
// told of a change below the watched directory only when it may list the
// changed path's directory (checked with its credentials, remembered per
// directory for the watch's life): a rename out of a directory it may not
// list is a creation at the destination, one into such a directory a
// deletion of the source.
// Paths the view hides are never audited, so never reported. A watch
// follows the workspace: changes made inside a branch are not reported;
// a watch with branch follows that branch instead (branch_watch.go). A peer of
// another uid than root and the daemon's sees every change in its scope
// (as inotify would show it) but only the channel of other uids' changes:
// their session, session name, pid and uid are left out (fs.log shows
// such a peer only its own entries).

// maxPendingEvents flushes a window early once it holds this many events.
const maxPendingEvents = 1024

// watchState is one running watch.
type watchState struct {
	id     string
	scope  watchScope
	sub    *policy.Subscription
	peer   uint32 // the watching peer's uid
	full   bool   // the peer sees every actor's details
	stopCh chan struct{}
	// filter hides the names the peer may not list with its own
	// credentials.
	filter *listFilter
	// br is the watched branch (nil: the workspace); fs is what the watch
	// shows (the workspace view or the branch's).
	br *branch.Branch
	fs provider.FileSystem

	once    sync.Once
	release func() // gives the watch's slot back
}

// Watch starts a watch; notifications begin once the response with the
// watch id has been written.
func (s *Service) Watch(ctx context.Context, c *Caller, p WatchParams) (WithAfter[WatchResult], error) {
	sc, br, err := s.watchBranch(c, p.Branch)
	if err != nil {
		return WithAfter[WatchResult]{}, err
	}
	t, err := sc.resolve(ctx, "path", p.Path, p.Cwd)
	if err != nil {
		return WithAfter[WatchResult]{}, err
	}
	if err := mayWatch(ctx, sc.fs, t); err != nil {
		return WithAfter[WatchResult]{}, err
	}
	if s.watches.Add(1) > int64(s.cfg.MaxWatches) {
		s.watches.Add(-1)
		return WithAfter[WatchResult]{}, &callError{obj: ErrorObject{Code: CodeUnavailable,
			Message: fmt.Sprintf("the daemon already runs %d watches (its limit); unwatch one or watch a common parent directory recursively instead", s.cfg.MaxWatches)}}
	}
	release := func() { s.watches.Add(-1) }
	since := s.store.LastSeq()
	if p.Since != nil {
		since = *p.Since
	}
	sub, err := s.store.Subscribe(since, s.cfg.WatchBuffer)
	if err != nil {
		release()
		var lost *policy.ChangesLostError
		if errors.As(err, &lost) {
			return WithAfter[WatchResult]{}, fmt.Errorf("watch %s: %w", t.DisplayPath, err)
		}
		if provider.CodeOf(err) == provider.CodeInvalidArgument {
			msg := fmt.Sprintf("since %d is after the newest change (seq %d); pass a seq a watch or fs.log gave you", since, s.store.LastSeq())
			return WithAfter[WatchResult]{}, &callError{obj: ErrorObject{Code: CodeInvalidParams, Message: msg,
				Data: &ErrorData{Code: provider.CodeInvalidArgument, Path: t.DisplayPath, Message: msg}}}
		}
		return WithAfter[WatchResult]{}, fmt.Errorf("watch %s: %w", t.DisplayPath, err)
	}
	uid := c.peer().UID
	w := &watchState{
		id:      fmt.Sprintf("w%d", s.watchSeq.Add(1)),
		scope:   watchScope{root: t.DisplayPath, recursive: p.Recursive},
		sub:     sub,
		peer:    uid,
		full:    s.privileged(uid),
		stopCh:  make(chan struct{}),
		release: release,
		br:      br,
		fs:      sc.fs,
	}
	// Checked above: the watched path's directory, or the directory itself.
	w.filter = s.peerFilter(c, w.fs, true)
	w.filter.listable[t.DisplayPath], w.filter.listable[path.Dir(t.DisplayPath)] = true, true
	if !c.transport.AddWatch(w.id, w.stop) {
		w.stop()
		return WithAfter[WatchResult]{}, fmt.Errorf("watch %s: the connection is closing", t.DisplayPath)
	}
	return WithAfter[WatchResult]{
		Result: WatchResult{Watch: w.id, Seq: since},
		After:  func() { go s.deliver(c, w) },
	}, nil
}

// mayWatch checks, with the peer's credentials (handlers run with them),
// that it may read what it watches: a directory must be listable, a file
// readable, and a missing path's directory listable.
func mayWatch(ctx context.Context, fsys provider.FileSystem, t provider.Target) error {
	info, err := fsys.Stat(ctx, t)
	switch {
	case provider.CodeOf(err) == provider.CodeNotFound || (err == nil && info == nil):
		if t.DisplayPath == "." {
			return provider.NewError(provider.CodeNotFound, "watch", ".", nil, "the workspace root is gone")
		}
		dir, derr := fsys.Resolve(ctx, path.Dir(t.DisplayPath), provider.ResolveOptions{})
		if derr == nil {
			_, derr = fsys.ListDir(ctx, dir)
		}
		if derr != nil {
			return fmt.Errorf("watch %s (it does not exist; its directory must): %w", t.DisplayPath, derr)
		}
		return nil
	case err != nil:
		return fmt.Errorf("watch %s: %w", t.DisplayPath, err)
	case info.Type == provider.TypeDirectory:
		_, err = fsys.ListDir(ctx, t)
	default:
		_, err = fsys.ReadByteRange(ctx, t, provider.ByteRange{})
		if provider.CodeOf(err) == provider.CodeNotRegularFile {
			err = nil // a symlink or a special file: nothing to read, nothing leaks
		}
	}
	if err != nil {
		return fmt.Errorf("watch %s: %w", t.DisplayPath, err)
	}
	return nil
}

// stop ends the watch; idempotent.
func (w *watchState) stop() {
	w.once.Do(func() {
		close(w.stopCh)
		w.sub.Close()
		w.release()
	})
}

// deliver sends the watch's notifications until it stops, the connection
// closes or the feed is lost.
func (s *Service) deliver(c *Caller, w *watchState) {
	var (
		co    = coalescer{window: s.cfg.WatchWindow}
		timer *time.Timer
		due   <-chan time.Time
		last  uint64 // seq of the last change seen (sent or out of scope)
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	flush := func() {
		for _, ev := range co.take() {
			c.transport.Notify(NotifyChanged, ev)
		}
		due = nil
	}
	for {
		select {
		case it, ok := <-w.sub.C:
			if !ok || it.Lost {
				flush()
				c.transport.Notify(NotifyChanged, ChangeEvent{Watch: w.id, Seq: max(last, s.store.LastSeq()), Path: w.scope.root, Kind: ChangeLost})
				if stop, ok := c.transport.RemoveWatch(w.id); ok {
					stop()
				}
				return
			}
			last = it.Entry.Seq
			if !s.branchAlive(w) {
				flush()
				c.transport.Notify(NotifyChanged, ChangeEvent{Watch: w.id, Seq: last, Path: w.scope.root, Kind: ChangeLost})
				if stop, ok := c.transport.RemoveWatch(w.id); ok {
					stop()
				}
				return
			}
			ev, ok := s.eventFor(w, it.Entry)
			if ok && !w.filter.everyone() {
				ev, ok = visibleTo(c.transport.Context(), w, ev)
			}
			if !ok {
				continue
			}
			co.add(ev)
			switch {
			case len(co.pending) >= maxPendingEvents:
				flush()
			case due == nil:
				if timer == nil {
					timer = time.NewTimer(s.cfg.WatchWindow)
				} else {
					timer.Reset(s.cfg.WatchWindow)
				}
				due = timer.C
			}
		case <-due:
			flush()
		case <-w.stopCh:
			return
		case <-c.transport.Context().Done():
			w.stop()
			return
		}
	}
}

// eventFor maps an entry to w's event, or false when it is out of scope.
func (s *Service) eventFor(w *watchState, e policy.AuditEntry) (ChangeEvent, bool) {
	if w.br == nil && branch.IsKey(e.Key) {
		return ChangeEvent{}, false // made in a branch, not in the workspace a watch follows
	}
	ev := changeOf(e)
	if w.br != nil {
		var ok bool
		if ev, ok = inBranchView(w.br, e, ev); !ok {
			return ChangeEvent{}, false
		}
	}
	if !w.scope.covers(ev.Path) && !w.scope.covers(ev.To) {
		return ChangeEvent{}, false
	}
	ev.Watch = w.id
	a := &ChangeActor{Channel: e.Actor.Channel}
	if w.full || e.Actor.UID == w.peer {
		uid := e.Actor.UID
		a.Session, a.SessionName, a.PID, a.UID = e.Actor.Session, s.names.name(e.Actor.Session), e.Actor.PID, &uid
	}
	ev.Actor = a
	return ev, true
}

// visibleTo trims ev to what a peer with its own credentials may see: each
// of its paths must be in a directory the peer may list.
func visibleTo(ctx context.Context, w *watchState, ev ChangeEvent) (ChangeEvent, bool) {
	from := w.filter.mayName(ctx, ev.Path)
	if ev.Kind != ChangeRenamed {
		return ev, from
	}
	to := w.filter.mayName(ctx, ev.To)
	switch {
	case from && to:
		return ev, true
	case to: // from a directory the peer may not list: a new file to it
		ev.Kind, ev.Path, ev.To = ChangeCreated, ev.To, ""
		return ev, w.scope.covers(ev.Path)
	case from: // into a directory the peer may not list: gone
		ev.Kind, ev.To, ev.Version = ChangeDeleted, "", ""
		return ev, w.scope.covers(ev.Path)
	}
	return ev, false
}

// Unwatch stops a watch of this connection.
func (s *Service) Unwatch(_ context.Context, c *Caller, p UnwatchParams) (Empty, error) {
	stop, ok := c.transport.RemoveWatch(p.Watch)
	if !ok {
		return Empty{}, invalidParams("unknown watch %q on this connection; watches belong to the connection that started them", p.Watch)
	}
	stop()
	return Empty{}, nil
}
