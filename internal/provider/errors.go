package provider

import (
	"errors"
	"fmt"
)

// Code is a stable, machine-routable filesystem failure code.
type Code string

// The stable failure codes (docs/protocol.md lists what each means).
const (
	CodeNotFound         Code = "FS_NOT_FOUND"
	CodeNotDirectory     Code = "FS_NOT_DIRECTORY"
	CodeNotText          Code = "FS_NOT_TEXT"
	CodeNotRegularFile   Code = "FS_NOT_REGULAR_FILE"
	CodePermissionDenied Code = "FS_PERMISSION_DENIED"
	CodeSandboxDenied    Code = "FS_SANDBOX_DENIED"
	CodeIOError          Code = "FS_IO_ERROR"
	CodeStaleVersion     Code = "FS_STALE_VERSION"
	CodeNotObserved      Code = "FS_NOT_OBSERVED"
	CodeAmbiguousEdit    Code = "FS_AMBIGUOUS_EDIT"
	CodeEditNotFound     Code = "FS_EDIT_NOT_FOUND"
	CodePatchMismatch    Code = "FS_PATCH_MISMATCH"
	CodeSameTarget       Code = "FS_SAME_TARGET"
	CodeTooLarge         Code = "FS_TOO_LARGE"
	CodeAborted          Code = "FS_ABORTED"
	// CodeInvalidArgument is dshmount's one addition to the seed list: a
	// request argument that no backend could accept (NUL in a path, invalid
	// UTF-8 content, an empty edit string).
	CodeInvalidArgument Code = "FS_INVALID_ARGUMENT"
	// CodeChangesLost says the daemon cannot vouch for every change after
	// the seq a watcher asked from (older than the retained history, from
	// before this daemon run, or before changes were lost): rescan, then
	// resubscribe from the seq the message names.
	CodeChangesLost Code = "FS_CHANGES_LOST"
	// CodeMergeConflict refuses a three-way merge (branch rebase, a
	// change with merge: true) whose two sides' changes touch: nothing was
	// changed; the error's data names the conflicted hunks.
	CodeMergeConflict Code = "FS_MERGE_CONFLICT"
)

// Codes lists every code in a stable order.
var Codes = []Code{
	CodeNotFound, CodeNotDirectory, CodeNotText, CodeNotRegularFile,
	CodePermissionDenied, CodeSandboxDenied, CodeIOError, CodeStaleVersion,
	CodeNotObserved, CodeAmbiguousEdit, CodeEditNotFound, CodePatchMismatch,
	CodeSameTarget, CodeTooLarge, CodeAborted, CodeInvalidArgument,
	CodeChangesLost, CodeMergeConflict,
}

// Sentinel errors, one per code, for errors.Is matching:
// errors.Is(err, provider.ErrStaleVersion) holds for any *Error with that code.
var (
	ErrNotFound         = &Error{Code: CodeNotFound}
	ErrNotDirectory     = &Error{Code: CodeNotDirectory}
	ErrNotText          = &Error{Code: CodeNotText}
	ErrNotRegularFile   = &Error{Code: CodeNotRegularFile}
	ErrPermissionDenied = &Error{Code: CodePermissionDenied}
	ErrSandboxDenied    = &Error{Code: CodeSandboxDenied}
	ErrIOError          = &Error{Code: CodeIOError}
	ErrStaleVersion     = &Error{Code: CodeStaleVersion}
	ErrNotObserved      = &Error{Code: CodeNotObserved}
	ErrAmbiguousEdit    = &Error{Code: CodeAmbiguousEdit}
	ErrEditNotFound     = &Error{Code: CodeEditNotFound}
	ErrPatchMismatch    = &Error{Code: CodePatchMismatch}
	ErrSameTarget       = &Error{Code: CodeSameTarget}
	ErrTooLarge         = &Error{Code: CodeTooLarge}
	ErrAborted          = &Error{Code: CodeAborted}
	ErrInvalidArgument  = &Error{Code: CodeInvalidArgument}
	ErrChangesLost      = &Error{Code: CodeChangesLost}
	ErrMergeConflict    = &Error{Code: CodeMergeConflict}
)

// Error is the one filesystem error type. It carries a stable Code, the
// operation and display path it concerns, a human message that says what to
// do next, and the underlying cause.
type Error struct {
	Code    Code   // stable failure code
	Op      string // operation, e.g. "edit"
	Path    string // display path of the target, when there is one
	Message string // human explanation
	Err     error  // underlying cause, may be nil
}

// Error renders "CODE: op path: message: cause".
func (e *Error) Error() string {
	s := string(e.Code) + ":"
	if e.Op != "" {
		s += " " + e.Op
	}
	if e.Path != "" {
		s += " " + e.Path
	}
	if e.Message != "" {
		if e.Op != "" || e.Path != "" {
			s += ":"
		}
		s += " " + e.Message
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same code. Sentinels such as
// ErrStaleVersion match every error of their code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	return t.Code == e.Code && (t.Op == "" || t.Op == e.Op) && (t.Path == "" || t.Path == e.Path)
}

// NewError builds an *Error with a formatted message.
func NewError(code Code, op, path string, cause error, format string, args ...any) *Error {
	return &Error{Code: code, Op: op, Path: path, Message: fmt.Sprintf(format, args...), Err: cause}
}

// CodeOf returns the code of the first *Error in err's chain, or "" when
// there is none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// MessageOf returns the message of the first *Error in err's chain, or
// err.Error() when there is none.
func MessageOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	if err == nil {
		return ""
	}
	return err.Error()
}
