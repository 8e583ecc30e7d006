package control

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/local"
	"github.com/dshmount/dshmount/internal/viewrules"
)

// newBranchEnv is a server over a view (hide "secret*", read-only "ro/")
// with branches kept in a temp state directory.
func newBranchEnv(t *testing.T) *testEnv {
	t.Helper()
	env := newTestEnv(t, func(cfg *testConfig) {
		lfs, ok := cfg.Svc.Engine.FS().(*local.FS)
		require.True(t, ok)
		view, err := viewrules.New(lfs, viewrules.Rules{Hide: []string{"secret*", "/" + branch.StagingDir}, ReadOnly: []string{"/ro"}})
		require.NoError(t, err)
		cfg.Svc.Engine, cfg.Svc.View = policy.NewEngine(cfg.Svc.Engine.Store(), view), view
		mgr, err := branch.Open(t.TempDir(), lfs, branch.Options{Logger: quietLogger(), Upper: openBranchUpper})
		require.NoError(t, err)
		t.Cleanup(func() { _ = mgr.Close() })
		cfg.Svc.Branches, cfg.Svc.Journal = mgr, mgr.Journal()
	})
	return env
}

func rpcErr(t *testing.T, err error) *RPCError {
	t.Helper()
	var re *RPCError
	require.ErrorAs(t, err, &re)
	return re
}

func TestBranch_SocketIsolationAndObservationsPerBranch(t *testing.T) {
	env := newBranchEnv(t)
	env.file(t, "a.txt", "a0\n")
	ctx := context.Background()
	c := env.client(t)
	_, err := c.BranchCreate(ctx, BranchCreateParams{Name: "feat"})
	require.NoError(t, err)

	// Read in the workspace, then edit in the branch: the branch's path is
	// another target, not observed yet.
	_, err = c.Read(ctx, ReadParams{Path: "a.txt"})
	require.NoError(t, err)
	_, err = c.Edit(ctx, EditParams{Path: "a.txt", OldString: "a0", NewString: "a1", Branch: "feat"})
	assert.Equal(t, provider.CodeNotObserved, rpcErr(t, err).Code)

	r, err := c.Read(ctx, ReadParams{Path: "a.txt", Branch: "feat"})
	require.NoError(t, err)
	assert.Equal(t, "a0", r.Lines[0].Text)
	_, err = c.Edit(ctx, EditParams{Path: "a.txt", OldString: "a0", NewString: "a1", Branch: "feat"})
	require.NoError(t, err)
	_, err = c.Write(ctx, WriteParams{Path: "n/new.txt", Content: "new\n", Branch: "feat"})
	require.NoError(t, err)

	got, _ := env.content(t, "a.txt")
	assert.Equal(t, "a0\n", got, "workspace untouched")
	_, ok := env.content(t, "n/new.txt")
	assert.False(t, ok)
	st, err := c.Stat(ctx, StatParams{Path: "n/new.txt", Branch: "feat"})
	require.NoError(t, err)
	assert.True(t, st.Exists)
	ls, err := c.List(ctx, ListParams{Path: ".", Branch: "feat"})
	require.NoError(t, err)
	var names []string
	for _, e := range ls.Entries {
		names = append(names, e.Name)
	}
	assert.Equal(t, []string{"a.txt", "n"}, names)

	// The workspace observation still guards the workspace: the file is
	// unchanged there, so editing it in the workspace works.
	_, err = c.Edit(ctx, EditParams{Path: "a.txt", OldString: "a0", NewString: "w1"})
	require.NoError(t, err)

	list, err := c.BranchList(ctx)
	require.NoError(t, err)
	require.Len(t, list.Branches, 1)
	assert.Equal(t, "feat", list.Branches[0].Name)
	assert.Equal(t, 2, list.Branches[0].Changed)

	// Committing now conflicts: the workspace changed a.txt.
	_, err = c.BranchCommit(ctx, BranchCommitParams{Name: "feat"})
	re := rpcErr(t, err)
	assert.Equal(t, provider.CodeStaleVersion, re.Code)
	assert.Equal(t, []string{"a.txt"}, re.Conflicts)
	assert.True(t, errors.Is(err, provider.ErrStaleVersion))
}

