package journal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/version"
)

// Change is one path of a ChangeSet.
type Change struct {
	Path string           // workspace-relative
	Base provider.Version // what the workspace must hold now: a version, or BaseAbsent
	// Delete removes the file at Path (Dir: the directory, whose files
	// the workspace must hold exactly as Manifest lists them).
	Delete   bool
	Dir      bool
	Manifest map[string]provider.Version
	// MakeDir makes the directory Path when missing.
	MakeDir bool
	// Data is a write's content; Source, when set, names a host file
	// holding it instead.
	Data   []byte
	Source string
	Mode   os.FileMode // 0: the replaced file's mode, else 0644 (a directory: 0755)
	// Link, when set, makes Path a symbolic link to it (a write).
	Link string
}

// ChangeSet is what one commit applies, all or nothing.
type ChangeSet struct {
	Label   string // for messages ("branch NAME", "atomic patch")
	Changes []Change
	// Origin is who asked for the commit, opaque to the journal: it is
	// handed unchanged to every Hooks function, so one Hooks value serves
	// every commit.
	Origin any
}

// AppliedFile is one file a commit changed.
type AppliedFile struct {
	Target  provider.Target // the workspace target
	Deleted bool
	Before  provider.Version // "" when the file was created
	After   provider.Version // "" when deleted
}

// Hooks connect a commit to the daemon's bookkeeping (the policy engine).
// One value serves every commit: what a commit's hooks need of the request
// (who asked, what for) travels in ChangeSet.Origin, which each function
// receives. Every function may be nil.
type Hooks struct {
	// Announce runs before the commit takes its paths' locks and reads
	// them: the mount's dirty pages are written back, the watcher learns
	// the changes are the daemon's own.
	Announce func(ctx context.Context, origin any, ts []provider.Target)
	// Applied runs once the workspace holds the new state (flushed), with
	// every file changed (audit entries, observations, cache
	// invalidation), before the journal is marked applied and the branch
	// reset: a start after a kill records the files again only when the
	// journal was not marked yet (see Recovered.Audited).
	Applied func(ctx context.Context, origin any, files []AppliedFile)
	// Allow vets every path the commit would change (the view's hide and
	// read-only rules, which may be stricter than when the branch changed
	// it); an error refuses the whole commit.
	Allow func(origin any, rel string) error
	// Claim runs after Announce, before the locks: it claims the files
	// (with the versions the commit expects) on a shared policy store, or
	// refuses the commit. Its release runs when the commit ends, with the
	// files applied (none when it was refused).
	Claim func(ctx context.Context, origin any, files []ClaimFile) (release func([]AppliedFile), err error)
}

// ClaimFile is one file a commit may change and the version it expects.
type ClaimFile struct {
	Target provider.Target
	Base   provider.Version
}

// ConflictError refuses a commit whose paths the workspace changed since
// the branch (or the patch) read them. It is FS_STALE_VERSION.
type ConflictError struct {
	Label string
	Paths []string // sorted
}

// Error says what conflicts and what to do.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s: %s", provider.CodeStaleVersion, e.message())
}

func (e *ConflictError) message() string {
	list := strings.Join(e.Paths, ", ")
	if len(e.Paths) > 10 {
		list = strings.Join(e.Paths[:10], ", ") + fmt.Sprintf(" and %d more", len(e.Paths)-10)
	}
	if strings.HasPrefix(e.Label, "branch ") {
		return fmt.Sprintf("the workspace changed %s since %s started from it; nothing was applied: rebase the branch (branch rebase, or commit with rebase) to merge the workspace's changes into it, then commit again", list, e.Label)
	}
	return fmt.Sprintf("the workspace changed %s since %s started from it; nothing was applied: look at the new workspace content, redo the change there (or discard), then commit again", list, e.Label)
}

// Unwrap makes errors.Is(err, provider.ErrStaleVersion) hold.
func (e *ConflictError) Unwrap() error {
	return &provider.Error{Code: provider.CodeStaleVersion, Op: "commit", Message: e.message()}
}

// After is what a commit of a branch does once the workspace holds it,
// before the journal goes: Run resets (Keep) or removes the branch
// Branch. Recovery does the same through Options.FinishBranch.
type After struct {
	Branch string
	Keep   bool
	Run    func() error
}

