package control

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/version"
)

// TestAuditRecovered_AtServerStart: a commit journal a killed daemon left
// while staging is settled when the branches open, and the server audits
// it when it starts.
func TestAuditRecovered_AtServerStart(t *testing.T) {
	state := t.TempDir()
	jdir := filepath.Join(state, "branches.journal")
	require.NoError(t, os.MkdirAll(jdir, 0o700))
	j, err := json.Marshal(map[string]any{"id": "j1", "label": "branch feat", "state": "staging",
		"staging": branch.StagingDir + "/j1", "branch": "feat",
		"steps": []map[string]any{{"op": "write", "path": "new.txt", "base": string(branch.BaseAbsent), "new": "v9"}}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(jdir, "j1.json"), j, 0o600))

	env := newMountEnv(t, state)
	res, err := env.client(t).Log(context.Background(), LogParams{Path: "new.txt"})
	require.NoError(t, err)
	require.Len(t, res.Entries, 1)
	assert.Equal(t, "branch feat commit, undone at daemon start", res.Entries[0].Detail)
	assert.Equal(t, provider.CodeAborted, res.Entries[0].Refused)
	assert.Contains(t, res.Entries[0].Reason, "stopped while staging")
	_, err = os.Stat(filepath.Join(jdir, "j1.json"))
	assert.True(t, os.IsNotExist(err), "the journal is settled")
}

// TestAuditRecovered_AppliedJournalIsFinishedAndAnUndoneAtomicPatchReported:
// a journal marked applied is finished at start whatever changed while the
// daemon was down: its branch goes, the files it recorded before the kill
// are not recorded twice, and the change made on top is recorded as an
// out-of-band change. An atomic patch undone at start (a file it had
// written was changed while down) says so in the audit, naming the file.
func TestAuditRecovered_AppliedJournalIsFinishedAndAnUndoneAtomicPatchReported(t *testing.T) {
	state := t.TempDir()
	jdir := filepath.Join(state, "branches.journal")
	bdir := filepath.Join(state, "branches", "feat")
	require.NoError(t, os.MkdirAll(jdir, 0o700))
	require.NoError(t, os.MkdirAll(bdir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(bdir, "branch.json"), []byte(`{"name":"feat"}`), 0o600))
	committed := version.OfBytes([]byte("commit\n"))
	put := func(name string, j map[string]any) {
		data, err := json.Marshal(j)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(jdir, name), data, 0o600))
	}
	put("j1.json", map[string]any{"id": "j1", "label": "branch feat", "state": "applied", "audited": true,
		"staging": branch.StagingDir + "/j1", "branch": "feat",
		"steps": []map[string]any{{"op": "write", "path": "a.txt", "base": string(branch.BaseAbsent), "new": string(committed), "staged": "n0"}}})
	put("j2.json", map[string]any{"id": "j2", "label": "the atomic patch", "state": "applying",
		"staging": branch.StagingDir + "/j2",
		"steps":   []map[string]any{{"op": "write", "path": "p.txt", "base": string(branch.BaseAbsent), "new": string(committed), "staged": "n0"}}})

	env := newMountEnv(t, state, func(ws string) {
		require.NoError(t, os.WriteFile(filepath.Join(ws, "a.txt"), []byte("edited while down\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(ws, "p.txt"), []byte("edited while down\n"), 0o644))
	})
	c := env.client(t)
	ctx := context.Background()
	res, err := c.Log(ctx, LogParams{Path: "a.txt"})
	require.NoError(t, err)
	require.Len(t, res.Entries, 1, "the commit's own entry was written by the killed daemon: only the later change")
	e := res.Entries[0]
	assert.Equal(t, policy.ChannelExternal, e.Channel)
	assert.Equal(t, policy.OpWrite, e.Op)
	assert.Equal(t, version.OfBytes([]byte("edited while down\n")), e.After)
	assert.Empty(t, e.Refused)
	list, err := c.BranchList(ctx)
	require.NoError(t, err)
	assert.Empty(t, list.Branches, "the finished commit's branch is gone")

	res, err = c.Log(ctx, LogParams{Path: "p.txt"})
	require.NoError(t, err)
	require.Len(t, res.Entries, 1)
	assert.Equal(t, "atomic patch, undone at daemon start", res.Entries[0].Detail)
	assert.Equal(t, provider.CodeAborted, res.Entries[0].Refused)
	assert.Contains(t, res.Entries[0].Reason, "p.txt changed while the daemon was down")
	b, err := os.ReadFile(filepath.Join(env.root, "p.txt"))
	require.NoError(t, err)
	assert.Equal(t, "edited while down\n", string(b), "the change made while down is kept")
	des, err := os.ReadDir(jdir)
	require.NoError(t, err)
	for _, de := range des {
		assert.NotContains(t, de.Name(), ".json", "every journal is settled")
	}
}