func TestBranch_SessionDefaultAndCommitAudit(t *testing.T) {
	env := newBranchEnv(t)
	env.file(t, "a.txt", "a0\n")
	ctx := context.Background()
	c := env.client(t)
	_, err := c.BranchCreate(ctx, BranchCreateParams{Name: "s"})
	require.NoError(t, err)
	sess, err := c.OpenSessionWith(ctx, SessionOpenParams{Name: "agent", Branch: "s"})
	require.NoError(t, err)
	_, err = c.Read(ctx, ReadParams{Path: "a.txt", Session: sess})
	require.NoError(t, err)
	_, err = c.Write(ctx, WriteParams{Path: "a.txt", Content: "a1\n", Session: sess})
	require.NoError(t, err)
	got, _ := env.content(t, "a.txt")
	assert.Equal(t, "a0\n", got, "the session's writes go to its branch")

	d, err := c.BranchDiff(ctx, BranchDiffParams{Name: "s"})
	require.NoError(t, err)
	assert.Equal(t, []BranchFile{{Path: "a.txt", Status: "modified"}}, d.Files)
	assert.Contains(t, d.Diff, "-a0\n+a1\n")
	assert.Nil(t, d.Next)

	res, err := c.BranchCommit(ctx, BranchCommitParams{Name: "s", Keep: true, Session: string(sess)})
	require.NoError(t, err)
	require.Len(t, res.Files, 1)
	got, _ = env.content(t, "a.txt")
	assert.Equal(t, "a1\n", got)
	lg, err := c.Log(ctx, LogParams{Path: "a.txt", Limit: 5})
	require.NoError(t, err)
	require.NotEmpty(t, lg.Entries)
	assert.Equal(t, "branch s commit", lg.Entries[0].Detail)
	assert.Equal(t, sess, lg.Entries[0].Session)

	// The committing session observed the new workspace bytes: it may edit
	// the workspace file without reading it again.
	_, err = c.Edit(ctx, EditParams{Path: "a.txt", OldString: "a1", NewString: "a2", Branch: "", Session: sess})
	require.NoError(t, err, "still in branch s (kept), which now shows a1")
	got, _ = env.content(t, "a.txt")
	assert.Equal(t, "a1\n", got)
}

func TestBranch_HideAndReadOnlyApplyInBranches(t *testing.T) {
	env := newBranchEnv(t)
	env.file(t, "secret.key", "k\n")
	env.file(t, "ro/locked.txt", "l\n")
	ctx := context.Background()
	c := env.client(t)
	_, err := c.BranchCreate(ctx, BranchCreateParams{Name: "h"})
	require.NoError(t, err)
	_, err = c.Read(ctx, ReadParams{Path: "secret.key", Branch: "h"})
	assert.Equal(t, provider.CodeSandboxDenied, rpcErr(t, err).Code)
	_, err = c.Write(ctx, WriteParams{Path: "secret2.key", Content: "x", Branch: "h", Unconditional: true})
	assert.Equal(t, provider.CodeSandboxDenied, rpcErr(t, err).Code)
	_, err = c.Write(ctx, WriteParams{Path: "ro/locked.txt", Content: "x", Branch: "h", Unconditional: true})
	assert.Equal(t, provider.CodeSandboxDenied, rpcErr(t, err).Code)
	_, err = c.Read(ctx, ReadParams{Path: "ro/locked.txt", Branch: "h"})
	require.NoError(t, err, "read-only paths stay readable")
	ls, err := c.List(ctx, ListParams{Path: ".", Branch: "h"})
	require.NoError(t, err)
	for _, e := range ls.Entries {
		assert.NotEqual(t, "secret.key", e.Name)
	}
	// Atomic patches respect read-only paths too.
	_, err = c.Patch(ctx, PatchParams{Atomic: true, Unconditional: true,
		Patch: "*** Begin Patch\n*** Add File: ro/new.txt\n+x\n*** End Patch\n"})
	assert.Equal(t, provider.CodeSandboxDenied, rpcErr(t, err).Code)
}