// apply runs one journaled commit; jr.commitMu is held.
func (jr *Journal) apply(ctx context.Context, cs ChangeSet, hooks Hooks, after After) (files []AppliedFile, err error) {
	steps, keys, targets := jr.plan(cs)
	if hooks.Allow != nil {
		for _, st := range steps {
			if err := hooks.Allow(cs.Origin, st.Path); err != nil {
				return nil, err
			}
		}
	}
	// Announced before the locks, as a provider mutation does: writing
	// the mount's dirty pages back goes through handlers that take them.
	if hooks.Announce != nil && len(targets) > 0 {
		hooks.Announce(ctx, cs.Origin, targets)
	}
	if hooks.Claim != nil && len(targets) > 0 {
		release, err := hooks.Claim(ctx, cs.Origin, claimFiles(steps, targets))
		if err != nil {
			return nil, err
		}
		defer func() { release(files) }()
	}
	unlock, err := jr.ws.Lock(ctx, keys...)
	if err != nil {
		return nil, err
	}
	defer unlock()
	steps, conflicts, err := jr.check(ctx, cs, steps)
	if err != nil {
		return nil, err
	}
	if len(conflicts) > 0 {
		return nil, &ConflictError{Label: cs.Label, Paths: conflicts}
	}
	if len(steps) == 0 {
		if after.Run != nil {
			return nil, after.Run()
		}
		return nil, nil
	}
	defer jr.begin(steps)()
	id := newID()
	j := intent{ID: id, Label: cs.Label, State: stateStaging, Staging: StagingDir + "/" + id,
		Branch: after.Branch, Keep: after.Keep, Steps: steps}
	if err := jr.dir.Put(id+".json", j); err != nil {
		return nil, fmt.Errorf("%s: write the commit journal: %w", cs.Label, err)
	}
	return jr.stageAndApply(ctx, &j, cs.Origin, hooks.Applied, after)
}

// claimFiles pairs each target with the base its steps expect.
func claimFiles(steps []step, targets []provider.Target) []ClaimFile {
	bases := map[string]provider.Version{}
	for _, st := range steps {
		if st.Op == opWrite || st.Op == opDelete {
			bases[st.Path] = st.Base
		}
	}
	out := make([]ClaimFile, len(targets))
	for i, t := range targets {
		out[i] = ClaimFile{Target: t, Base: bases[t.DisplayPath]}
	}
	return out
}

