// Package watcher records the changes made in the workspace directory
// outside the daemon: provider/local's tree watcher reports them, a
// Recorder turns each into the engine's out-of-band record (audit entry,
// channel external, change feed) and tells the mounts to drop what the
// kernel cached of it. It knows nothing of the transports: the mount's
// cache drops and the daemon's bookkeeping come in as functions.
package watcher

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider/local"
	"github.com/dshmount/dshmount/internal/viewrules"
)

// Recorder records the watcher's events with the engine.
type Recorder struct {
	// FS is the workspace backend the events are about.
	FS *local.FS
	// Engine records each change.
	Engine *policy.Engine
	// Ignored reports a path whose changes are not recorded (the state
	// directory inside the workspace, paths the view hides); nil: none.
	Ignored func(rel string) bool
	// DropData drops the kernel's pages and attributes of a file whose
	// change the daemon counts as its own (fuse.Server.DropData); nil:
	// nothing to drop.
	DropData func(rel string)
	// Forget drops the mounts' cached directory descriptors when events
	// were lost (fuse.Server.ForgetDirs); nil: none.
	Forget func()
	// Stopped is called once if the watcher fails for good; nil: none.
	Stopped func()
	// Log receives the watcher's warnings (default slog.Default()).
	Log *slog.Logger
}

// Options configure Start.
type Options struct {
	// MaxPending bounds the paths one window holds before the watcher
	// reports an overflow and rescans (0: the default).
	MaxPending int
	// FlushOn names files whose event flushes the window at once (the
	// change feed's cookie files).
	FlushOn func(name string) bool
}

// Start watches the workspace and records what changes in it outside the
// daemon until ctx ends or the returned Closer is closed.
func Start(ctx context.Context, r *Recorder, opts Options) (io.Closer, error) {
	return r.FS.WatchTree(ctx, local.TreeWatchOptions{MaxPending: opts.MaxPending, FlushOn: opts.FlushOn},
		func(evs []local.TreeEvent, err error) { r.Deliver(ctx, evs, err) })
}

// Ignore returns the Ignored function of a workspace at root whose state
// directory is stateDir (skipped when it is inside the workspace) and
// whose view is view (its hidden paths are skipped; nil: none).
func Ignore(root, stateDir string, view *viewrules.View) func(string) bool {
	skip := ""
	if rel, err := filepath.Rel(root, stateDir); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
		skip = filepath.ToSlash(rel)
	}
	return func(p string) bool {
		if skip != "" && (p == skip || strings.HasPrefix(p, skip+"/")) {
			return true
		}
		return view != nil && view.Access(p) == viewrules.Hidden
	}
}

// Deliver records one window of events, or the watcher's failure: then
// Stopped is called and the feed told that changes are lost, since from
// now on changes made outside the daemon are in no entry.
func (r *Recorder) Deliver(ctx context.Context, evs []local.TreeEvent, err error) {
	log := r.Log
	if log == nil {
		log = slog.Default()
	}
	if err != nil {
		log.Error("the workspace watcher stopped; out-of-band changes show after the cache timeouts and are not audited, and git fsmonitor answers rescan-everything: restart the daemon", "err", err)
		if r.Stopped != nil {
			r.Stopped()
		}
		r.Engine.Store().MarkChangesLost()
		return
	}
	for _, ev := range evs {
		if ev.Kind == local.TreeOverflow {
			log.Warn("the workspace watcher lost events (too many changes at once); rescanned the tree")
			r.Engine.Store().MarkChangesLost() // feed subscribers must rescan too
			if r.Forget != nil {
				r.Forget() // a directory moved meanwhile may be in no event
			}
			continue
		}
		if r.ignored(ev.Path) || (ev.Kind == local.TreeRenamed && r.ignored(ev.To)) {
			continue
		}
		r.record(ctx, ev, log)
	}
}

// ignored applies Ignored.
func (r *Recorder) ignored(p string) bool { return r.Ignored != nil && r.Ignored(p) }

// record records one change.
func (r *Recorder) record(ctx context.Context, ev local.TreeEvent, log *slog.Logger) {
	c := policy.ExternalChange{Op: Operation(ev.Kind), Target: r.FS.TargetForRel(ev.Path), Dir: ev.Dir, Since: ev.Since}
	now := c.Target
	if ev.Kind == local.TreeRenamed {
		to := r.FS.TargetForRel(ev.To)
		c.To, now = &to, to
	}
	if ev.Kind != local.TreeDeleted && !ev.Dir {
		// Only a version known without reading: the watcher never hashes
		// files behind the guards' backs.
		c.After, _ = r.FS.CachedVersion(now.DisplayPath)
	}
	recorded, err := r.Engine.RecordExternal(ctx, c)
	if err != nil {
		log.Warn("record out-of-band change", "path", ev.Path, "err", err)
	}
	if !recorded && !ev.Dir && (ev.Kind == local.TreeModified || ev.Kind == local.TreeAttrib) && r.DropData != nil {
		// Counted as the daemon's own (a file the mount holds open for
		// writing, say), but the bytes or attributes may be someone
		// else's: the kernel must not keep its copy.
		r.DropData(ev.Path)
	}
}

// Operation maps a tree watcher's kind to the audit's operation.
func Operation(k local.TreeKind) policy.MutationOp {
	switch k {
	case local.TreeCreated:
		return policy.OpCreate
	case local.TreeAttrib:
		return policy.OpSetattr
	case local.TreeDeleted:
		return policy.OpDelete
	case local.TreeRenamed:
		return policy.OpRename
	default:
		return policy.OpWrite
	}
}
