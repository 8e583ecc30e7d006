package policy

import (
	"errors"
	"slices"
	"sync"

	"github.com/dshmount/dshmount/internal/provider"
)

// The change feed: every completed change (socket, mount, external) is an
// audit entry, and its audit seq is its feed seq. A subscriber asks for the
// changes after a seq it knows; the store replays the retained ones, then
// goes live, with no gap and no duplicate. Refusals are never on the feed.
//
// The store vouches only for changes since it opened (a change made while
// the daemon was down is in no entry) and since the last time changes were
// lost (MarkChangesLost, after a watcher overflow): an older since is
// FS_CHANGES_LOST.

// DefaultFeedBuffer is the live entries a subscriber may fall behind by
// before it is told it lost changes.
const DefaultFeedBuffer = 4096

// feedReplayPage is how many entries a replay reads at a time.
const feedReplayPage = 1000

// FeedItem is one delivery of a subscription: an entry, or (Lost set, the
// last item) the news that the subscription fell behind or changes were
// lost, after which the subscriber must rescan and resubscribe.
type FeedItem struct {
	Entry AuditEntry
	Lost  bool
}

// feed is the store's live fan-out of appended changes.
type feed struct {
	mu    sync.Mutex // orders seq assignment with publication
	base  uint64     // changes with seq > base are vouched for
	subs  map[*Subscription]struct{}
	store *Store
}

// Subscription delivers the changes after a seq, replayed then live. C is
// closed after a Lost item, or once Close was called.
type Subscription struct {
	C <-chan FeedItem

	out    chan FeedItem
	live   chan AuditEntry // bounded; full: the subscriber fell behind
	stop   chan struct{}
	once   sync.Once
	done   chan struct{}
	feed   *feed
	failMu sync.Mutex
	lost   bool // live overflowed or changes were lost
}

// changesLostMsg explains FS_CHANGES_LOST.
const changesLostMsg = "changes after seq %d are not all known (from before this daemon run, older than the retained history, or before a lost watch); rescan, then subscribe from seq %d"

// ChangesLostError is the FS_CHANGES_LOST error of Subscribe: the store
// cannot vouch for every change after Since; rescan, then subscribe from
// Resume. It unwraps to the *provider.Error with that code.
type ChangesLostError struct {
	Since, Resume uint64
	err           *provider.Error
}

// Error implements error.
func (e *ChangesLostError) Error() string { return e.err.Error() }

// Unwrap returns the FS_CHANGES_LOST *provider.Error.
func (e *ChangesLostError) Unwrap() error { return e.err }

// changesLost is the FS_CHANGES_LOST error naming the seq to resubscribe
// from.
func changesLost(since, resume uint64) error {
	return &ChangesLostError{Since: since, Resume: resume,
		err: provider.NewError(provider.CodeChangesLost, "watch", "", nil, changesLostMsg, since, resume)}
}

// newFeed starts the feed of a store that just opened: it consumes one seq
// so that no entry of an earlier run can carry the base.
func newFeed(s *Store) *feed {
	return &feed{base: s.auditSeq.next(), subs: map[*Subscription]struct{}{}, store: s}
}

// LastSeq is the seq of the newest audit entry, or the feed's base when
// this run appended none: subscribing from it gets every later change.
func (s *Store) LastSeq() uint64 {
	s.feed.mu.Lock()
	defer s.feed.mu.Unlock()
	return s.auditSeq.last.Load()
}

// MarkChangesLost says some changes were never recorded (the watcher
// overflowed): every subscriber gets a Lost item, and a since before now
// is FS_CHANGES_LOST.
func (s *Store) MarkChangesLost() { s.rec.markChangesLost() }

// markLocalChangesLost is MarkChangesLost on a local store.
func (s *Store) markLocalChangesLost() {
	f := s.feed
	f.mu.Lock()
	defer f.mu.Unlock()
	f.base = s.auditSeq.next()
	for sub := range f.subs {
		sub.fail()
	}
	clear(f.subs)
}

// vouchesAfter is the feed's base: changes after it are all known.
func (f *feed) vouchesAfter() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.base
}

// end tells every subscriber it lost the feed (the store closes).
func (f *feed) end() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for sub := range f.subs {
		sub.fail()
	}
	clear(f.subs)
}

// publish hands e to every subscriber; f.mu is held.
func (f *feed) publish(e AuditEntry) {
	if e.IsRefusal() {
		return
	}
	for sub := range f.subs {
		select {
		case sub.live <- e:
		default:
			sub.fail()
			delete(f.subs, sub)
		}
	}
}

// Subscribe delivers every change after since, then every new one. buffer
// bounds how far the subscriber may fall behind (0: DefaultFeedBuffer).
// since older than the store can vouch for is FS_CHANGES_LOST; one after
// the newest entry is FS_INVALID_ARGUMENT.
func (s *Store) Subscribe(since uint64, buffer int) (*Subscription, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if buffer <= 0 {
		buffer = DefaultFeedBuffer
	}
	f := s.feed
	f.mu.Lock()
	last := s.auditSeq.last.Load()
	switch {
	case since > last:
		f.mu.Unlock()
		return nil, provider.NewError(provider.CodeInvalidArgument, "watch", "", nil,
			"since %d is after the newest change (seq %d)", since, last)
	case since < f.base:
		f.mu.Unlock()
		return nil, changesLost(since, last)
	}
	out := make(chan FeedItem, 64)
	sub := &Subscription{C: out, out: out, live: make(chan AuditEntry, buffer),
		stop: make(chan struct{}), done: make(chan struct{}), feed: f}
	f.subs[sub] = struct{}{}
	f.mu.Unlock()
	go sub.run(s, since, last)
	return sub, nil
}

// fail marks the subscription lost; its goroutine sends the Lost item.
func (sub *Subscription) fail() {
	sub.failMu.Lock()
	defer sub.failMu.Unlock()
	if !sub.lost {
		sub.lost = true
		close(sub.live)
	}
}

// Close ends the subscription and waits for its goroutine.
func (sub *Subscription) Close() {
	sub.once.Do(func() {
		close(sub.stop)
		f := sub.feed
		f.mu.Lock()
		delete(f.subs, sub)
		f.mu.Unlock()
		<-sub.done
	})
}

// run replays the retained changes in (since, upto], then forwards the
// live ones.
func (sub *Subscription) run(s *Store, since, upto uint64) {
	defer close(sub.done)
	defer close(sub.out)
	send := func(it FeedItem) bool {
		select {
		case sub.out <- it:
			return true
		case <-sub.stop:
			return false
		}
	}
	for cur := since; cur < upto; {
		page, err := s.Audit(AuditQuery{Since: cur, Limit: feedReplayPage, Kind: AuditChanges})
		if err != nil {
			if !errors.Is(err, ErrClosed) {
				s.log.Error("replay the change feed", "since", cur, "err", err)
			}
			send(FeedItem{Lost: true})
			return
		}
		if f := sub.feed; f.vouchesAfter() > cur {
			send(FeedItem{Lost: true}) // pruned under the replay
			return
		}
		slices.Reverse(page) // oldest first
		for _, e := range page {
			if e.Seq > upto {
				break
			}
			if !send(FeedItem{Entry: e}) {
				return
			}
		}
		if len(page) < feedReplayPage {
			break
		}
		cur = page[len(page)-1].Seq
	}
	for {
		select {
		case e, ok := <-sub.live:
			if !ok {
				send(FeedItem{Lost: true})
				return
			}
			if !send(FeedItem{Entry: e}) {
				return
			}
		case <-sub.stop:
			return
		}
	}
}
