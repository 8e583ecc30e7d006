package control

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

// readAll reads paths with c so its session observes them.
func readAll(t *testing.T, c *Client, paths ...string) {
	t.Helper()
	for _, p := range paths {
		_, err := c.Read(context.Background(), ReadParams{Path: p})
		require.NoError(t, err)
	}
}

func TestPatch_PreflightMismatchInOp2WritesNothing(t *testing.T) {
	env := newTestEnv(t)
	env.file(t, "b.txt", "one\ntwo\n")
	c := env.client(t)
	readAll(t, c, "b.txt")
	_, err := c.Patch(context.Background(), PatchParams{Patch: `*** Begin Patch
*** Add File: new/a.txt
+hello
*** Update File: b.txt
@@
-three
+four
*** End Patch`})
	re := requireFS(t, err, provider.CodePatchMismatch)
	assert.Contains(t, re.Message, "operation 2 (update b.txt)")
	assert.Contains(t, re.Message, "nothing was applied")
	_, exists := env.content(t, "new/a.txt")
	assert.False(t, exists, "operation 1 was not applied")
	got, _ := env.content(t, "b.txt")
	assert.Equal(t, "one\ntwo\n", got)
}

func TestPatch_SimulatesEarlierOperations(t *testing.T) {
	env := newTestEnv(t)
	c := env.client(t)
	res, err := c.Patch(context.Background(), PatchParams{Patch: `*** Begin Patch
*** Add File: deep/dir/a.txt
+alpha
+beta
*** Update File: deep/dir/a.txt
@@
 alpha
-beta
+gamma
*** End Patch`})
	require.NoError(t, err)
	assert.True(t, res.Complete)
	require.Len(t, res.Operations, 2)
	for _, op := range res.Operations {
		assert.Equal(t, PatchApplied, op.Status)
		assert.NotEmpty(t, op.Version)
		assert.Equal(t, "deep/dir/a.txt", op.Path)
	}
	got, _ := env.content(t, "deep/dir/a.txt")
	assert.Equal(t, "alpha\ngamma\n", got)
}

func TestPatch_CommitStopsWhenALaterGuardFails(t *testing.T) {
	env := newTestEnv(t)
	env.file(t, "a.txt", "a\n")
	env.file(t, "b.txt", "b\n")
	env.file(t, "c.txt", "c\n")
	c := env.client(t)
	readAll(t, c, "a.txt", "b.txt", "c.txt")
	env.hooks.BeforeCommitOp = func(i int) {
		if i == 1 { // someone else changes b.txt between preflight and its commit
			require.NoError(t, os.WriteFile(filepath.Join(env.root, "b.txt"), []byte("b changed elsewhere\n"), 0o644))
		}
	}
	res, err := c.Patch(context.Background(), PatchParams{Patch: `*** Begin Patch
*** Update File: a.txt
-a
+A
*** Update File: b.txt
-b
+B
*** Delete File: c.txt
*** End Patch`})
	require.NoError(t, err, "a partial commit is a result, not an error")
	assert.False(t, res.Complete)
	require.Len(t, res.Operations, 3)
	assert.Equal(t, PatchApplied, res.Operations[0].Status)
	assert.Equal(t, PatchFailed, res.Operations[1].Status)
	require.NotNil(t, res.Operations[1].Error)
	assert.Equal(t, provider.CodeStaleVersion, res.Operations[1].Error.Code)
	assert.Equal(t, PatchNotRun, res.Operations[2].Status)

	a, _ := env.content(t, "a.txt")
	b, _ := env.content(t, "b.txt")
	_, cExists := env.content(t, "c.txt")
	assert.Equal(t, "A\n", a)
	assert.Equal(t, "b changed elsewhere\n", b)
	assert.True(t, cExists, "operations after the failure do not run")
}