// plan turns changes into journal steps (without the bases of directory
// deletes' files, known after the walk) and returns the lock keys, sorted,
// and the targets of every file it may change.
func (jr *Journal) plan(cs ChangeSet) ([]step, []provider.Key, []provider.Target) {
	var steps []step
	seen := map[string]bool{}
	var targets []provider.Target
	addTarget := func(p string) {
		if !seen[p] {
			seen[p] = true
			targets = append(targets, jr.ws.TargetForRel(p))
		}
	}
	for _, c := range cs.Changes {
		switch {
		case c.Delete && c.Dir:
			ps := make([]string, 0, len(c.Manifest))
			for p := range c.Manifest {
				ps = append(ps, p)
			}
			sort.Strings(ps)
			for _, p := range ps {
				steps = append(steps, step{Op: opDelete, Path: p, Base: c.Manifest[p]})
				addTarget(p)
			}
			steps = append(steps, step{Op: opRmdir, Path: c.Path})
		case c.Delete:
			steps = append(steps, step{Op: opDelete, Path: c.Path, Base: c.Base})
			addTarget(c.Path)
		case c.MakeDir:
			steps = append(steps, step{Op: opMkdir, Path: c.Path, Mode: uint32(c.Mode.Perm())})
		default:
			steps = append(steps, step{Op: opWrite, Path: c.Path, Base: c.Base, data: c.Data, source: c.Source, mode: c.Mode, Link: c.Link})
			addTarget(c.Path)
		}
	}
	keys := make([]provider.Key, 0, len(targets))
	for _, t := range targets {
		keys = append(keys, t.Key)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return steps, keys, targets
}

// Current is the workspace's state of rel: its version, BaseAbsent, or
// BaseDir.
func (jr *Journal) Current(ctx context.Context, rel string) (provider.Version, error) {
	if mode, err := jr.fence.Lstat(rel); err == nil && mode&os.ModeSymlink != 0 {
		target, err := jr.fence.Readlink(rel)
		if err != nil {
			return "", err
		}
		return LinkVersion(target), nil
	}
	info, err := jr.ws.Stat(ctx, jr.ws.TargetForRel(rel))
	if provider.CodeOf(err) == provider.CodeNotFound || provider.CodeOf(err) == provider.CodeNotDirectory {
		return BaseAbsent, nil
	}
	if err != nil {
		return "", err
	}
	switch {
	case info == nil:
		return BaseAbsent, nil
	case info.Type == provider.TypeDirectory:
		return BaseDir, nil
	case info.Type != provider.TypeFile:
		return "other:" + info.Version, nil
	}
	return info.Version, nil
}

// check compares every step's base with the workspace (locks held),
// expands directory deletes, loads the new contents and orders the steps:
// file deletes, directory removals (deepest first), directory creations
// (shallowest first, parents of new files included), writes. It returns
// the conflicting paths.
func (jr *Journal) check(ctx context.Context, cs ChangeSet, steps []step) ([]step, []string, error) {
	conflict := map[string]bool{}
	var deletes, rmdirs, mkdirs, writes []step
	deleting := map[string]bool{}
	for _, s := range steps {
		if s.Op == opDelete {
			deleting[s.Path] = true
		}
	}
	made := map[string]bool{}
	modes := map[string]uint32{}
	for _, s := range steps {
		if s.Op == opMkdir {
			modes[s.Path] = s.Mode
		}
	}
	mkdir := func(p string) error {
		if made[p] {
			return nil
		}
		cur, err := jr.Current(ctx, p)
		if err != nil {
			return err
		}
		switch cur {
		case BaseDir:
			if !removing(rmdirs, p) {
				return nil
			}
		case BaseAbsent:
		default:
			if !deleting[p] {
				conflict[p] = true
				return nil
			}
		}
		made[p] = true
		mkdirs = append(mkdirs, step{Op: opMkdir, Path: p, Mode: modes[p]})
		return nil
	}
	for _, s := range steps {
		if s.Op != opRmdir {
			continue
		}
		cur, err := jr.Current(ctx, s.Path)
		if err != nil {
			return nil, nil, err
		}
		if cur != BaseDir {
			if cur != BaseAbsent {
				conflict[s.Path] = true
			}
			continue
		}
		dirs, files, err := jr.walk(s.Path)
		if err != nil {
			return nil, nil, err
		}
		for _, f := range files {
			if !deleting[f] {
				conflict[f] = true // gained under a directory the branch deleted
			}
		}
		for i := len(dirs) - 1; i >= 0; i-- {
			rmdirs = append(rmdirs, step{Op: opRmdir, Path: dirs[i]})
		}
	}
	for _, s := range steps {
		switch s.Op {
		case opDelete:
			cur, err := jr.Current(ctx, s.Path)
			if err != nil {
				return nil, nil, err
			}
			if cur != s.Base {
				conflict[s.Path] = true
			}
			deletes = append(deletes, s)
		case opWrite:
			cur, err := jr.Current(ctx, s.Path)
			if err != nil {
				return nil, nil, err
			}
			if cur != s.Base && !(cur == BaseDir && removing(rmdirs, s.Path)) && !(s.Base == BaseAbsent && deleting[s.Path]) {
				conflict[s.Path] = true
			}
			if d := path.Dir(s.Path); d != "." {
				if err := mkdirParents(d, mkdir); err != nil {
					return nil, nil, err
				}
			}
			switch {
			case s.Link != "":
				s.New = LinkVersion(s.Link)
			case s.source != "":
				data, err := os.ReadFile(s.source)
				if err != nil {
					return nil, nil, fmt.Errorf("%s: read %s: %w", cs.Label, s.Path, err)
				}
				s.data = data
			}
			if s.Link == "" {
				s.New = version.OfBytes(s.data)
			}
			writes = append(writes, s)
		case opMkdir:
			if err := mkdirParents(s.Path, mkdir); err != nil {
				return nil, nil, err
			}
		}
	}
	if len(conflict) > 0 {
		out := make([]string, 0, len(conflict))
		for p := range conflict {
			out = append(out, p)
		}
		sort.Strings(out)
		return nil, out, nil
	}
	sort.SliceStable(mkdirs, func(i, j int) bool { return depth(mkdirs[i].Path) < depth(mkdirs[j].Path) })
	sort.SliceStable(rmdirs, func(i, j int) bool { return depth(rmdirs[i].Path) > depth(rmdirs[j].Path) })
	out := append(append(append(deletes, rmdirs...), mkdirs...), writes...)
	return out, nil, nil
}

// mkdirParents calls mkdir for dir and each missing ancestor, shallowest
// first.
func mkdirParents(dir string, mkdir func(string) error) error {
	var chain []string
	for d := dir; d != "." && d != "/"; d = path.Dir(d) {
		chain = append(chain, d)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		if err := mkdir(chain[i]); err != nil {
			return err
		}
	}
	return nil
}

// removing reports whether rmdirs removes p.
func removing(rmdirs []step, p string) bool {
	for _, s := range rmdirs {
		if s.Path == p {
			return true
		}
	}
	return false
}

// depth counts a path's segments.
func depth(p string) int { return strings.Count(p, "/") }

// walk lists the directories (dir first, parents before children) and the
// files below dir in the workspace, through no symbolic link.
func (jr *Journal) walk(dir string) (dirs, files []string, err error) {
	dirs = append(dirs, dir)
	names, err := jr.fence.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("walk %s: %w", dir, err)
	}
	sort.Strings(names)
	for _, name := range names {
		rel := path.Join(dir, name)
		mode, err := jr.fence.Lstat(rel)
		if err != nil {
			return nil, nil, fmt.Errorf("walk %s: %w", dir, err)
		}
		if !mode.IsDir() {
			files = append(files, rel)
			continue
		}
		subDirs, subFiles, err := jr.walk(rel)
		if err != nil {
			return nil, nil, err
		}
		dirs, files = append(dirs, subDirs...), append(files, subFiles...)
	}
	return dirs, files, nil
}

