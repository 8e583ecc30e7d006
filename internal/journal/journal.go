// Package journal applies a set of workspace changes all or nothing, a
// kill -9 included: it records the intent, stages the new files and
// backups beside the workspace, renames them into place, and on the next
// start finishes or undoes whatever a killed daemon left (recover.go).
// Branch commits and atomic patches both go through it. Every change to
// the workspace goes through internal/beneath's primitives: beneath
// the root, no symbolic link followed. It knows nothing of branches (a
// committed branch is reset or removed through Options.FinishBranch) nor
// of the guard (the caller's Hooks check, claim and record).
package journal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"github.com/dshmount/dshmount/internal/beneath"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/records"
)

// Base versions with a meaning of their own.
const (
	// BaseAbsent is the base of a path the workspace does not have.
	BaseAbsent provider.Version = "absent"
	// BaseDir is the base of a path that is a directory in the workspace.
	BaseDir provider.Version = "dir"
)

// StagingDir is the directory, in the workspace root, where a commit
// stages its files; the daemon's view hides it.
const StagingDir = ".dshmount-staging"

// LinkVersion is the version of a symbolic link to target.
func LinkVersion(target string) provider.Version { return provider.Version("link:" + target) }

// Workspace is what the journal needs of the workspace's backend.
type Workspace interface {
	// Stat returns a target's type and version.
	Stat(ctx context.Context, t provider.Target) (*provider.Info, error)
	// TargetForRel is the target of a clean workspace-relative path.
	TargetForRel(rel string) provider.Target
	// Lock takes the per-target mutation locks of keys (distinct, in the
	// order given).
	Lock(ctx context.Context, keys ...provider.Key) (func(), error)
	// Beneath gives the primitive changes on workspace-relative paths.
	Beneath() *beneath.Root
}

// Options configure a Journal.
type Options struct {
	// Dir holds the journals (one JSON record per commit in flight).
	Dir string
	// Logger receives recovery messages (default slog.Default()).
	Logger *slog.Logger
	// FinishBranch resets (keep) or removes the branch a commit came
	// from, once the workspace holds the commit; recovery calls it for a
	// commit a killed daemon left applied.
	FinishBranch func(branch string, keep bool) error
	// StepHook, for crash tests, runs before each numbered step of a
	// commit's staging and application; an error stops the commit there,
	// leaving the disk as a kill -9 at that point would.
	StepHook func(n int) error
}

// Journal applies change sets to one workspace, one at a time.
type Journal struct {
	ws           Workspace
	fence        *beneath.Root
	dir          records.Dir
	log          *slog.Logger
	finishBranch func(branch string, keep bool) error
	stepHookFn   func(n int) error

	commitMu sync.Mutex                   // one commit at a time
	active   atomic.Pointer[activeCommit] // the commit being applied, if any

	mu        sync.Mutex
	recovered []Recovered // commits Recover settled (TakeRecovered)
}

// Open returns the journal of ws kept in opts.Dir; call Recover before
// the first commit.
func Open(ws Workspace, opts Options) (*Journal, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.FinishBranch == nil {
		opts.FinishBranch = func(string, bool) error { return nil }
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("journal: create %s: %w", opts.Dir, err)
	}
	return &Journal{ws: ws, fence: ws.Beneath(), dir: records.Dir{Path: opts.Dir}, log: opts.Logger,
		finishBranch: opts.FinishBranch, stepHookFn: opts.StepHook}, nil
}

// Apply commits cs to the workspace, all or nothing; a conflict is a
// *ConflictError and changes nothing.
func (jr *Journal) Apply(ctx context.Context, cs ChangeSet, hooks Hooks) ([]AppliedFile, error) {
	h := jr.Hold()
	defer h.Release()
	return h.Apply(ctx, cs, hooks, After{})
}

// Held is the journal's commit turn: while it is held no other commit
// runs. Release it once.
type Held struct{ jr *Journal }

// Hold waits for the journal's commit turn (a caller that must read what
// it commits under the turn, as a branch does, holds it first).
func (jr *Journal) Hold() Held {
	jr.commitMu.Lock()
	return Held{jr: jr}
}

// Release ends the turn.
func (h Held) Release() { h.jr.commitMu.Unlock() }

// Apply commits cs (see Journal.Apply); after runs once the workspace
// holds it.
func (h Held) Apply(ctx context.Context, cs ChangeSet, hooks Hooks, after After) ([]AppliedFile, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	return h.jr.apply(ctx, cs, hooks, after)
}

// TakeRecovered returns the commits Recover settled, once (later calls
// return none), so the daemon can audit them.
func (jr *Journal) TakeRecovered() []Recovered {
	jr.mu.Lock()
	defer jr.mu.Unlock()
	out := jr.recovered
	jr.recovered = nil
	return out
}

// newID is a random commit id.
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

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
type intent struct {
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
func (jr *Journal) markApplied(j *intent, audited bool) error {
	j.State, j.Audited = stateApplied, audited
	if err := jr.dir.Put(j.ID+".json", j); err != nil {
		return fmt.Errorf("%s: mark the commit journal applied: %w", j.Label, err)
	}
	return nil
}

// appliedFiles lists the files a finished journal changed.
func appliedFiles(jr *Journal, j *intent) []AppliedFile {
	var out []AppliedFile
	for _, s := range j.Steps {
		switch s.Op {
		case opWrite:
			f := AppliedFile{Target: jr.ws.TargetForRel(s.Path), After: s.New}
			if s.Base != BaseAbsent && s.Base != BaseDir {
				f.Before = s.Base
			}
			out = append(out, f)
		case opDelete:
			out = append(out, AppliedFile{Target: jr.ws.TargetForRel(s.Path), Deleted: true, Before: s.Base})
		}
	}
	return out
}
