package local

import (
	"context"
	"errors"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/beneath"
	"github.com/dshmount/dshmount/internal/provider"
)

// retryEINTR repeats a raw system call interrupted by a signal.
func retryEINTR[T any](call func() (T, error)) (T, error) { return beneath.RetryEINTR(call) }

// retryEINTR0 is retryEINTR for calls without a result.
func retryEINTR0(call func() error) error { return beneath.RetryEINTR0(call) }

// pathErr wraps an errno as the cause of a provider error.
func pathErr(syscallName, path string, err error) error {
	return beneath.PathErr(syscallName, path, err)
}

// ioFailure maps a system-call failure on the target display path disp to a
// provider error whose message says what to do next.
func ioFailure(op, disp string, err error) *provider.Error {
	var pe *provider.Error
	if errors.As(err, &pe) {
		return pe
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return aborted(op, disp, err)
	}
	if errors.Is(err, beneath.ErrLinkSwapped) {
		return provider.NewError(provider.CodeSandboxDenied, op, disp, err,
			"a symbolic link replaced a directory or file on the path while the request ran; nothing behind it was touched, retry the request")
	}
	var errno unix.Errno
	errors.As(err, &errno)
	switch errno {
	case unix.ENOENT:
		return provider.NewError(provider.CodeNotFound, op, disp, err,
			"no such file or directory; check the path")
	case unix.EACCES, unix.EPERM:
		return provider.NewError(provider.CodePermissionDenied, op, disp, err,
			"permission denied by the host; check the file's permissions and ownership")
	case unix.EROFS:
		return provider.NewError(provider.CodePermissionDenied, op, disp, err,
			"the file system is read-only; nothing can be changed here")
	case unix.EXDEV:
		return sandboxDenied(op, disp, err)
	case unix.ENOTDIR:
		return provider.NewError(provider.CodeNotDirectory, op, disp, err,
			"a component of the path is not a directory; check the path")
	case unix.EISDIR:
		return provider.NewError(provider.CodeNotRegularFile, op, disp, err,
			"the path is a directory, not a regular file")
	case unix.ENOSPC:
		return provider.NewError(provider.CodeIOError, op, disp, err,
			"no space left on device; free some space and retry")
	case unix.EDQUOT:
		return provider.NewError(provider.CodeIOError, op, disp, err,
			"disk quota exceeded; free some space and retry")
	case unix.ENAMETOOLONG:
		return provider.NewError(provider.CodeInvalidArgument, op, disp, err,
			"the path or one of its names is too long for the host file system (names ≤ 255 bytes, paths ≤ 4095); shorten it")
	case unix.ELOOP:
		return provider.NewError(provider.CodeIOError, op, disp, err,
			"too many levels of symbolic links; fix the link cycle")
	}
	return provider.NewError(provider.CodeIOError, op, disp, err,
		"the host file system reported an I/O error; retry, and check the disk if it persists")
}

// sandboxDenied is the refusal of a path that leaves the workspace.
func sandboxDenied(op, disp string, cause error) *provider.Error {
	return provider.NewError(provider.CodeSandboxDenied, op, disp, cause,
		"the path leads outside the workspace; use a path inside it")
}

// aborted is the refusal of a call whose context ended.
func aborted(op, disp string, cause error) *provider.Error {
	return provider.NewError(provider.CodeAborted, op, disp, cause,
		"the operation was cancelled; nothing was changed")
}

// checkCtx returns FS_ABORTED when ctx has ended.
func checkCtx(ctx context.Context, op, disp string) error {
	if err := ctx.Err(); err != nil {
		return aborted(op, disp, err)
	}
	return nil
}

// notRegular refuses a target that is not a regular file.
func notRegular(op, disp string, kind string) *provider.Error {
	return provider.NewError(provider.CodeNotRegularFile, op, disp, nil,
		"the target is a %s, not a regular file", kind)
}

// staleMissing refuses a mutation of a target that does not exist.
func staleMissing(op, disp string) *provider.Error {
	return provider.NewError(provider.CodeStaleVersion, op, disp, unix.ENOENT,
		"the file does not exist (any more); read the directory again before changing it")
}

// staleChanged refuses a guarded mutation of a target that changed.
func staleChanged(op, disp string, want, got provider.Version) *provider.Error {
	return provider.NewError(provider.CodeStaleVersion, op, disp, nil,
		"the file changed since you read it (expected version %s, now %s); read it again", want, got)
}
