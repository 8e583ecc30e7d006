package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/overlay"
	"github.com/dshmount/dshmount/policy"
	"github.com/dshmount/dshmount/provider/local"
)

// externalOp maps a tree watcher's kind to the audit's operation.
func externalOp(k local.TreeKind) policy.MutationOp {
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

// watchWorkspace starts the backing-tree watcher: every change made in the
// workspace directory outside the daemon is recorded by the engine (audit
// entry, channel external), whose observers drop the kernel's caches of it.
// Paths below skip (the state directory, when it is inside the workspace)
// and paths the view hides (--hide) are ignored. maxPending bounds the paths
// one window holds before the watcher reports an overflow and rescans (0:
// the default). dropData drops the kernel's pages and attributes of a file
// whose change the daemon counts as its own (see fuse.Server.DropData).
// forget drops the mount's cached directory descriptors when events were
// lost (fuse.Server.ForgetDirs). stopped is called once if the watcher fails for good; the feed's
// subscribers are then told they lost changes, since from then on changes
// made outside the daemon are in no entry.
func watchWorkspace(ctx context.Context, lfs *local.FS, view *overlay.View, engine *policy.Engine, skip string, maxPending int, dropData func(string), forget, stopped func(), log *slog.Logger) (io.Closer, error) {
	skipRel := ""
	if rel, err := filepath.Rel(lfs.Root(), skip); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
		skipRel = filepath.ToSlash(rel)
	}
	ignored := func(p string) bool {
		if skipRel != "" && (p == skipRel || strings.HasPrefix(p, skipRel+"/")) {
			return true
		}
		return view.Access(p) == overlay.Hidden
	}
	deliver := workspaceRecorder(ctx, lfs, engine, ignored, dropData, forget, stopped, log)
	return lfs.WatchTree(ctx, local.TreeWatchOptions{MaxPending: maxPending, FlushOn: control.IsChangesCookie}, deliver)
}

// workspaceRecorder is the watcher's deliver function: it records each
// out-of-band change with the engine, and on a failure of the watcher calls
// stopped and tells the feed that changes are lost.
func workspaceRecorder(ctx context.Context, lfs *local.FS, engine *policy.Engine, ignored func(string) bool, dropData func(string), forget, stopped func(), log *slog.Logger) func([]local.TreeEvent, error) {
	return func(evs []local.TreeEvent, err error) {
		if err != nil {
			log.Error("the workspace watcher stopped; out-of-band changes show after the cache timeouts and are not audited, and git fsmonitor answers rescan-everything: restart the daemon", "err", err)
			if stopped != nil {
				stopped()
			}
			engine.Store().MarkChangesLost()
			return
		}
		for _, ev := range evs {
			if ev.Kind == local.TreeOverflow {
				log.Warn("the workspace watcher lost events (too many changes at once); rescanned the tree")
				engine.Store().MarkChangesLost() // feed subscribers must rescan too
				if forget != nil {
					forget() // a directory moved meanwhile may be in no event
				}
				continue
			}
			if ignored(ev.Path) || (ev.Kind == local.TreeRenamed && ignored(ev.To)) {
				continue
			}
			c := policy.ExternalChange{Op: externalOp(ev.Kind), Target: lfs.TargetForRel(ev.Path), Dir: ev.Dir, Since: ev.Since}
			now := c.Target
			if ev.Kind == local.TreeRenamed {
				to := lfs.TargetForRel(ev.To)
				c.To, now = &to, to
			}
			if ev.Kind != local.TreeDeleted && !ev.Dir {
				// Only a version known without reading: the watcher never
				// hashes files behind the guards' backs.
				c.After, _ = lfs.CachedVersion(now.DisplayPath)
			}
			recorded, rerr := engine.RecordExternal(ctx, c)
			if rerr != nil {
				log.Warn("record out-of-band change", "path", ev.Path, "err", rerr)
			}
			if !recorded && !ev.Dir && (ev.Kind == local.TreeModified || ev.Kind == local.TreeAttrib) && dropData != nil {
				// Counted as the daemon's own (a file the mount holds open
				// for writing, say), but the bytes or attributes may be
				// someone else's: the kernel must not keep its copy.
				dropData(ev.Path)
			}
		}
	}
}
