package branch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// recover finishes or undoes every journal a killed daemon left: forward
// when each path is applied or still at its base, back when one was
// changed while the daemon was down (that change is kept).
func (m *Manager) recover() error {
	names, err := m.journals.list(".json")
	if err != nil {
		return err
	}
	for _, name := range names {
		var j journal
		ok, err := m.journals.get(name, &j)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if err := m.recoverOne(&j); err != nil {
			return fmt.Errorf("journal %s (%s): %w", name, j.Label, err)
		}
	}
	m.removeStrayStaging(names)
	return nil
}

// recoverOne settles one journal.
func (m *Manager) recoverOne(j *journal) error {
	if j.State != stateApplying {
		m.log.Info("commit interrupted while staging; nothing was applied", "commit", j.Label)
		m.noteRecovered(j, false, "it was stopped while staging, before it changed the workspace")
		return m.abandon(j, nil)
	}
	forward := true
	for _, s := range j.Steps {
		cur, err := m.current(context.Background(), s.Path)
		if err != nil {
			return err
		}
		switch s.Op {
		case opWrite:
			// Still staged: the path must hold its base; renamed already:
			// the new bytes. Anything else was changed while down.
			_, serr := os.Lstat(filepath.Join(m.hostPath(j.Staging), s.Staged))
			if pending := serr == nil; pending && cur != s.Base || !pending && cur != s.New {
				forward = false
			}
		case opDelete:
			if cur != BaseAbsent && cur != s.Base {
				forward = false
			}
		}
	}
	if forward {
		m.log.Info("finishing a commit interrupted by a stop", "commit", j.Label)
		for _, s := range j.Steps {
			if err := m.redo(j, s); err != nil {
				m.log.Warn("could not finish the commit; undoing it", "commit", j.Label, "err", err)
				forward = false
				break
			}
		}
	}
	if !forward {
		m.log.Warn("undoing a commit interrupted by a stop (a path it changes was changed meanwhile)", "commit", j.Label)
		if err := m.rollBack(j); err != nil {
			return err
		}
		m.noteRecovered(j, false, "a path it changes was changed while the daemon was down (that change is kept), or finishing it failed")
		if err := m.journals.del(j.ID + ".json"); err != nil {
			return err
		}
		m.removeStaging(j)
		return nil
	}
	if err := syncfs(m.lower.Root()); err != nil {
		return fmt.Errorf("flush the workspace: %w", err)
	}
	if j.Branch != "" {
		if j.Keep {
			if err := resetBranchDir(filepath.Join(m.dir, j.Branch)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		} else if err := m.removeBranchDir(j.Branch); err != nil {
			return err
		}
	}
	if err := m.journals.del(j.ID + ".json"); err != nil {
		return err
	}
	m.noteRecovered(j, true, "")
	m.removeStaging(j)
	return nil
}

// redo does a step of a journal being finished, unless it is done.
func (m *Manager) redo(j *journal, s step) error {
	p := m.hostPath(s.Path)
	switch s.Op {
	case opWrite:
		staged := filepath.Join(m.hostPath(j.Staging), s.Staged)
		if _, err := os.Lstat(staged); errors.Is(err, fs.ErrNotExist) {
			return nil // renamed already
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.Rename(staged, p)
	case opMkdir:
		return mkdirMode(p, s.Mode)
	case opDelete, opRmdir:
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
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
func (m *Manager) rollBack(j *journal) error {
	staging := m.hostPath(j.Staging)
	var errs []error
	for i := len(j.Steps) - 1; i >= 0; i-- {
		s := j.Steps[i]
		p := m.hostPath(s.Path)
		switch s.Op {
		case opWrite:
			cur, err := m.current(context.Background(), s.Path)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if cur != s.New {
				continue
			}
			if _, serr := os.Lstat(filepath.Join(staging, s.Staged)); serr == nil {
				continue // never renamed: the same bytes were already there
			}
			if s.Backup == "" {
				errs = append(errs, ignoreMissing(os.Remove(p)))
				continue
			}
			errs = append(errs, os.Rename(filepath.Join(staging, s.Backup), p))
		case opDelete:
			if _, err := os.Lstat(p); err == nil {
				continue
			}
			b := filepath.Join(staging, s.Backup)
			if _, err := os.Lstat(b); err != nil {
				continue
			}
			_ = os.MkdirAll(filepath.Dir(p), 0o755)
			errs = append(errs, os.Rename(b, p))
		case opRmdir:
			if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				errs = append(errs, err)
			}
		case opMkdir:
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) && !isNotEmpty(err) {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return syncfs(m.lower.Root())
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
func (m *Manager) removeStrayStaging(_ []string) {
	root := m.hostPath(StagingDir)
	des, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, de := range des {
		var j journal
		if ok, _ := m.journals.get(de.Name()+".json", &j); ok {
			continue
		}
		_ = os.RemoveAll(filepath.Join(root, de.Name()))
	}
	_ = os.Remove(root)
}
