package mcp

import (
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshmount/dshmount/control"
)

// Tool names.
const (
	ToolRead       = "read"
	ToolWrite      = "write"
	ToolEdit       = "edit"
	ToolApplyPatch = "apply_patch"
	ToolMove       = "move"
	ToolDelete     = "delete"
	ToolList       = "list"
	ToolStat       = "stat"
	// ToolBranchRebase merges the workspace's later changes into a branch.
	ToolBranchRebase = "branch_rebase"
)

// ToolNames lists every tool the server offers.
var ToolNames = []string{ToolRead, ToolWrite, ToolEdit, ToolApplyPatch, ToolMove, ToolDelete, ToolList, ToolStat, ToolBranchRebase}

// guardRules is the paragraph every mutating tool's description carries.
const guardRules = `The workspace is guarded: you must read a file (with the read tool) before you edit, overwrite, move or delete it, and the change is refused if the file changed after your read. A file you have not read can only be created, and only if it does not exist yet.`

// errorCodes explains the codes a failed call's text starts with.
const errorCodes = `On failure the result is an error whose text starts with a code: FS_NOT_OBSERVED (you have not read this file in this session, or you tried to create a file that already exists: read it first), FS_STALE_VERSION (the file changed since you read it, or was removed; the text says who changed it: read it again and redo your change), FS_NOT_FOUND (no such file), FS_EDIT_NOT_FOUND (old_string does not occur in the file), FS_AMBIGUOUS_EDIT (old_string occurs more than once: add context or set replace_all), FS_PATCH_MISMATCH (a patch hunk does not match the file), FS_SAME_TARGET (source and destination are one file), FS_NOT_TEXT / FS_NOT_REGULAR_FILE (binary file, directory or special file), FS_SANDBOX_DENIED (outside the workspace, hidden or read-only), FS_PERMISSION_DENIED, FS_TOO_LARGE, FS_INVALID_ARGUMENT (bad arguments: the text shows the expected ones), FS_MERGE_CONFLICT (a merge found changes that touch: the text lists the conflicted regions), FS_IO_ERROR (the daemon or the disk failed).`

// ReadInput is the arguments of the read tool.
type ReadInput struct {
	Path   string `json:"path" jsonschema:"the file to read: relative to the workspace root, or absolute inside the workspace"`
	Offset int    `json:"offset,omitempty" jsonschema:"1-based number of the first line to return (default 1); use it to read on after a truncated result"`
	Limit  int    `json:"limit,omitempty" jsonschema:"maximum number of lines to return (default: the daemon's window, 2000 lines)"`
}

// ReadOutput is the structured result of the read tool.
type ReadOutput struct {
	Path             string `json:"path" jsonschema:"workspace-relative path of the file"`
	Version          string `json:"version" jsonschema:"opaque version token of the content read"`
	FirstLine        int    `json:"firstLine" jsonschema:"number of the first returned line"`
	LastLine         int    `json:"lastLine" jsonschema:"number of the last returned line (firstLine-1 when none)"`
	TotalLines       int    `json:"totalLines" jsonschema:"number of lines in the whole file"`
	TruncatedByBytes bool   `json:"truncatedByBytes,omitempty" jsonschema:"true when the byte cap cut the window short"`
}

// WriteInput is the arguments of the write tool.
type WriteInput struct {
	Path    string `json:"path" jsonschema:"the file to create or replace"`
	Content string `json:"content" jsonschema:"the complete new content of the file"`
	Merge   bool   `json:"merge,omitempty" jsonschema:"when the file changed since you read it, merge your change over the current content instead of failing, if the two changes do not touch (default false); a conflict is FS_MERGE_CONFLICT and changes nothing"`
}

// WriteOutput is the structured result of the write tool.
type WriteOutput struct {
	Path       string `json:"path" jsonschema:"workspace-relative path of the file"`
	Operation  string `json:"operation" jsonschema:"create or update"`
	Version    string `json:"version" jsonschema:"version token of the new content"`
	Lines      int    `json:"lines" jsonschema:"number of lines written"`
	MergedOver string `json:"mergedOver,omitempty" jsonschema:"set when merge was asked and used: the version of the other change your change was merged over"`
}

