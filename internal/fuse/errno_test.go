package fuse

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/provider"
)

// TestErrno_EveryCodeMapped pins the errno of every provider code in every
// context, through the three functions the mount calls: a changed mapping,
// or a new code without a row, fails here.
func TestErrno_EveryCodeMapped(t *testing.T) {
	want := map[provider.Code]struct{ guard, workspace, branch syscall.Errno }{
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
	require.Len(t, want, len(provider.Codes), "every provider code has a row here")
	require.Len(t, codeErrnos, len(provider.Codes), "every provider code has a row in codeErrnos")
	for _, code := range provider.Codes {
		w, ok := want[code]
		require.True(t, ok, "no expectation for %s", code)
		err := fmt.Errorf("wrapped: %w", provider.NewError(code, "op", "a/b", nil, "refused"))
		assert.Equal(t, w.guard, errnoOfGuard(err), "%s refused by the guard", code)
		assert.Equal(t, w.workspace, errnoOf(err), "%s from the workspace backend", code)
		assert.Equal(t, error(w.branch), branchErr(err), "%s from the branch backend", code)
	}
}

// TestErrno_OrderOfChecks pins what is checked before the code table: a
// branch sentinel first, then the error's own errno (not in the guard
// context), and what an error without either becomes.
func TestErrno_OrderOfChecks(t *testing.T) {
	// a provider error whose cause is an errno
	withErrno := provider.NewError(provider.CodeNotObserved, "op", "a", syscall.EROFS, "refused")
	tests := []struct {
		name                      string
		err                       error
		guard, workspace, branchE syscall.Errno
	}{
		{"nil", nil, syscall.EIO, 0, 0},
		{"plain errno", fmt.Errorf("x: %w", syscall.ENOSPC), syscall.EIO, syscall.ENOSPC, syscall.ENOSPC},
		{"no errno, no code", errors.New("broken"), syscall.EIO, syscall.EIO, syscall.EIO},
		{"errno before code", withErrno, syscall.EACCES, syscall.EROFS, syscall.EROFS},
		{"branch exists", fmt.Errorf("x: %w", branch.ErrExists), syscall.EIO, syscall.EIO, syscall.EEXIST},
		{"branch cross rename", branch.ErrCrossRename, syscall.EIO, syscall.EIO, syscall.EXDEV},
		{"branch not supported", branch.ErrNotSupported, syscall.EIO, syscall.EIO, syscall.EPERM},
		{"sentinel before errno", fmt.Errorf("%w: %w", branch.ErrExists, syscall.ENOENT), syscall.EIO, syscall.ENOENT, syscall.EEXIST},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.guard, errnoOfGuard(tt.err), "guard")
			assert.Equal(t, tt.workspace, errnoOf(tt.err), "workspace")
			if tt.branchE == 0 {
				assert.NoError(t, branchErr(tt.err), "branch")
				return
			}
			assert.Equal(t, error(tt.branchE), branchErr(tt.err), "branch")
		})
	}
}
