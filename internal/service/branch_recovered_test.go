package service

import (
	"context"
	"os"
	"testing"

	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/local"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAuditRecovered_FinishedAndUndoneCommitsNameTheBranch(t *testing.T) {
	s, root := newTestService(t)
	lfs, err := local.New(root, local.Options{})
	require.NoError(t, err)
	defer lfs.Close()
	s.auditRecovered([]branch.Recovered{
		{Label: "branch big", Branch: "big", Forward: true, Files: []branch.AppliedFile{
			{Target: lfs.TargetForRel("a.txt"), Before: "v1", After: "v2"},
			{Target: lfs.TargetForRel("gone.txt"), Before: "v3", Deleted: true},
		}},
		{Label: "branch small", Branch: "small", Reason: "a path it changes was changed", Files: []branch.AppliedFile{
			{Target: lfs.TargetForRel("b.txt"), After: "v4"},
		}},
		{Label: "the atomic patch", Forward: true, Files: []branch.AppliedFile{{Target: lfs.TargetForRel("p.txt"), After: "v5"}}},
	})
	byPath := map[string]LogEntry{}
	got, err := s.AuditLog(context.Background(), s.NewCaller(CallerConfig{UID: uint32(os.Getuid())}), LogParams{Limit: 20})
	require.NoError(t, err)
	for _, e := range got.Entries {
		byPath[e.Path] = e
	}
	a := byPath["a.txt"]
	assert.Equal(t, "branch big commit, finished at daemon start", a.Detail)
	assert.Equal(t, policy.OpWrite, a.Op)
	assert.Empty(t, a.Refused)
	assert.Equal(t, provider.Version("v2"), a.After)
	g := byPath["gone.txt"]
	assert.Equal(t, policy.OpDelete, g.Op)
	assert.Equal(t, "branch big commit, finished at daemon start", g.Detail)
	b := byPath["b.txt"]
	assert.Equal(t, "branch small commit, undone at daemon start", b.Detail)
	assert.Equal(t, provider.CodeAborted, b.Refused)
	assert.Equal(t, "a path it changes was changed", b.Reason)
	assert.Equal(t, "atomic patch, finished at daemon start", byPath["p.txt"].Detail)
}
