package journal

import (
	"context"
	"path"
)

// activeCommit is the commit being applied: the workspace paths it
// changes, their parent directories, and a channel closed when it ends.
type activeCommit struct {
	paths map[string]struct{}
	done  chan struct{}
}

// begin publishes the commit of steps as active; the returned function
// ends it. jr.commitMu is held, so at most one is active.
func (jr *Journal) begin(steps []step) func() {
	ac := &activeCommit{paths: make(map[string]struct{}, len(steps)+1), done: make(chan struct{})}
	for _, st := range steps {
		for p := st.Path; ; p = path.Dir(p) {
			if _, seen := ac.paths[p]; seen {
				break
			}
			ac.paths[p] = struct{}{}
			if p == "." || p == "/" {
				break
			}
		}
	}
	jr.active.Store(ac)
	return func() {
		jr.active.Store(nil)
		close(ac.done)
	}
}

// AwaitCommit returns at once unless a commit (or an atomic patch) is
// being applied and changes the workspace-relative path rel, or an entry
// of the directory rel; then it waits for that commit to end, so a reader
// through dshmount sees the workspace entirely before or entirely after
// it, never half of it. It returns ctx's error if ctx ends first.
func (jr *Journal) AwaitCommit(ctx context.Context, rel string) error {
	ac := jr.active.Load()
	if ac == nil {
		return nil
	}
	if rel == "" {
		rel = "."
	}
	if _, ok := ac.paths[rel]; !ok {
		return nil
	}
	select {
	case <-ac.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
