package local

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/provider"
)

func TestIOFailure_MapsErrno(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code provider.Code
		msg  string
	}{
		{unix.ENOENT, provider.CodeNotFound, "no such file"},
		{unix.EACCES, provider.CodePermissionDenied, "permission denied"},
		{unix.EPERM, provider.CodePermissionDenied, "permission denied"},
		{unix.EROFS, provider.CodePermissionDenied, "read-only"},
		{unix.EXDEV, provider.CodeSandboxDenied, "outside the workspace"},
		{unix.ENOTDIR, provider.CodeNotDirectory, "not a directory"},
		{unix.EISDIR, provider.CodeNotRegularFile, "directory"},
		{unix.ENOSPC, provider.CodeIOError, "no space left on device"},
		{unix.EDQUOT, provider.CodeIOError, "quota"},
		{unix.EIO, provider.CodeIOError, "I/O error"},
		{context.Canceled, provider.CodeAborted, "cancelled"},
	} {
		cause := pathErr("openat2", "a/b", tc.err)
		e := ioFailure("write", "a/b", cause)
		assert.Equal(t, tc.code, e.Code, "%v", tc.err)
		assert.Contains(t, e.Message, tc.msg)
		assert.Equal(t, "write", e.Op)
		assert.Equal(t, "a/b", e.Path)
		assert.ErrorIs(t, e, tc.err, "the cause is kept")
		var pe *os.PathError
		if tc.err != context.Canceled {
			assert.ErrorAs(t, e, &pe)
		}
	}
	already := provider.NewError(provider.CodeStaleVersion, "edit", "x", nil, "stale")
	assert.Same(t, already, ioFailure("write", "y", already), "provider errors pass through")
}
