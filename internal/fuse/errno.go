package fuse

import (
	"errors"
	"syscall"

	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/provider"
)

// errnoContext is where an error met the mount: a column of codeErrnos.
type errnoContext int

const (
	// inGuard: the policy refused a bound process's change (checkChange,
	// checkCreate). The errno says why the guard said no.
	inGuard errnoContext = iota
	// inWorkspace: the workspace backend's own syscalls failed. They
	// return errnos; a provider code there is not a decision, so EIO.
	inWorkspace
	// inBranch: an overlay/branch operation failed (copy-up, create,
	// remove, rename of a branch path). The errno says what the branch
	// state means for the call a program made.
	inBranch
	numErrnoContexts
)

// codeErrnos is the one provider code → errno table of the mount, a column
// per context. The columns differ on purpose:
//
//   - FS_NOT_OBSERVED is EACCES from the guard (the process never read the
//     file it changes) but EEXIST from a branch (the branch refuses to
//     create over an entry it was not told of: the name exists).
//   - FS_STALE_VERSION is ESTALE from the guard (the file changed since the
//     process read it) but ENOENT from a branch (the entry the branch
//     expected is gone).
//   - The workspace backend is plain syscalls: its errors carry an errno
//     (errnoOf returns it before this table), anything else is EIO.
//
// A code with no decision in a column is EIO there. Every provider code has
// a row, so a new code is a decision made here (TestErrno_EveryCodeMapped).
var codeErrnos = map[provider.Code][numErrnoContexts]syscall.Errno{
	//                                  guard           workspace     branch
	provider.CodeNotFound:         {syscall.ENOENT, syscall.EIO, syscall.ENOENT},
	provider.CodeNotDirectory:     {syscall.EIO, syscall.EIO, syscall.ENOTDIR},
	provider.CodeNotText:          {syscall.EIO, syscall.EIO, syscall.EIO},
	provider.CodeNotRegularFile:   {syscall.EIO, syscall.EIO, syscall.EISDIR},
	provider.CodePermissionDenied: {syscall.EACCES, syscall.EIO, syscall.EACCES},
	provider.CodeSandboxDenied:    {syscall.EACCES, syscall.EIO, syscall.EACCES},
	provider.CodeIOError:          {syscall.EIO, syscall.EIO, syscall.EIO},
	provider.CodeStaleVersion:     {syscall.ESTALE, syscall.EIO, syscall.ENOENT},
	provider.CodeNotObserved:      {syscall.EACCES, syscall.EIO, syscall.EEXIST},
	provider.CodeAmbiguousEdit:    {syscall.EIO, syscall.EIO, syscall.EIO},
	provider.CodeEditNotFound:     {syscall.EIO, syscall.EIO, syscall.EIO},
	provider.CodePatchMismatch:    {syscall.EIO, syscall.EIO, syscall.EIO},
	provider.CodeSameTarget:       {syscall.EIO, syscall.EIO, syscall.EIO},
	provider.CodeTooLarge:         {syscall.EIO, syscall.EIO, syscall.EIO},
	provider.CodeAborted:          {syscall.EIO, syscall.EIO, syscall.EIO},
	provider.CodeInvalidArgument:  {syscall.EIO, syscall.EIO, syscall.EINVAL},
	provider.CodeChangesLost:      {syscall.EIO, syscall.EIO, syscall.EIO},
	provider.CodeMergeConflict:    {syscall.EIO, syscall.EIO, syscall.EIO},
}

// branchSentinels are the overlay/branch errors without a provider code,
// checked (in this order) before anything else in the branch context.
var branchSentinels = []struct {
	err   error
	errno syscall.Errno
}{
	{branch.ErrExists, syscall.EEXIST},
	{branch.ErrCrossRename, syscall.EXDEV},
	{branch.ErrNotSupported, syscall.EPERM},
}

// codeErrno is the errno of code in context c (EIO without a row).
func codeErrno(c errnoContext, code provider.Code) syscall.Errno {
	if row, ok := codeErrnos[code]; ok {
		return row[c]
	}
	return syscall.EIO
}

// errnoOf turns an error from the backing filesystem into the errno the
// kernel gets; errors without an errno become EIO.
func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return codeErrno(inWorkspace, provider.CodeOf(err))
}

// errnoOfGuard maps a guard refusal to the errno a program sees:
// unseen → EACCES, stale → ESTALE, observed absent → ENOENT.
func errnoOfGuard(err error) syscall.Errno {
	return codeErrno(inGuard, provider.CodeOf(err))
}

// branchErr maps an overlay/branch error to the errno a program gets: a
// branch sentinel, else the error's own errno, else its provider code.
func branchErr(err error) error {
	if err == nil {
		return nil
	}
	for _, s := range branchSentinels {
		if errors.Is(err, s.err) {
			return s.errno
		}
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return codeErrno(inBranch, provider.CodeOf(err))
}
