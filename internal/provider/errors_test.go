package provider_test

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

func TestError_IsMatchesByCode(t *testing.T) {
	err := provider.NewError(provider.CodeStaleVersion, "edit", "a.txt", nil, "changed since you read it; read it again")
	wrapped := fmt.Errorf("socket request: %w", err)

	assert.ErrorIs(t, wrapped, provider.ErrStaleVersion)
	assert.NotErrorIs(t, wrapped, provider.ErrNotObserved)
	assert.Equal(t, provider.CodeStaleVersion, provider.CodeOf(wrapped))
	assert.Equal(t, "changed since you read it; read it again", provider.MessageOf(wrapped))
}

func TestError_ChainsCause(t *testing.T) {
	cause := &fs.PathError{Op: "open", Path: "/w/a", Err: fs.ErrPermission}
	err := provider.NewError(provider.CodePermissionDenied, "read", "a", cause, "permission denied")

	assert.ErrorIs(t, err, fs.ErrPermission)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "/w/a", pe.Path)
}

func TestError_RendersCodeOpPathMessageCause(t *testing.T) {
	tests := []struct {
		name string
		err  *provider.Error
		want string
	}{
		{"full", &provider.Error{Code: provider.CodeNotFound, Op: "read", Path: "x", Message: "no such file", Err: errors.New("enoent")},
			"FS_NOT_FOUND: read x: no such file: enoent"},
		{"code only", &provider.Error{Code: provider.CodeAborted}, "FS_ABORTED:"},
		{"message only", &provider.Error{Code: provider.CodeTooLarge, Message: "over 10 bytes"}, "FS_TOO_LARGE: over 10 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.err.Error())
		})
	}
}

func TestError_IsNarrowsByOpAndPathWhenSet(t *testing.T) {
	err := provider.NewError(provider.CodeNotFound, "read", "a", nil, "missing")
	assert.ErrorIs(t, err, &provider.Error{Code: provider.CodeNotFound, Path: "a"})
	assert.NotErrorIs(t, err, &provider.Error{Code: provider.CodeNotFound, Path: "b"})
}

func TestCodeOf_NonProviderErrorIsEmpty(t *testing.T) {
	assert.Equal(t, provider.Code(""), provider.CodeOf(errors.New("plain")))
	assert.Equal(t, provider.Code(""), provider.CodeOf(nil))
}

func TestMemoryDigests_RemembersTheLastEntryPerIdentity(t *testing.T) {
	c := provider.NewMemoryDigests()
	a := provider.FileID{Dev: 1, Ino: 100}
	_, ok := c.Digest(a)
	assert.False(t, ok)
	c.RememberDigest(a, provider.CachedDigest{Version: "v-old"})
	c.RememberDigest(a, provider.CachedDigest{Version: "v-new"})
	d, ok := c.Digest(a)
	assert.True(t, ok)
	assert.Equal(t, provider.Version("v-new"), d.Version)
	_, ok = c.Digest(provider.FileID{Dev: 1, Ino: 101})
	assert.False(t, ok)
}

func TestCodes_AreUniqueAndPrefixed(t *testing.T) {
	seen := map[provider.Code]bool{}
	for _, c := range provider.Codes {
		assert.False(t, seen[c], "duplicate %s", c)
		seen[c] = true
		assert.Regexp(t, `^FS_[A-Z_]+$`, string(c))
	}
	assert.Len(t, provider.Codes, 18)
}
