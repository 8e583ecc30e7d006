package service

import (
	"context"
	"path"

	"github.com/dshmount/dshmount/internal/provider"
)

// listFilter is the one rule every consumer of the change feed (fs.watch,
// fs.changes and so dshmount fsmonitor) applies to a peer served with its
// own credentials: a changed name is shown only when the peer may list
// the directory that holds it. It remembers what it learnt; it is not safe
// for concurrent use (one per watch, one per fs.changes call).
type listFilter struct {
	// run runs fn with the peer's credentials; nil: the peer is served as
	// the daemon and sees every name.
	run      func(fn func()) error
	fs       provider.FileSystem
	listable map[string]bool
	onError  func(dir string, err error)
}

// maxListable bounds the directories a filter remembers as listable or
// not; past it the memory starts over.
const maxListable = 4096

// everyone reports whether the filter shows every name.
func (f *listFilter) everyone() bool { return f == nil || f.run == nil }

// mayList reports whether the peer may list dir, with its credentials.
func (f *listFilter) mayList(ctx context.Context, dir string) bool {
	if f.everyone() {
		return true
	}
	if ok, known := f.listable[dir]; known {
		return ok
	}
	ok := false
	err := f.run(func() {
		t, err := f.fs.Resolve(ctx, dir, provider.ResolveOptions{})
		if err == nil {
			_, err = f.fs.ListDir(ctx, t)
		}
		ok = err == nil
	})
	if err != nil {
		if f.onError != nil {
			f.onError(dir, err)
		}
		ok = false
	}
	if len(f.listable) >= maxListable {
		clear(f.listable)
	}
	f.listable[dir] = ok
	return ok
}

// mayName reports whether the peer may see the workspace-relative name p
// (its directory is listable); "" and "." are always visible.
func (f *listFilter) mayName(ctx context.Context, p string) bool {
	if p == "" || p == "." {
		return true
	}
	return f.mayList(ctx, path.Dir(p))
}

// peerFilter is the filter of a peer with credentials c (nil: served as
// the daemon, every name shown) over fsys. own says whether the calling
// goroutine runs with the daemon's credentials (a watch's delivery) and
// must take the peer's for each check; false: it already runs with them
// (a request handler).
func (s *Service) peerFilter(c *Caller, fsys provider.FileSystem, own bool) *listFilter {
	f := &listFilter{fs: fsys, listable: map[string]bool{}}
	switch {
	case c.runAs == nil:
	case own:
		f.run = c.runAs
	default:
		f.run = func(fn func()) error { fn(); return nil }
	}
	if c.runAs != nil {
		uid := c.peer().UID
		f.onError = func(dir string, err error) {
			s.log.Error("check a peer's permission with its credentials", "uid", uid, "dir", dir, "err", err)
		}
	}
	return f
}
