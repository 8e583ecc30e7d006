package control

import "time"

// Branch methods.
const (
	MethodBranchCreate  = "branch.create"
	MethodBranchList    = "branch.list"
	MethodBranchDiff    = "branch.diff"
	MethodBranchCommit  = "branch.commit"
	MethodBranchDiscard = "branch.discard"
)

// BranchCreateParams are the params of branch.create. Mount is accepted
// and refused: branch mounts are not supported yet.
type BranchCreateParams struct {
	Name  string `json:"name"`
	Mount string `json:"mount,omitempty"`
}

// BranchInfo describes one branch.
type BranchInfo struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	Mount   string    `json:"mount,omitempty"`
	Changed int       `json:"changed"` // paths the branch changed
}

// BranchListResult is the result of branch.list, by name.
type BranchListResult struct {
	Branches []BranchInfo `json:"branches"`
}

// BranchNameParams name one branch (branch.discard).
type BranchNameParams struct {
	Name string `json:"name"`
}

// BranchDiffParams are the params of branch.diff: the page [offset,
// offset+limit) of the changed files (limit default DefaultDiffLimit).
type BranchDiffParams struct {
	Name   string `json:"name"`
	Offset int    `json:"offset,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

// DefaultDiffLimit is the number of files one branch.diff page covers by
// default.
const DefaultDiffLimit = 200

// BranchFile is one changed file: status "added", "modified", "deleted" or
// "renamed" (with From).
type BranchFile struct {
	Path   string `json:"path"`
	Status string `json:"status"`
	From   string `json:"from,omitempty"`
	Binary bool   `json:"binary,omitempty"`
}

// BranchDiffResult is one page of branch.diff: its files and their
// unified diff (git apply-able; binary files are named, not shown).
// Next is the offset of the next page, absent on the last.
type BranchDiffResult struct {
	Files []BranchFile `json:"files"`
	Diff  string       `json:"diff"`
	Total int          `json:"total"`
	Next  *int         `json:"next,omitempty"`
}

// BranchCommitParams are the params of branch.commit.
type BranchCommitParams struct {
	Name    string `json:"name"`
	Keep    bool   `json:"keep,omitempty"`
	Session string `json:"session,omitempty"`
}

// CommittedFile is one workspace file a commit changed.
type CommittedFile struct {
	Path    string `json:"path"`
	Deleted bool   `json:"deleted,omitempty"`
	Version string `json:"version,omitempty"`
}

// BranchCommitResult is the result of branch.commit.
type BranchCommitResult struct {
	Files []CommittedFile `json:"files"`
	Kept  bool            `json:"kept"`
}
