package journal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/dshmount/dshmount/internal/provider"
)

// Recover finishes or undoes every commit a killed daemon left (see
// recoverOne); TakeRecovered returns what it did.
func (jr *Journal) Recover() error {
	names, err := jr.dir.List(".json")
	if err != nil {
		return err
	}
	for _, name := range names {
		var j intent
		ok, err := jr.dir.Get(name, &j)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if err := jr.recoverOne(&j); err != nil {
			return fmt.Errorf("journal %s (%s): %w", name, j.Label, err)
		}
	}
	jr.removeStrayStaging(names)
	return nil
}

// recoverOne settles one journal, by its state:
//
//   - staging: nothing was applied; the staging goes, the branch stays.
//   - applying: forward when every path holds its base (still staged) or
//     the new content (renamed), else back (a path was changed while the
//     daemon was down; that change is kept). The branch was not touched
//     before the applied mark, so an undone commit leaves it as it was.
//   - applied: every step is in place; forward whatever changed while the
//     daemon was down (a later change on top, reported as out of band).
//
// Forward ends by resetting or removing the branch and deleting the
// journal, as the commit would have.
func (jr *Journal) recoverOne(j *intent) error {
	switch j.State {
	case stateApplied:
		jr.log.Info("finishing a commit applied before a stop", "commit", j.Label)
		return jr.finish(j)
	case stateApplying:
	default:
		jr.log.Info("commit interrupted while staging; nothing was applied", "commit", j.Label)
		jr.noteRecovered(j, "it was stopped while staging, before it changed the workspace", nil)
		return jr.abandon(j, nil)
	}
	changed, err := jr.changedWhileDown(j)
	if err != nil {
		return err
	}
	reason := ""
	if len(changed) > 0 {
		reason = fmt.Sprintf("%s changed while the daemon was down (that change is kept)", listPaths(changed))
	} else {
		jr.log.Info("finishing a commit interrupted by a stop", "commit", j.Label)
		for _, s := range j.Steps {
			if err := jr.redo(j, s); err != nil {
				jr.log.Warn("could not finish the commit; undoing it", "commit", j.Label, "err", err)
				reason = fmt.Sprintf("finishing it failed: %v", err)
				break
			}
		}
	}
	if reason != "" {
		jr.log.Warn("undoing a commit interrupted by a stop; the workspace is as before it and the branch as it was",
			"commit", j.Label, "why", reason)
		if err := jr.rollBack(j); err != nil {
			return err
		}
		jr.noteRecovered(j, reason, nil)
		if err := jr.dir.Del(j.ID + ".json"); err != nil {
			return err
		}
		jr.removeStaging(j)
		return nil
	}
	if err := jr.fence.Sync(); err != nil {
		return fmt.Errorf("flush the workspace: %w", err)
	}
	if err := jr.markApplied(j, false); err != nil {
		return err
	}
	return jr.finish(j)
}

// changedWhileDown lists the paths of an applying journal that hold
// neither their base (a step still staged) nor the new content (a step
// renamed in).
func (jr *Journal) changedWhileDown(j *intent) ([]string, error) {
	var changed []string
	for _, s := range j.Steps {
		cur, err := jr.Current(context.Background(), s.Path)
		if err != nil {
			return nil, err
		}
		switch s.Op {
		case opWrite:
			_, serr := jr.fence.Lstat(path.Join(j.Staging, s.Staged))
			if pending := serr == nil; pending && cur != s.Base || !pending && cur != s.New {
				changed = append(changed, s.Path)
			}
		case opDelete:
			if cur != BaseAbsent && cur != s.Base {
				changed = append(changed, s.Path)
			}
		}
	}
	return changed, nil
}

// finish settles an applied journal: the changes made on top of it while
// the daemon was down are noted, the branch is reset or removed, the
// journal deleted.
func (jr *Journal) finish(j *intent) error {
	later, err := jr.changedOnTop(j)
	if err != nil {
		return err
	}
	if j.Branch != "" {
		if err := jr.finishBranch(j.Branch, j.Keep); err != nil {
			return fmt.Errorf("finish branch %s: %w", j.Branch, err)
		}
	}
	if err := jr.dir.Del(j.ID + ".json"); err != nil {
		return err
	}
	jr.noteRecovered(j, "", later)
	jr.removeStaging(j)
	return nil
}

