package service

import (
	"testing"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBranchMount_OtherUsersDirectoryRefused(t *testing.T) {
	s, _ := newTestService(t)
	dir := t.TempDir()
	_, err := s.checkMountDir(4242, dir, "")
	var pe *provider.Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, provider.CodePermissionDenied, pe.Code)
	got, err := s.checkMountDir(0, dir, "")
	require.NoError(t, err, "root may mount on any directory")
	assert.Equal(t, dir, got)
}
