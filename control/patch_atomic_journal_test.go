package control

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/journal"
	"github.com/dshmount/dshmount/internal/provider/local"
)

// TestAtomicPatch_NeedsTheJournalNotTheBranches pins that an atomic patch
// goes through the commit journal alone: a daemon with a journal and no
// branches applies it; one without a journal refuses it (unavailable).
func TestAtomicPatch_NeedsTheJournalNotTheBranches(t *testing.T) {
	env := newTestEnv(t, func(cfg *testConfig) {
		lfs, ok := cfg.Svc.Engine.FS().(*local.FS)
		require.True(t, ok)
		jr, err := journal.Open(lfs, journal.Options{Dir: t.TempDir(), Logger: quietLogger()})
		require.NoError(t, err)
		require.NoError(t, jr.Recover())
		cfg.Svc.Journal = jr
	})
	require.Nil(t, env.branches, "no branches")
	env.file(t, "a.txt", "a\n")
	ctx := context.Background()
	c := env.client(t)
	_, err := c.Read(ctx, ReadParams{Path: "a.txt"})
	require.NoError(t, err)
	res, err := c.Patch(ctx, PatchParams{Atomic: true,
		Patch: "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+A\n*** Add File: b.txt\n+b\n*** End Patch\n"})
	require.NoError(t, err)
	require.True(t, res.Complete)
	got, _ := env.content(t, "a.txt")
	require.Equal(t, "A\n", got)
	got, _ = env.content(t, "b.txt")
	require.Equal(t, "b\n", got)

	bare := newTestEnv(t)
	bare.file(t, "a.txt", "a\n")
	bc := bare.client(t)
	_, err = bc.Read(ctx, ReadParams{Path: "a.txt"})
	require.NoError(t, err)
	_, err = bc.Patch(ctx, PatchParams{Atomic: true, Patch: "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+A\n*** End Patch\n"})
	require.Equal(t, CodeUnavailable, rpcErr(t, err).RPCCode)
	got, _ = bare.content(t, "a.txt")
	require.Equal(t, "a\n", got, "nothing applied")
}