func TestBranch_BadRequests(t *testing.T) {
	env := newBranchEnv(t)
	ctx := context.Background()
	c := env.client(t)
	_, err := c.BranchCreate(ctx, BranchCreateParams{Name: "../x"})
	assert.Equal(t, provider.CodeInvalidArgument, rpcErr(t, err).Code)
	_, err = c.BranchCreate(ctx, BranchCreateParams{Name: "m", Mount: "/tmp/m"})
	re := rpcErr(t, err)
	assert.Equal(t, CodeUnavailable, re.RPCCode, "a daemon without a mounter refuses mounts")
	assert.Contains(t, re.Message, "cannot serve branch mounts")
	_, err = c.BranchCreate(ctx, BranchCreateParams{Name: "d"})
	require.NoError(t, err)
	_, err = c.BranchCreate(ctx, BranchCreateParams{Name: "d"})
	assert.Contains(t, rpcErr(t, err).Message, "already exists")
	_, err = c.Read(ctx, ReadParams{Path: "a", Branch: "nope"})
	assert.Equal(t, provider.CodeNotFound, rpcErr(t, err).Code)
	_, err = c.OpenSessionWith(ctx, SessionOpenParams{Branch: "nope"})
	assert.Equal(t, provider.CodeNotFound, rpcErr(t, err).Code)
	for _, p := range []string{"../outside.txt", "/etc/passwd", "a/../../x"} {
		_, err = c.Write(ctx, WriteParams{Path: p, Content: "x", Branch: "d", Unconditional: true})
		assert.Equal(t, provider.CodeSandboxDenied, rpcErr(t, err).Code, p)
		_, err = c.Read(ctx, ReadParams{Path: p, Branch: "d"})
		assert.Equal(t, provider.CodeSandboxDenied, rpcErr(t, err).Code, p)
	}
	require.NoError(t, c.BranchDiscard(ctx, "d"))
	err = c.BranchDiscard(ctx, "d")
	assert.Equal(t, provider.CodeNotFound, rpcErr(t, err).Code)
}

func TestBranch_ConflictWithOtherBranchAndSocketWrite(t *testing.T) {
	env := newBranchEnv(t)
	env.file(t, "f.txt", "0\n")
	env.file(t, "g.txt", "0\n")
	ctx := context.Background()
	c := env.client(t)
	for _, n := range []string{"one", "two", "three"} {
		_, err := c.BranchCreate(ctx, BranchCreateParams{Name: n})
		require.NoError(t, err)
		_, err = c.Write(ctx, WriteParams{Path: "f.txt", Content: n + "\n", Branch: n, Unconditional: true})
		require.NoError(t, err)
	}
	_, err := c.Write(ctx, WriteParams{Path: "g.txt", Content: "three\n", Branch: "three", Unconditional: true})
	require.NoError(t, err)
	_, err = c.BranchCommit(ctx, BranchCommitParams{Name: "one"})
	require.NoError(t, err)
	_, err = c.BranchCommit(ctx, BranchCommitParams{Name: "two"})
	assert.Equal(t, []string{"f.txt"}, rpcErr(t, err).Conflicts, "another branch committed first")
	// A socket write to the workspace conflicts the same way.
	_, err = c.Write(ctx, WriteParams{Path: "g.txt", Content: "socket\n", Unconditional: true})
	require.NoError(t, err)
	_, err = c.BranchCommit(ctx, BranchCommitParams{Name: "three"})
	assert.Equal(t, []string{"f.txt", "g.txt"}, rpcErr(t, err).Conflicts)
	got, _ := env.content(t, "g.txt")
	assert.Equal(t, "socket\n", got)
}

func TestPatch_AtomicAllOrNothing(t *testing.T) {
	env := newBranchEnv(t)
	env.file(t, "a.txt", "a\r\nb\r\n")
	env.file(t, "del.txt", "d\n")
	env.file(t, "mv.txt", "m\n")
	ctx := context.Background()
	c := env.client(t)
	for _, p := range []string{"a.txt", "del.txt", "mv.txt"} {
		_, err := c.Read(ctx, ReadParams{Path: p})
		require.NoError(t, err)
	}
	text := "*** Begin Patch\n*** Update File: a.txt\n@@\n a\n-b\n+B\n*** Delete File: del.txt\n" +
		"*** Add File: dir/new.txt\n+new\n*** Update File: mv.txt\n*** Move to: moved.txt\n@@\n-m\n+M\n*** End Patch\n"
	res, err := c.Patch(ctx, PatchParams{Patch: text, Atomic: true})
	require.NoError(t, err)
	assert.True(t, res.Complete)
	for _, op := range res.Operations {
		assert.Equal(t, PatchApplied, op.Status)
	}
	got, _ := env.content(t, "a.txt")
	assert.Equal(t, "a\r\nB\r\n", got, "line endings kept")
	_, ok := env.content(t, "del.txt")
	assert.False(t, ok)
	got, _ = env.content(t, "dir/new.txt")
	assert.Equal(t, "new\n", got)
	got, _ = env.content(t, "moved.txt")
	assert.Equal(t, "M\n", got)
	_, ok = env.content(t, "mv.txt")
	assert.False(t, ok)

	// Stale anywhere: nothing applied.
	env.file(t, "x.txt", "x\n")
	env.file(t, "y.txt", "y\n")
	for _, p := range []string{"x.txt", "y.txt"} {
		_, err := c.Read(ctx, ReadParams{Path: p})
		require.NoError(t, err)
	}
	env.file(t, "y.txt", "changed\n")
	_, err = c.Patch(ctx, PatchParams{Atomic: true,
		Patch: "*** Begin Patch\n*** Update File: x.txt\n@@\n-x\n+X\n*** Update File: y.txt\n@@\n-y\n+Y\n*** End Patch\n"})
	assert.Equal(t, provider.CodeStaleVersion, rpcErr(t, err).Code)
	got, _ = env.content(t, "x.txt")
	assert.Equal(t, "x\n", got)
}