// stepHook runs the test hook of step n.
func (jr *Journal) stepHook(n int) error {
	if jr.stepHookFn != nil {
		return jr.stepHookFn(n)
	}
	return nil
}

// stageAndApply stages the new files and backups, marks the journal
// applying, renames everything into place, flushes the workspace, records
// the files (applied), marks the journal applied, and only then resets or
// removes the branch and deletes the journal: a kill before the applied
// mark leaves the branch as it was, one after it a commit the next start
// finishes. Steps are counted for the test hook: 0 after the intent
// record, then one per staged file, one after the applying mark, one per
// applied step, one after the applied mark, one after the branch's reset,
// one after the journal's removal.
func (jr *Journal) stageAndApply(ctx context.Context, j *intent, origin any, applied func(context.Context, any, []AppliedFile), after After) ([]AppliedFile, error) {
	n := 0
	hook := func() error {
		err := jr.stepHook(n)
		n++
		return err
	}
	if err := hook(); err != nil {
		return nil, err
	}
	staging := j.Staging
	if err := jr.fence.MkdirAll(staging); err != nil {
		return nil, jr.abandon(j, fmt.Errorf("%s: create the staging directory: %w", j.Label, err))
	}
	for i := range j.Steps {
		s := &j.Steps[i]
		switch s.Op {
		case opWrite:
			s.Staged = fmt.Sprintf("n%d", i)
			mode := s.mode
			if mode == 0 {
				mode = 0o644
				if st, err := jr.fence.Lstat(s.Path); err == nil && s.Base != BaseAbsent {
					mode = st.Perm()
				}
			}
			if s.Link != "" {
				if err := jr.fence.Symlink(s.Link, path.Join(staging, s.Staged)); err != nil {
					return nil, jr.abandon(j, fmt.Errorf("%s: stage %s: %w", j.Label, s.Path, err))
				}
			} else {
				if err := jr.fence.WriteFile(path.Join(staging, s.Staged), s.data, mode); err != nil {
					return nil, jr.abandon(j, fmt.Errorf("%s: stage %s: %w", j.Label, s.Path, err))
				}
			}
			if s.Base != BaseAbsent && s.Base != BaseDir {
				s.Backup = fmt.Sprintf("b%d", i)
			}
		case opDelete:
			s.Backup = fmt.Sprintf("b%d", i)
		}
		if s.Backup != "" {
			if err := jr.fence.Link(s.Path, path.Join(staging, s.Backup)); err != nil {
				return nil, jr.abandon(j, fmt.Errorf("%s: keep the old %s: %w", j.Label, s.Path, err))
			}
		}
		if s.Op == opWrite || s.Op == opDelete {
			if err := hook(); err != nil {
				return nil, err
			}
		}
	}
	if err := jr.fence.Sync(); err != nil {
		return nil, jr.abandon(j, fmt.Errorf("%s: flush the staged files: %w", j.Label, err))
	}
	j.State = stateApplying
	if err := jr.dir.Put(j.ID+".json", j); err != nil {
		return nil, jr.abandon(j, fmt.Errorf("%s: mark the commit journal: %w", j.Label, err))
	}
	if err := hook(); err != nil {
		return nil, err
	}
	for _, s := range j.Steps {
		if err := jr.applyStep(j, s); err != nil {
			// Undo what was done; the journal says how.
			if rerr := jr.rollBack(j); rerr != nil {
				return nil, fmt.Errorf("%s: %w (undoing it failed too: %v; the journal in %s is kept for the next start)", j.Label, err, rerr, jr.dir.Path)
			}
			return nil, err
		}
		if err := hook(); err != nil {
			return nil, err
		}
	}
	if err := jr.fence.Sync(); err != nil {
		return nil, fmt.Errorf("%s: flush the workspace: %w", j.Label, err)
	}
	files := appliedFiles(jr, j)
	// Recorded before the applied mark: a kill in between leaves an
	// applying journal the next start settles and records again (a
	// duplicate at worst), never a commit no one recorded.
	if applied != nil {
		applied(ctx, origin, files)
	}
	if err := jr.markApplied(j, applied != nil); err != nil {
		return nil, fmt.Errorf("%w (the workspace holds the commit; the next start finishes it)", err)
	}
	if err := hook(); err != nil {
		return nil, err
	}
	if after.Run != nil {
		if err := after.Run(); err != nil {
			return nil, fmt.Errorf("%s: applied, but the branch could not be reset: %w (the next start finishes it)", j.Label, err)
		}
	}
	if err := hook(); err != nil {
		return nil, err
	}
	if err := jr.dir.Del(j.ID + ".json"); err != nil {
		return nil, fmt.Errorf("%s: applied, but the journal could not be removed: %w", j.Label, err)
	}
	if err := hook(); err != nil {
		return nil, err
	}
	jr.removeStaging(j)
	return files, nil
}

