package policy

import (
	"fmt"
	"slices"
	"sort"
)

// "What changed since seq": the request/response form of the change feed,
// for callers that ask now and then (git's fsmonitor hook) instead of
// subscribing.

// ChangesSince is the answer of Store.ChangesSince.
type ChangesSince struct {
	// Upto is the seq the answer covers: every change with since < seq <=
	// Upto is in Entries (unless Vouched is false or Truncated is set).
	// Asking again from Upto gets the later ones.
	Upto uint64
	// Vouched is false when the store cannot list every change after
	// since: since is from before this daemon run, before changes were
	// lost (a watcher overflow), or after the newest change. Entries is
	// then empty.
	Vouched bool
	// Truncated is set when there were more than max changes; Entries then
	// holds the first max.
	Truncated bool
	// Entries are the changes after since, oldest first (refusals left
	// out).
	Entries []AuditEntry
}

// changesPage is how many entries ChangesSince reads at a time.
const changesPage = 1000

// ChangesSince lists the changes after since up to the newest one, at most
// max (0: no bound). It vouches for since exactly as Subscribe does: a
// since from before this run or before the last MarkChangesLost, or after
// the newest change, is not vouched for.
func (s *Store) ChangesSince(since uint64, max int) (ChangesSince, error) {
	if s.closed.Load() {
		return ChangesSince{}, ErrClosed
	}
	base, upto := s.feedWindow()
	out := ChangesSince{Upto: upto}
	if since < base || since > upto {
		return out, nil
	}
	for cur := since; cur < upto; {
		page, err := s.Audit(AuditQuery{Since: cur, Limit: changesPage, Kind: AuditChanges})
		if err != nil {
			return ChangesSince{}, fmt.Errorf("changes since %d: %w", since, err)
		}
		slices.Reverse(page) // oldest first
		for _, e := range page {
			if e.Seq > upto {
				break
			}
			if max > 0 && len(out.Entries) == max {
				out.Truncated = true
				break
			}
			out.Entries = append(out.Entries, e)
		}
		if out.Truncated || len(page) < changesPage {
			break
		}
		cur = page[len(page)-1].Seq
	}
	// Changes lost while the log was read: the answer cannot be vouched
	// for either.
	if base2, _ := s.feedWindow(); base2 != base {
		return ChangesSince{Upto: upto}, nil
	}
	out.Vouched = true
	return out, nil
}

// feedWindow returns the oldest since the feed vouches for and the newest
// seq.
func (s *Store) feedWindow() (base, last uint64) {
	s.feed.mu.Lock()
	defer s.feed.mu.Unlock()
	return s.feed.base, s.auditSeq.last.Load()
}

// ChangesInProgress returns the display paths the daemon is changing right
// now: files open for writing through the mount (their audit entries are
// written when they are flushed) and socket mutations announced but not
// yet committed. A reader of ChangesSince that must not miss a change
// whose bytes are already on disk treats these as changed too.
func (e *Engine) ChangesInProgress() []string {
	o := e.own
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	var out []string
	for p, en := range o.paths {
		if en.held > 0 || en.pending(now) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}