func TestPatch_Atomic200Files(t *testing.T) {
	env := newBranchEnv(t)
	var sb strings.Builder
	sb.WriteString("*** Begin Patch\n")
	for i := range 200 {
		env.file(t, fmt.Sprintf("f%03d.txt", i), "old\n")
		fmt.Fprintf(&sb, "*** Update File: f%03d.txt\n@@\n-old\n+new %d\n", i, i)
	}
	sb.WriteString("*** End Patch\n")
	ctx := context.Background()
	c := env.client(t)
	res, err := c.Patch(ctx, PatchParams{Patch: sb.String(), Atomic: true, Unconditional: true})
	require.NoError(t, err)
	assert.Len(t, res.Operations, 200)
	for i := range 200 {
		got, _ := env.content(t, fmt.Sprintf("f%03d.txt", i))
		assert.Equal(t, fmt.Sprintf("new %d\n", i), got)
	}
	_, err = os.Stat(filepath.Join(env.root, branch.StagingDir))
	assert.True(t, os.IsNotExist(err))
}

func TestBranch_LogNamesTheBranch(t *testing.T) {
	env := newBranchEnv(t)
	ctx := context.Background()
	c := env.client(t)
	_, err := c.BranchCreate(ctx, BranchCreateParams{Name: "lg"})
	require.NoError(t, err)
	_, err = c.Write(ctx, WriteParams{Path: "x.txt", Content: "b\n", Branch: "lg"})
	require.NoError(t, err)
	_, err = c.Write(ctx, WriteParams{Path: "x.txt", Content: "w\n"})
	require.NoError(t, err)
	lg, err := c.Log(ctx, LogParams{Path: "x.txt"})
	require.NoError(t, err)
	require.Len(t, lg.Entries, 2)
	assert.Equal(t, "", lg.Entries[0].Branch, "the workspace write")
	assert.Equal(t, "lg", lg.Entries[1].Branch, "the branch write")
}

// TestBranch_CommitRespectsTheViewOfNow: a branch's change to a path the
// view has since made read-only (a restart with stricter rules) refuses
// the whole commit.
func TestBranch_CommitRespectsTheViewOfNow(t *testing.T) {
	env := newBranchEnv(t)
	env.file(t, "ro/x.txt", "x\n")
	mgr := env.branches
	b, err := mgr.Create("late")
	require.NoError(t, err)
	ctx := context.Background()
	// Written below the view (as before a restart that added --read-only /ro).
	tg, err := b.Resolve(ctx, "ro/x.txt", provider.ResolveOptions{})
	require.NoError(t, err)
	_, err = b.WriteText(ctx, tg, "changed\n", nil)
	require.NoError(t, err)
	tg, err = b.Resolve(ctx, "ok.txt", provider.ResolveOptions{})
	require.NoError(t, err)
	_, err = b.WriteText(ctx, tg, "fine\n", nil)
	require.NoError(t, err)
	c := env.client(t)
	_, err = c.BranchCommit(ctx, BranchCommitParams{Name: "late"})
	re := rpcErr(t, err)
	assert.Equal(t, provider.CodeSandboxDenied, re.Code)
	assert.Contains(t, re.Message, "ro/x.txt is read-only")
	got, _ := env.content(t, "ro/x.txt")
	assert.Equal(t, "x\n", got)
	_, ok := env.content(t, "ok.txt")
	assert.False(t, ok, "nothing applied")
}

// openBranchUpper opens a branch's upper directory as cmd/dshmount serve
// does.
func openBranchUpper(dir string) (branch.Upper, error) {
	return local.New(dir, local.Options{Durability: local.DurabilityNone})
}