// changedOnTop lists what differs from an applied journal's result: a
// written path that holds other content, a deleted one that exists again,
// a file in a directory the commit made or removed that the commit did not
// write. Each is a change made after the commit, while the daemon was
// down.
func (jr *Journal) changedOnTop(j *intent) ([]AppliedFile, error) {
	var out []AppliedFile
	written := map[string]bool{}
	for _, s := range j.Steps {
		if s.Op == opWrite {
			written[s.Path] = true
		}
	}
	note := func(rel string, want, cur provider.Version) {
		f := AppliedFile{Target: jr.ws.TargetForRel(rel), Before: want, After: cur}
		if want == BaseAbsent {
			f.Before = ""
		}
		if cur == BaseAbsent || cur == BaseDir {
			f.After, f.Deleted = "", true // gone, or now a directory
		}
		out = append(out, f)
	}
	seen := map[string]bool{}
	for _, s := range j.Steps {
		switch s.Op {
		case opWrite, opDelete:
			want := s.New
			if s.Op == opDelete {
				want = BaseAbsent
			}
			cur, err := jr.Current(context.Background(), s.Path)
			if err != nil {
				return nil, err
			}
			if cur != want {
				note(s.Path, want, cur)
			}
		case opMkdir, opRmdir:
			if cur, err := jr.Current(context.Background(), s.Path); err != nil || cur != BaseDir {
				continue
			}
			_, files, err := jr.walk(s.Path)
			if err != nil {
				return nil, err
			}
			for _, f := range files {
				if written[f] || seen[f] || strings.HasPrefix(f, StagingDir+"/") {
					continue
				}
				seen[f] = true
				cur, err := jr.Current(context.Background(), f)
				if err != nil {
					return nil, err
				}
				note(f, BaseAbsent, cur)
			}
		}
	}
	return out, nil
}

// listPaths names up to ten paths.
func listPaths(ps []string) string {
	if len(ps) > 10 {
		return strings.Join(ps[:10], ", ") + fmt.Sprintf(" and %d more", len(ps)-10)
	}
	return strings.Join(ps, ", ")
}

// redo does a step of a journal being finished, unless it is done.
func (jr *Journal) redo(j *intent, s step) error {
	switch s.Op {
	case opWrite:
		staged := path.Join(j.Staging, s.Staged)
		if _, err := jr.fence.Lstat(staged); errors.Is(err, fs.ErrNotExist) {
			return nil // renamed already
		}
		if err := jr.fence.MkdirAll(path.Dir(s.Path)); err != nil {
			return err
		}
		return jr.fence.Rename(staged, s.Path)
	case opMkdir:
		return jr.mkdirMode(s.Path, s.Mode)
	case opDelete, opRmdir:
		if err := jr.fence.Remove(s.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// rollBack undoes, in reverse order, the steps of j that are done: a
// written file gets its backup back (or goes, when it was created), a
// deleted one its backup, a removed directory is made again, a made one
// removed when empty. A path that holds neither the commit's content nor
// its base was changed by someone else and is left alone.
func (jr *Journal) rollBack(j *intent) error {
	staging := j.Staging
	var errs []error
	for i := len(j.Steps) - 1; i >= 0; i-- {
		s := j.Steps[i]
		p := s.Path
		switch s.Op {
		case opWrite:
			cur, err := jr.Current(context.Background(), s.Path)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if cur != s.New {
				continue
			}
			if _, serr := jr.fence.Lstat(path.Join(staging, s.Staged)); serr == nil {
				continue // never renamed: the same bytes were already there
			}
			if s.Backup == "" {
				errs = append(errs, ignoreMissing(jr.fence.Remove(p)))
				continue
			}
			errs = append(errs, jr.fence.Rename(path.Join(staging, s.Backup), p))
		case opDelete:
			if _, err := jr.fence.Lstat(p); err == nil {
				continue
			}
			b := path.Join(staging, s.Backup)
			if _, err := jr.fence.Lstat(b); err != nil {
				continue
			}
			_ = jr.fence.MkdirAll(path.Dir(p))
			errs = append(errs, jr.fence.Rename(b, p))
		case opRmdir:
			if err := jr.fence.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				errs = append(errs, err)
			}
		case opMkdir:
			if err := jr.fence.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) && !isNotEmpty(err) {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return jr.fence.Sync()
}

// ignoreMissing drops a not-exist error.
func ignoreMissing(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// isNotEmpty reports ENOTEMPTY/EEXIST from rmdir.
func isNotEmpty(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "not empty") || errors.Is(err, fs.ErrExist))
}

// removeStrayStaging removes staging directories no journal names (a kill
// after the journal went, before its staging did).
func (jr *Journal) removeStrayStaging(_ []string) {
	names, err := jr.fence.ReadDir(StagingDir)
	if err != nil {
		return
	}
	for _, name := range names {
		var j intent
		if ok, _ := jr.dir.Get(name+".json", &j); ok {
			continue
		}
		_ = jr.fence.RemoveAll(path.Join(StagingDir, name))
	}
	_ = jr.fence.Remove(StagingDir)
}