// EditInput is the arguments of the edit tool.
type EditInput struct {
	Path       string `json:"path" jsonschema:"the file to edit; read it first"`
	OldString  string `json:"old_string" jsonschema:"the exact text to replace, as it appears in the file (without the line-number prefixes the read tool shows); must occur exactly once unless replace_all is set"`
	NewString  string `json:"new_string" jsonschema:"the text to put in its place; must differ from old_string"`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"replace every occurrence of old_string instead of requiring exactly one (default false)"`
	Merge      bool   `json:"merge,omitempty" jsonschema:"when the file changed since you read it, merge your change over the current content instead of failing, if the two changes do not touch (default false); a conflict is FS_MERGE_CONFLICT and changes nothing"`
}

// EditOutput is the structured result of the edit tool.
type EditOutput struct {
	Path         string `json:"path" jsonschema:"workspace-relative path of the file"`
	Version      string `json:"version" jsonschema:"version token of the new content"`
	Replacements int    `json:"replacements" jsonschema:"number of occurrences replaced"`
	MergedOver   string `json:"mergedOver,omitempty" jsonschema:"set when merge was asked and used: the version of the other change your change was merged over"`
}

// PatchInput is the arguments of the apply_patch tool.
type PatchInput struct {
	Patch string `json:"patch" jsonschema:"the whole patch text, from '*** Begin Patch' to '*** End Patch'"`
	// Atomic commits every operation through one journaled commit: all are
	// applied or none, even if the daemon is killed part way.
	Atomic bool `json:"atomic,omitempty" jsonschema:"apply every operation or none, even across a crash (default false)"`
	Merge  bool `json:"merge,omitempty" jsonschema:"for a patch that updates one file: when the file changed since you read it, merge the update over the current content instead of failing, if the two changes do not touch (default false); a conflict is FS_MERGE_CONFLICT and changes nothing"`
}

// PatchOperation is one operation in the apply_patch result.
type PatchOperation struct {
	Kind   string `json:"kind" jsonschema:"add, update or delete"`
	Path   string `json:"path" jsonschema:"the file the operation names"`
	MoveTo string `json:"moveTo,omitempty" jsonschema:"the new path of an update that moves the file"`
	Status string `json:"status" jsonschema:"applied, failed or not-run"`
	Error  string `json:"error,omitempty" jsonschema:"why a failed operation failed, starting with its code"`
}

// PatchOutput is the structured result of the apply_patch tool.
type PatchOutput struct {
	Complete   bool             `json:"complete" jsonschema:"false when the commit stopped part way; the applied operations stay on disk"`
	Operations []PatchOperation `json:"operations" jsonschema:"every operation of the patch, in order"`
}

// MoveInput is the arguments of the move tool.
type MoveInput struct {
	From string `json:"from" jsonschema:"the file to move; read it first"`
	To   string `json:"to" jsonschema:"the new path; it must not exist unless you have read it"`
}

// MoveOutput is the structured result of the move tool.
type MoveOutput struct {
	From          string `json:"from" jsonschema:"the source path"`
	To            string `json:"to" jsonschema:"the destination path"`
	Version       string `json:"version" jsonschema:"version token of the destination"`
	SourceDeleted bool   `json:"sourceDeleted" jsonschema:"false when the destination was written but the source could not be removed"`
}

// PathInput is the arguments of delete, list and stat.
type PathInput struct {
	Path string `json:"path" jsonschema:"relative to the workspace root, or absolute inside the workspace"`
}

// DeleteOutput is the structured result of the delete tool.
type DeleteOutput struct {
	Path    string `json:"path" jsonschema:"the deleted file"`
	Deleted bool   `json:"deleted" jsonschema:"always true on success"`
}

// ListEntry is one child in the list result.
type ListEntry struct {
	Name string `json:"name" jsonschema:"the child's name"`
	Type string `json:"type" jsonschema:"file, directory, symlink or other"`
	Size *int64 `json:"size,omitempty" jsonschema:"size in bytes, for files"`
}

// ListOutput is the structured result of the list tool.
type ListOutput struct {
	Path    string      `json:"path" jsonschema:"the listed directory"`
	Entries []ListEntry `json:"entries" jsonschema:"the children, in name order"`
}

// StatOutput is the structured result of the stat tool.
type StatOutput struct {
	Path    string `json:"path" jsonschema:"workspace-relative path"`
	Exists  bool   `json:"exists" jsonschema:"false when nothing is at the path"`
	Type    string `json:"type,omitempty" jsonschema:"file, directory, symlink or other"`
	Size    *int64 `json:"size,omitempty" jsonschema:"size in bytes"`
	Version string `json:"version,omitempty" jsonschema:"opaque version token"`
}

// BranchRebaseInput is the arguments of the branch_rebase tool.
type BranchRebaseInput struct {
	Name    string `json:"name" jsonschema:"the branch to rebase"`
	Markers bool   `json:"markers,omitempty" jsonschema:"write conflicts into the branch's files as git-style conflict markers instead of refusing (default false); a commit is refused until they are gone"`
}

// BranchRebaseOutput is the structured result of the branch_rebase tool.
type BranchRebaseOutput struct {
	Merged  []string `json:"merged" jsonschema:"the files merged over the workspace's changes"`
	Flagged []string `json:"flagged" jsonschema:"of those, the files left with conflict markers to resolve"`
}

func boolPtr(b bool) *bool { return &b }

// readSpec … statSpec are the tool definitions shown by tools/list.
var (
	readSpec = toolSpec{method: control.MethodRead,
		tool: &sdk.Tool{Name: ToolRead, Title: "Read a file",
			Description: `Read a text file of the workspace. Lines come numbered like 'cat -n' (the number, a tab, then the line; the number is not part of the file). A footer gives the line range returned and totalLines, the length of the whole file; when the window or the byte cap cut the file short it tells you the offset to read on from. Reading records that you have seen this version of the file, which is what allows a later edit, write, move or delete of it. A file that does not exist gives FS_NOT_FOUND (and lets you create it with write). ` + errorCodes,
			Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: boolPtr(false)}},
		usage:    `read {"path": string, "offset"?: integer >= 1, "limit"?: integer >= 1}`,
		minimums: map[string]float64{"offset": 1, "limit": 1},
	}
	writeSpec = toolSpec{method: control.MethodWrite,
		tool: &sdk.Tool{Name: ToolWrite, Title: "Create or replace a file",
			Description: `Write the complete content of a file, creating it (with its parent directories) or replacing it. ` + guardRules + ` So: to create a new file, just write it; to replace an existing file, read it first. Prefer edit or apply_patch for changes to part of a file. ` + errorCodes,
			Annotations: &sdk.ToolAnnotations{DestructiveHint: boolPtr(true), OpenWorldHint: boolPtr(false)}},
		usage: `write {"path": string, "content": string, "merge"?: boolean}`,
	}
	editSpec = toolSpec{method: control.MethodEdit, params: map[string]string{"old_string": "oldString", "new_string": "newString", "replace_all": "replaceAll"},
		tool: &sdk.Tool{Name: ToolEdit, Title: "Replace text in a file",
			Description: `Replace an exact piece of text in a file. old_string must match the file literally (whitespace and indentation included, without the line-number prefixes of the read tool) and occur exactly once, unless replace_all is true. ` + guardRules + ` ` + errorCodes,
			Annotations: &sdk.ToolAnnotations{DestructiveHint: boolPtr(true), OpenWorldHint: boolPtr(false)}},
		usage: `edit {"path": string, "old_string": string, "new_string": string, "replace_all"?: boolean, "merge"?: boolean}`,
	}
	patchSpec = toolSpec{method: control.MethodPatch,
		tool: &sdk.Tool{Name: ToolApplyPatch, Title: "Apply a multi-file patch",
			Description: `Apply a patch in the apply_patch format: it can add, update (with @@ hunks of ' ' context, '-' removed and '+' added lines), move (*** Move to:) and delete files in one call. Example:
*** Begin Patch
*** Add File: docs/new.md
+first line
*** Update File: src/app.go
@@ func main() {
-	old()
+	updated()
*** Delete File: obsolete.txt
*** End Patch
` + guardRules + ` Every operation is checked before anything is written; a syntax error, a refusal or a hunk that does not match applies nothing and is reported as an error. If a commit stops part way (a file changed during the patch) the result is not an error: it lists each operation as applied, failed or not-run, and the applied ones stay on disk. With atomic: true the operations are applied in one journaled commit instead: all of them or none, even if the daemon is killed part way; a file changed meanwhile refuses the whole patch (FS_STALE_VERSION). ` + errorCodes,
			Annotations: &sdk.ToolAnnotations{DestructiveHint: boolPtr(true), OpenWorldHint: boolPtr(false)}},
		usage: `apply_patch {"patch": "*** Begin Patch\n...\n*** End Patch"}`,
	}
	moveSpec = toolSpec{method: control.MethodMove,
		tool: &sdk.Tool{Name: ToolMove, Title: "Move or rename a file",
			Description: `Move (rename) a file. The source must have been read, and must not have changed since; the destination must not exist unless you have read it (then it is replaced). ` + guardRules + ` ` + errorCodes,
			Annotations: &sdk.ToolAnnotations{DestructiveHint: boolPtr(true), OpenWorldHint: boolPtr(false)}},
		usage: `move {"from": string, "to": string}`,
	}
	deleteSpec = toolSpec{method: control.MethodDelete,
		tool: &sdk.Tool{Name: ToolDelete, Title: "Delete a file",
			Description: `Delete a file. ` + guardRules + ` ` + errorCodes,
			Annotations: &sdk.ToolAnnotations{DestructiveHint: boolPtr(true), IdempotentHint: false, OpenWorldHint: boolPtr(false)}},
		usage: `delete {"path": string}`,
	}
	listSpec = toolSpec{method: control.MethodList,
		tool: &sdk.Tool{Name: ToolList, Title: "List a directory",
			Description: `List the entries of a workspace directory ("." is the workspace root): one per line, directories with a trailing '/', files with their size. Listing does not count as reading the files. ` + errorCodes,
			Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: boolPtr(false)}},
		usage: `list {"path": string}`,
	}
	statSpec = toolSpec{method: control.MethodStat,
		tool: &sdk.Tool{Name: ToolStat, Title: "Stat a path",
			Description: `Tell whether a path exists, and its type, size and version token. It does not read the content. ` + errorCodes,
			Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: boolPtr(false)}},
		usage: `stat {"path": string}`,
	}
	branchRebaseSpec = toolSpec{method: control.MethodBranchRebase,
		tool: &sdk.Tool{Name: ToolBranchRebase, Title: "Rebase a branch on the workspace",
			Description: `Merge the workspace's changes made since a branch started each file into the branch, line by line as git merges (changes to the same or adjacent lines conflict). All clean: the branch's files take both changes and a later commit of the branch applies. Any conflict: nothing changes and the error is FS_MERGE_CONFLICT listing each conflicted region (path, base line, ours = the branch, theirs = the workspace): edit the branch's file, then rebase again; or pass markers: true to get git-style conflict markers in the files, remove them, then commit. A branch records no renames: a renamed file is a delete plus a create. ` + errorCodes,
			Annotations: &sdk.ToolAnnotations{DestructiveHint: boolPtr(false), OpenWorldHint: boolPtr(false)}},
		usage: `branch_rebase {"name": string, "markers"?: boolean}`,
	}
)
