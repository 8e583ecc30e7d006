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
// the default).
func watchWorkspace(ctx context.Context, lfs *local.FS, view *overlay.View, engine *policy.Engine, skip string, maxPending int, log *slog.Logger) (io.Closer, error) {
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
	return lfs.WatchTree(ctx, local.TreeWatchOptions{MaxPending: maxPending, FlushOn: control.IsChangesCookie}, func(evs []local.TreeEvent, err error) {
		if err != nil {
			log.Error("the workspace watcher stopped; out-of-band changes show after the cache timeouts and are not audited", "err", err)
			return
		}
		for _, ev := range evs {
			if ev.Kind == local.TreeOverflow {
				log.Warn("the workspace watcher lost events (too many changes at once); rescanned the tree")
				engine.Store().MarkChangesLost() // feed subscribers must rescan too
				continue
			}
			if ignored(ev.Path) || (ev.Kind == local.TreeRenamed && ignored(ev.To)) {
				continue
			}
			c := policy.ExternalChange{Op: externalOp(ev.Kind), Target: lfs.TargetForRel(ev.Path), Dir: ev.Dir}
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
			if _, rerr := engine.RecordExternal(ctx, c); rerr != nil {
				log.Warn("record out-of-band change", "path", ev.Path, "err", rerr)
			}
		}
	})
}
