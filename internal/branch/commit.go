package branch

import (
	"github.com/dshmount/dshmount/internal/journal"

	"context"
	"os"

	"github.com/dshmount/dshmount/internal/provider"
)

// The journal's types, under the names branch callers use.
type (
	// Change is one path of a ChangeSet.
	Change = journal.Change
	// ChangeSet is what one commit applies, all or nothing.
	ChangeSet = journal.ChangeSet
	// AppliedFile is one file a commit changed.
	AppliedFile = journal.AppliedFile
	// Hooks connect a commit to the daemon's bookkeeping.
	Hooks = journal.Hooks
	// ClaimFile is one file a commit may change and the version it expects.
	ClaimFile = journal.ClaimFile
	// ConflictError refuses a commit whose paths the workspace changed.
	ConflictError = journal.ConflictError
)

// Apply commits cs to the workspace through the journal, all or nothing;
// a conflict is a *ConflictError and changes nothing.
func (m *Manager) Apply(ctx context.Context, cs ChangeSet, hooks Hooks) ([]AppliedFile, error) {
	return m.journal.Apply(ctxOrBackground(ctx), cs, hooks)
}

// Commit applies everything branch name changed to the workspace, all or
// nothing (see Apply), on behalf of origin (the change set's Origin, handed
// to hooks). Without keep the branch is removed; with it, it goes on empty
// over the new workspace state.
func (m *Manager) Commit(ctx context.Context, name string, keep bool, origin any, hooks Hooks) ([]AppliedFile, error) {
	ctx = ctxOrBackground(ctx)
	b, err := m.Get(name)
	if err != nil {
		return nil, err
	}
	turn := m.journal.Hold()
	defer turn.Release()
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable("commit", ""); err != nil {
		return nil, err
	}
	if marked := b.markedFiles(); len(marked) > 0 {
		return nil, &MergeConflictError{Branch: name, Paths: marked, Markers: true}
	}
	cs := b.changeSet()
	cs.Origin = origin
	after := journal.After{Branch: name, Keep: keep, Run: func() error {
		if keep {
			return m.reset(b)
		}
		return m.drop(b)
	}}
	return turn.Apply(ctx, cs, hooks, after)
}

// changeSet turns the branch's entries into changes; b.mu is held.
func (b *Branch) changeSet() ChangeSet {
	cs := ChangeSet{Label: "branch " + b.name}
	for _, p := range sortedPaths(b.entries) {
		e := b.entries[p]
		switch e.Kind {
		case kindFile:
			mode := os.FileMode(0)
			if st, err := os.Stat(b.upperPath(p)); err == nil {
				mode = modeBits(st.Mode())
			}
			if e.Base != BaseAbsent && e.Base != BaseDir {
				if v, err := b.upperVersion(p); err == nil && v == e.Base && b.sameModeAsWorkspace(p, mode) {
					continue // written back to what it was
				}
			}
			base := e.Base
			if base == BaseDir {
				cs.Changes = append(cs.Changes, Change{Path: p, Delete: true, Dir: true, Manifest: e.Manifest})
				base = BaseAbsent
			}
			cs.Changes = append(cs.Changes, Change{Path: p, Base: base, Source: b.upperPath(p), Mode: mode})
		case kindDeleted:
			switch e.Base {
			case BaseAbsent:
			case BaseDir:
				cs.Changes = append(cs.Changes, Change{Path: p, Delete: true, Dir: true, Manifest: e.Manifest})
			default:
				cs.Changes = append(cs.Changes, Change{Path: p, Base: e.Base, Delete: true})
			}
		case kindSymlink:
			if e.Base == linkVersion(e.Link) {
				continue
			}
			base := e.Base
			if base == BaseDir {
				cs.Changes = append(cs.Changes, Change{Path: p, Delete: true, Dir: true, Manifest: e.Manifest})
				base = BaseAbsent
			}
			cs.Changes = append(cs.Changes, Change{Path: p, Base: base, Link: e.Link})
		case kindDir:
			switch e.Base {
			case BaseAbsent:
				cs.Changes = append(cs.Changes, Change{Path: p, MakeDir: true, Mode: os.FileMode(e.Mode)})
			case BaseDir: // made again over a deleted directory: its old files go
				m := map[string]provider.Version{}
				for f, v := range e.Manifest {
					if _, own := b.entries[f]; !own {
						m[f] = v
					}
				}
				for f, v := range m {
					cs.Changes = append(cs.Changes, Change{Path: f, Base: v, Delete: true})
				}
			default: // a file replaced by a directory
				cs.Changes = append(cs.Changes, Change{Path: p, Base: e.Base, Delete: true},
					Change{Path: p, MakeDir: true})
			}
		}
	}
	return cs
}

// sameModeAsWorkspace reports whether the workspace file rel has the
// permission bits mode (a chmod in the branch is a change).
func (b *Branch) sameModeAsWorkspace(rel string, mode os.FileMode) bool {
	st, err := os.Stat(b.lower.ProcessPath(b.lower.TargetForRel(rel)))
	return err == nil && modeBits(st.Mode()) == modeBits(mode)
}

// modeBits are the bits of a file's mode a branch keeps and a commit
// applies: permissions, set-user-ID, set-group-ID and sticky.
func modeBits(m os.FileMode) os.FileMode {
	return m & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky)
}