func TestPatch_PreflightRefusals(t *testing.T) {
	tests := []struct {
		name  string
		read  bool
		patch string
		code  provider.Code
	}{
		{"add over an unseen file", false, "*** Begin Patch\n*** Add File: x.txt\n+y\n*** End Patch", provider.CodeNotObserved},
		{"update of an unseen file", false, "*** Begin Patch\n*** Update File: x.txt\n-x\n+y\n*** End Patch", provider.CodeNotObserved},
		{"delete of an unseen file", false, "*** Begin Patch\n*** Delete File: x.txt\n*** End Patch", provider.CodeNotObserved},
		{"move onto itself", true, "*** Begin Patch\n*** Update File: x.txt\n*** Move to: ./x.txt\n-x\n+y\n*** End Patch", provider.CodeSameTarget},
		{"update after delete", true, "*** Begin Patch\n*** Delete File: x.txt\n*** Update File: x.txt\n-x\n+y\n*** End Patch", provider.CodeNotFound},
		{"update of a missing file", false, "*** Begin Patch\n*** Add File: y.txt\n+y\n*** Update File: zzz.txt\n-x\n+y\n*** End Patch", provider.CodeNotObserved},
		{"syntax error", false, "*** Begin Patch\n*** Frobnicate: x.txt\n*** End Patch", provider.CodeInvalidArgument},
		{"empty patch", false, "*** Begin Patch\n*** End Patch", provider.CodeInvalidArgument},
		{"outside the workspace", false, "*** Begin Patch\n*** Add File: ../escape.txt\n+y\n*** End Patch", provider.CodeSandboxDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newTestEnv(t)
			env.file(t, "x.txt", "x\n")
			c := env.client(t)
			if tt.read {
				readAll(t, c, "x.txt")
			}
			_, err := c.Patch(context.Background(), PatchParams{Patch: tt.patch})
			re := requireFS(t, err, tt.code)
			if tt.name == "empty patch" {
				assert.Contains(t, re.Message, "no files were modified")
			}
			if tt.name == "syntax error" {
				assert.Contains(t, re.Message, "invalid patch at line")
			}
			got, _ := env.content(t, "x.txt")
			assert.Equal(t, "x\n", got, "nothing was applied")
			_, yExists := env.content(t, "y.txt")
			assert.False(t, yExists, "nothing was applied")
		})
	}
}

func TestPatch_MoveWithHunksAndDelete(t *testing.T) {
	env := newTestEnv(t)
	env.file(t, "old.txt", "keep\nchange\n")
	env.file(t, "rm.txt", "bye\n")
	c := env.client(t)
	readAll(t, c, "old.txt", "rm.txt")
	res, err := c.Patch(context.Background(), PatchParams{Patch: `*** Begin Patch
*** Update File: old.txt
*** Move to: moved/new.txt
@@
 keep
-change
+changed
*** Delete File: rm.txt
*** End Patch`})
	require.NoError(t, err)
	assert.True(t, res.Complete)
	assert.Equal(t, "moved/new.txt", res.Operations[0].MoveTo)
	got, ok := env.content(t, "moved/new.txt")
	require.True(t, ok)
	assert.Equal(t, "keep\nchanged\n", got)
	_, ok = env.content(t, "old.txt")
	assert.False(t, ok)
	_, ok = env.content(t, "rm.txt")
	assert.False(t, ok)
}

func TestPatch_StaleAtPreflightAppliesNothing(t *testing.T) {
	env := newTestEnv(t)
	env.file(t, "a.txt", "a\n")
	env.file(t, "b.txt", "b\n")
	c := env.client(t)
	readAll(t, c, "a.txt", "b.txt")
	env.file(t, "b.txt", "b2\n") // changed behind the session's back
	_, err := c.Patch(context.Background(), PatchParams{Patch: "*** Begin Patch\n*** Update File: a.txt\n-a\n+A\n*** Update File: b.txt\n-b2\n+B\n*** End Patch"})
	requireFS(t, err, provider.CodeStaleVersion)
	a, _ := env.content(t, "a.txt")
	assert.Equal(t, "a\n", a)
}

func TestPatch_CRLFKeptAndUnconditional(t *testing.T) {
	env := newTestEnv(t)
	env.file(t, "w.txt", "one\r\ntwo\r\n")
	c := env.client(t)
	res, err := c.Patch(context.Background(), PatchParams{Unconditional: true,
		Patch: "*** Begin Patch\n*** Update File: w.txt\n one\n-two\n+2\n*** End Patch"})
	require.NoError(t, err)
	assert.True(t, res.Complete)
	got, _ := env.content(t, "w.txt")
	assert.Equal(t, "one\r\n2\r\n", got)
}