// applyStep does one step.
func (jr *Journal) applyStep(j *intent, s step) error {
	var err error
	switch s.Op {
	case opWrite:
		err = jr.fence.Rename(path.Join(j.Staging, s.Staged), s.Path)
	case opDelete, opRmdir:
		err = jr.fence.Remove(s.Path)
	case opMkdir:
		err = jr.mkdirMode(s.Path, s.Mode)
	}
	if err != nil {
		return fmt.Errorf("%s: %s %s: %w", j.Label, s.Op, s.Path, err)
	}
	return nil
}

// abandon removes the journal and staging of a commit that changed nothing
// in the workspace yet, and returns err.
func (jr *Journal) abandon(j *intent, err error) error {
	jr.removeStaging(j)
	if derr := jr.dir.Del(j.ID + ".json"); derr != nil {
		return fmt.Errorf("%w (and its journal stays: %v)", err, derr)
	}
	return err
}

// removeStaging deletes a commit's staging directory (and the staging root
// when empty).
func (jr *Journal) removeStaging(j *intent) {
	_ = jr.fence.RemoveAll(j.Staging)
	_ = jr.fence.Remove(StagingDir)
}

// mkdirMode makes the workspace directory rel (an existing one is fine)
// with the permission bits mode (0: 0755).
func (jr *Journal) mkdirMode(rel string, mode uint32) error {
	perm := os.FileMode(0o755)
	if mode != 0 {
		perm = os.FileMode(mode).Perm()
	}
	err := jr.fence.Mkdir(rel, perm)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	return err
}
