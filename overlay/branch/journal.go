package branch

import (
	"fmt"
	"os"

	"github.com/dshmount/dshmount/provider"
)

// Step operations of a journal.
const (
	opWrite  = "write"
	opDelete = "delete"
	opMkdir  = "mkdir"
	opRmdir  = "rmdir"
)

// step is one primitive change of a journaled commit.
type step struct {
	Op     string           `json:"op"`
	Path   string           `json:"path"`
	Base   provider.Version `json:"base,omitempty"`
	New    provider.Version `json:"new,omitempty"`
	Staged string           `json:"staged,omitempty"` // file in the staging dir holding the new content
	Backup string           `json:"backup,omitempty"` // hard link to the replaced or deleted file
	Link   string           `json:"link,omitempty"`   // a write that makes a symbolic link to Link
	Mode   uint32           `json:"mode,omitempty"`   // a made directory's permission bits

	data   []byte
	source string
	mode   os.FileMode
}

// journal is the intent record of one commit, in <state>/branches.journal.
// Its State moves staging → applying → applied; the journal is deleted
// once the branch is reset or removed. What recovery does in each state is
// recoverOne's (recover.go).
type journal struct {
	ID      string `json:"id"`
	Label   string `json:"label"`
	State   string `json:"state"`
	Staging string `json:"staging"`
	Branch  string `json:"branch,omitempty"` // reset (Keep) or removed once applied
	Keep    bool   `json:"keep,omitempty"`
	// Audited (with State applied) says the commit's own files were
	// recorded (Hooks.Applied) before the journal was marked applied.
	Audited bool   `json:"audited,omitempty"`
	Steps   []step `json:"steps"`
}

// Journal states.
const (
	// stateStaging: the intent is recorded; new files and backups are
	// being staged; the workspace is untouched.
	stateStaging = "staging"
	// stateApplying: everything is staged and flushed; the steps are being
	// renamed into place.
	stateApplying = "applying"
	// stateApplied: every step is in place and the workspace flushed; the
	// branch (if any) is not touched before this mark is on disk.
	stateApplied = "applied"
)

// markApplied records, durably, that every step of j is in place.
func (m *Manager) markApplied(j *journal, audited bool) error {
	j.State, j.Audited = stateApplied, audited
	if err := m.journals.put(j.ID+".json", j); err != nil {
		return fmt.Errorf("%s: mark the commit journal applied: %w", j.Label, err)
	}
	return nil
}

// appliedFiles lists the files a finished journal changed.
func appliedFiles(m *Manager, j *journal) []AppliedFile {
	var out []AppliedFile
	for _, s := range j.Steps {
		switch s.Op {
		case opWrite:
			f := AppliedFile{Target: m.lower.TargetForRel(s.Path), After: s.New}
			if s.Base != BaseAbsent && s.Base != BaseDir {
				f.Before = s.Base
			}
			out = append(out, f)
		case opDelete:
			out = append(out, AppliedFile{Target: m.lower.TargetForRel(s.Path), Deleted: true, Before: s.Base})
		}
	}
	return out
}
