package branch

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSetMount_RecordedAcrossRestartAndCommitWithKeep(t *testing.T) {
	e := newEnv(t)
	b, err := e.m.Create("feat")
	require.NoError(t, err)
	assert.Empty(t, b.Mount())
	created := b.Created()

	require.NoError(t, b.SetMount("/mnt/feat"))
	assert.Equal(t, "/mnt/feat", b.Mount())
	des, err := os.ReadDir(filepath.Join(e.state, "branches", "feat"))
	require.NoError(t, err)
	for _, de := range des {
		assert.False(t, strings.HasPrefix(de.Name(), ".tmp-"), "no temp file left: %s", de.Name())
	}

	e.restart()
	b, err = e.m.Get("feat")
	require.NoError(t, err)
	assert.Equal(t, "/mnt/feat", b.Mount(), "the mount directory survives a restart")
	assert.True(t, created.Equal(b.Created()), "the creation time is kept")

	// A commit that keeps the branch keeps its mount.
	e.put("a.txt", "a\n")
	_, err = e.m.Commit(context.Background(), "feat", true, nil, Hooks{})
	require.NoError(t, err)
	e.restart()
	b, err = e.m.Get("feat")
	require.NoError(t, err)
	assert.Equal(t, "/mnt/feat", b.Mount())

	other, err := e.m.Create("other")
	require.NoError(t, err)
	require.NoError(t, other.SetMount("/mnt/other"))
	_, err = e.m.Create("plain")
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"/mnt/feat", "/mnt/other"}, RecordedMounts(e.state))

	require.NoError(t, b.SetMount(""))
	e.restart()
	b, err = e.m.Get("feat")
	require.NoError(t, err)
	assert.Empty(t, b.Mount(), "forgotten")
}

func TestSetMount_GoneBranchRefused(t *testing.T) {
	e := newEnv(t)
	b, err := e.m.Create("gone")
	require.NoError(t, err)
	require.NoError(t, e.m.Discard("gone"))
	err = b.SetMount("/mnt/x")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no longer exists")
}

func TestCreateFor_OwnerKeptAcrossSetMountAndRestart(t *testing.T) {
	e := newEnv(t)
	b, err := e.m.CreateFor("theirs", 65534)
	require.NoError(t, err)
	assert.Equal(t, uint32(65534), b.Owner())
	require.NoError(t, b.SetMount("/mnt/theirs"))
	_, err = e.m.Create("roots")
	require.NoError(t, err)
	e.restart()
	b, err = e.m.Get("theirs")
	require.NoError(t, err)
	assert.Equal(t, uint32(65534), b.Owner(), "the owner survives a mount record and a restart")
	owners := map[string]uint32{}
	for _, i := range e.m.List() {
		owners[i.Name] = i.Owner
	}
	assert.Equal(t, map[string]uint32{"theirs": 65534, "roots": 0}, owners)
}
