package service

import (
	"fmt"
	"strings"
	"time"

	"github.com/dshmount/dshmount/internal/branch"
)

// Branch methods.
const (
	MethodBranchCreate  = "branch.create"
	MethodBranchList    = "branch.list"
	MethodBranchDiff    = "branch.diff"
	MethodBranchCommit  = "branch.commit"
	MethodBranchDiscard = "branch.discard"
	MethodBranchMount   = "branch.mount"
	MethodBranchUnmount = "branch.unmount"
	MethodBranchRebase  = "branch.rebase"
)

// BranchCreateParams are the params of branch.create. With Mount the
// branch is also served as a FUSE mount at that directory (see
// BranchMountParams); a refused mount leaves no branch.
type BranchCreateParams struct {
	Name  string `json:"name"`
	Mount string `json:"mount,omitempty"`
	Cwd   string `json:"cwd,omitempty"` // the caller's absolute working directory, for a relative Mount
}

// BranchMountParams are the params of branch.mount: serve an existing
// branch as a FUSE mount at Mount, absolute or relative to Cwd (the
// caller's absolute working directory). The directory must exist, be
// empty, not be a mount point already, and lie outside the workspace and
// its mount; the caller (unless root) must own it. Refusals:
// FS_INVALID_ARGUMENT (relative without an absolute cwd, not empty,
// already a mount point, or the branch is already mounted), FS_NOT_FOUND
// (no such directory or branch), FS_NOT_DIRECTORY, FS_SANDBOX_DENIED
// (inside the workspace, its mount or another branch's mount),
// FS_PERMISSION_DENIED (not the caller's). The directory is recorded with
// the branch: the daemon mounts it there again when it starts.
type BranchMountParams struct {
	Name  string `json:"name"`
	Mount string `json:"mount"`
	Cwd   string `json:"cwd,omitempty"`
}

// BranchMountResult is the result of branch.mount: the absolute mount
// directory.
type BranchMountResult struct {
	Mount string `json:"mount"`
}

// BranchInfo describes one branch.
type BranchInfo struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	Mount   string    `json:"mount,omitempty"` // where the branch is mounted now
	Changed int       `json:"changed"`         // files the branch changed, as branch.diff lists them
	Owner   uint32    `json:"owner"`           // uid that created it; it, root and the daemon's uid may act on it
}

// BranchListResult is the result of branch.list, by name.
type BranchListResult struct {
	Branches []BranchInfo `json:"branches"`
}

// BranchNameParams name one branch (branch.discard, branch.unmount).
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
// "renamed" (with From). The diff is the branch's own change (against the
// bytes it started from). Conflict: the workspace changed the file since
// (or gained an added one): a commit is refused until it is resolved.
// NoBase: the branch kept no copy of its starting bytes (over 8 MiB, or a
// branch older than base copies), so the diff is against the workspace's
// current file (with Conflict, it also undoes the workspace's change).
type BranchFile struct {
	Path     string `json:"path"`
	Status   string `json:"status"`
	From     string `json:"from,omitempty"`
	Binary   bool   `json:"binary,omitempty"`
	Conflict bool   `json:"conflict,omitempty"`
	NoBase   bool   `json:"no_base,omitempty"`
	// Access is "hidden" or "read-only" when the daemon's view no longer
	// lets the branch change this path (its rules changed since): a
	// commit is refused. A hidden file's content is not in the diff.
	Access string `json:"access,omitempty"`
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

// BranchCommitParams are the params of branch.commit. With Rebase the
// branch is rebased first (as branch.rebase without markers).
type BranchCommitParams struct {
	Name    string `json:"name"`
	Keep    bool   `json:"keep,omitempty"`
	Rebase  bool   `json:"rebase,omitempty"`
	Session string `json:"session,omitempty"`
}

// BranchRebaseParams are the params of branch.rebase. With Markers, text
// conflicts are written into the branch as git-style conflict markers and
// the files flagged (a commit is refused while they hold markers) instead
// of refusing the rebase.
type BranchRebaseParams struct {
	Name    string `json:"name"`
	Markers bool   `json:"markers,omitempty"`
}

// BranchRebaseResult is the result of branch.rebase: the files merged
// over the workspace's changes, and those left with markers.
type BranchRebaseResult struct {
	Merged  []string `json:"merged"`
	Flagged []string `json:"flagged"`
}

// ConflictHunk is one conflicted region of a refused merge
// (FS_MERGE_CONFLICT): the 1-based first line of the region in the
// base, and the region's lines in the base, ours (the branch, or the
// change being made) and theirs (the workspace).
type ConflictHunk = branch.ConflictHunk

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

// ConflictHunksText renders conflicted regions for people and models: per
// region its path and base line, then ours and theirs between git-style
// markers. Empty for no regions.
func ConflictHunksText(hunks []ConflictHunk) string {
	var sb strings.Builder
	for _, h := range hunks {
		fmt.Fprintf(&sb, "%s, from base line %d:\n<<<<<<< ours\n%s=======\n%s>>>>>>> theirs\n",
			h.Path, h.BaseStart, endLine(h.Ours), endLine(h.Theirs))
	}
	return sb.String()
}

// endLine ends a non-empty text with a newline.
func endLine(s string) string {
	if s != "" && !strings.HasSuffix(s, "\n") {
		return s + "\n"
	}
	return s
}
