package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
)

// TestBranchOwner_AnotherUIDCannotTouchRootsBranch is item 2 of issue 28:
// a branch belongs to the uid that created it, as a session does. Uid
// 65534 neither sees root's branch in branch.list nor diffs, commits,
// discards, mounts, unmounts, reads in it or opens a session on it.
func TestBranchOwner_AnotherUIDCannotTouchRootsBranch(t *testing.T) {
	d := ownerDaemon(t)
	ctx := testCtx(t)
	require.NoError(t, os.WriteFile(filepath.Join(d.Src, "f.txt"), []byte("root's\n"), 0o644))
	bm := filepath.Join(filepath.Dir(d.Src), "rootb")
	require.NoError(t, os.Mkdir(bm, 0o755))
	t.Cleanup(func() {
		if mounted(bm) {
			_ = syscall.Unmount(bm, syscall.MNT_DETACH)
		}
	})
	_, err := d.Client.BranchCreate(ctx, control.BranchCreateParams{Name: "rootb", Mount: bm})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(bm, "f.txt"), []byte("in root's branch\n"), 0o644))
	other := filepath.Join(filepath.Dir(d.Src), "other")
	require.NoError(t, os.Mkdir(other, 0o777))
	require.NoError(t, os.Chmod(other, 0o777))

	name := jsonString("rootb")
	out := peer(t, d.Socket,
		string(rpcLine(1, control.MethodBranchList, `{}`)),
		string(rpcLine(2, control.MethodBranchDiff, `{"name":`+name+`}`)),
		string(rpcLine(3, control.MethodBranchCommit, `{"name":`+name+`}`)),
		string(rpcLine(4, control.MethodBranchUnmount, `{"name":`+name+`}`)),
		string(rpcLine(5, control.MethodBranchDiscard, `{"name":`+name+`}`)),
		string(rpcLine(6, control.MethodBranchMount, `{"name":`+name+`,"mount":`+jsonString(other)+`}`)),
		string(rpcLine(7, control.MethodRead, `{"path":"f.txt","branch":`+name+`}`)),
		string(rpcLine(8, control.MethodSessionOpen, `{"name":"x","branch":`+name+`}`)),
	)
	var list control.BranchListResult
	r := answer(t, out[0])
	require.Nil(t, r.Error, r.Raw)
	require.NoError(t, json.Unmarshal(r.Result, &list))
	assert.Empty(t, list.Branches, "root's branch is not listed to uid 65534: %s", r.Raw)
	for i, what := range []string{"branch.diff", "branch.commit", "branch.unmount", "branch.discard", "branch.mount", "fs.read in the branch", "session.open on the branch"} {
		requirePeerDenied(t, out[1+i], what+" of root's branch")
		assert.Contains(t, answer(t, out[1+i]).Error.Message, "belongs to uid 0", what)
	}

	// Root's branch is untouched: still mounted, still holding its change.
	assert.True(t, mounted(bm), "root's branch is still mounted")
	b, err := os.ReadFile(filepath.Join(bm, "f.txt"))
	require.NoError(t, err)
	assert.Equal(t, "in root's branch\n", string(b))
	all, err := d.Client.BranchList(ctx)
	require.NoError(t, err)
	require.Len(t, all.Branches, 1)
	assert.Equal(t, uint32(0), all.Branches[0].Owner, "root's branch is root's")
}
