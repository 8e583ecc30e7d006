package control

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/seen"
)

// withSeen gives the server a merge cache bounded by max bytes.
func withSeen(tb testing.TB, max int64) func(*testConfig) {
	cache, err := seen.Open(filepath.Join(tb.TempDir(), "seen"), max)
	require.NoError(tb, err)
	return func(c *testConfig) { c.Svc.SeenBytes = cache }
}

// numbered is a text of n lines "line i", with eol.
func numbered(n int, eol string) string {
	var sb strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&sb, "line %d%s", i, eol)
	}
	return sb.String()
}

// mergeSetup opens sessions a and b, lets both read f.txt (content), and
// lets b change it: a's version is then stale.
func mergeSetup(t *testing.T, env *testEnv, content string, bOld, bNew string) (*Client, policy.SessionID, policy.SessionID) {
	t.Helper()
	env.file(t, "f.txt", content)
	c := env.client(t)
	ctx := context.Background()
	sa, err := c.OpenSession(ctx, "a")
	require.NoError(t, err)
	sb, err := c.OpenSession(ctx, "b")
	require.NoError(t, err)
	for _, s := range []policy.SessionID{sa, sb} {
		_, err := c.Read(ctx, ReadParams{Path: "f.txt", Session: s})
		require.NoError(t, err)
	}
	_, err = c.Edit(ctx, EditParams{Path: "f.txt", OldString: bOld, NewString: bNew, Session: sb})
	require.NoError(t, err)
	return c, sa, sb
}

func TestMerge_StaleEditFarFromTheOtherChangeIsMerged(t *testing.T) {
	env := newTestEnv(t, withSeen(t, 1<<20))
	c, sa, sb := mergeSetup(t, env, numbered(50, "\n"), "line 45\n", "line 45 by b\n")
	ctx := context.Background()
	stat, err := c.Stat(ctx, StatParams{Path: "f.txt", Session: sb})
	require.NoError(t, err)

	res, err := c.Edit(ctx, EditParams{Path: "f.txt", OldString: "line 3\n", NewString: "line 3 by a\n", Session: sa, Merge: true})
	require.NoError(t, err)
	assert.True(t, res.Merged)
	assert.Equal(t, stat.Version, res.MergedOver, "the result names the version merged over")
	got, _ := env.content(t, "f.txt")
	want := strings.Replace(strings.Replace(numbered(50, "\n"), "line 3\n", "line 3 by a\n", 1), "line 45\n", "line 45 by b\n", 1)
	assert.Equal(t, want, got, "both changes are in the file")

	log, err := c.Log(ctx, LogParams{})
	require.NoError(t, err)
	require.NotEmpty(t, log.Entries)
	e := log.Entries[0]
	assert.Equal(t, sa, e.Session, "the merge is audited as the requester's")
	assert.Contains(t, e.Detail, "merge")
	assert.Contains(t, e.Detail, string(sb), "the audit names the author of the bytes merged over")

	// The session now observes the merged version: a plain edit passes.
	_, err = c.Edit(ctx, EditParams{Path: "f.txt", OldString: "line 4\n", NewString: "line 4 by a\n", Session: sa})
	require.NoError(t, err)
}

func TestMerge_ConflictChangesNothing(t *testing.T) {
	env := newTestEnv(t, withSeen(t, 1<<20))
	c, sa, _ := mergeSetup(t, env, numbered(50, "\n"), "line 45\n", "line 45 by b\n")
	before, _ := env.content(t, "f.txt")
	_, err := c.Edit(context.Background(), EditParams{Path: "f.txt", OldString: "line 45\n", NewString: "line 45 by a\n", Session: sa, Merge: true})
	re := requireFS(t, err, provider.CodeMergeConflict)
	require.Len(t, re.ConflictHunks, 1)
	h := re.ConflictHunks[0]
	assert.Equal(t, ConflictHunk{Path: "f.txt", BaseStart: 45, Base: "line 45\n", Ours: "line 45 by a\n", Theirs: "line 45 by b\n"}, h)
	after, _ := env.content(t, "f.txt")
	assert.Equal(t, before, after)
}

func TestMerge_WithoutKeptBytesIsStale(t *testing.T) {
	cases := []struct {
		name  string
		tweak []func(*testConfig)
		merge bool
	}{
		{"cache disabled", nil, true},
		{"file larger than the cache", []func(*testConfig){withSeen(t, 64)}, true},
		{"merge not asked", []func(*testConfig){withSeen(t, 1<<20)}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, tc.tweak...)
			c, sa, _ := mergeSetup(t, env, numbered(50, "\n"), "line 45\n", "line 45 by b\n")
			before, _ := env.content(t, "f.txt")
			_, err := c.Edit(context.Background(), EditParams{Path: "f.txt", OldString: "line 3\n", NewString: "x\n", Session: sa, Merge: tc.merge})
			requireFS(t, err, provider.CodeStaleVersion)
			after, _ := env.content(t, "f.txt")
			assert.Equal(t, before, after)
		})
	}
}

func TestMerge_StaleWriteIsMerged(t *testing.T) {
	env := newTestEnv(t, withSeen(t, 1<<20))
	c, sa, _ := mergeSetup(t, env, numbered(20, "\n"), "line 18\n", "line 18 by b\n")
	content := strings.Replace(numbered(20, "\n"), "line 2\n", "line 2 by a\n", 1)
	res, err := c.Write(context.Background(), WriteParams{Path: "f.txt", Content: content, Session: sa, Merge: true})
	require.NoError(t, err)
	assert.True(t, res.Merged)
	assert.NotEmpty(t, res.MergedOver)
	got, _ := env.content(t, "f.txt")
	assert.Equal(t, strings.Replace(content, "line 18\n", "line 18 by b\n", 1), got)
}

func TestMerge_CRLFFileStaysCRLF(t *testing.T) {
	env := newTestEnv(t, withSeen(t, 1<<20))
	c, sa, _ := mergeSetup(t, env, numbered(30, "\r\n"), "line 25", "line 25 by b")
	_, err := c.Edit(context.Background(), EditParams{Path: "f.txt", OldString: "line 2\r\n", NewString: "line 2 by a\r\n", Session: sa, Merge: true})
	require.NoError(t, err)
	got, _ := env.content(t, "f.txt")
	want := strings.Replace(strings.Replace(numbered(30, "\r\n"), "line 2\r\n", "line 2 by a\r\n", 1), "line 25\r\n", "line 25 by b\r\n", 1)
	assert.Equal(t, want, got)
}

func TestMerge_GuardStillApplies(t *testing.T) {
	env := newTestEnv(t, withSeen(t, 1<<20))
	_, _, _ = mergeSetup(t, env, numbered(50, "\n"), "line 45\n", "line 45 by b\n")
	c := env.client(t)
	ctx := context.Background()
	sc, err := c.OpenSession(ctx, "c")
	require.NoError(t, err)
	before, _ := env.content(t, "f.txt")
	// c never read the file: the bytes a and b read are kept, but merge
	// does not stand in for c's own read.
	_, err = c.Edit(ctx, EditParams{Path: "f.txt", OldString: "line 3\n", NewString: "x\n", Session: sc, Merge: true})
	requireFS(t, err, provider.CodeNotObserved)
	after, _ := env.content(t, "f.txt")
	assert.Equal(t, before, after)
}

func TestMerge_StalePatchIsMerged(t *testing.T) {
	env := newTestEnv(t, withSeen(t, 1<<20))
	c, sa, _ := mergeSetup(t, env, numbered(20, "\n"), "line 18\n", "line 18 by b\n")
	text := "*** Begin Patch\n*** Update File: f.txt\n@@\n line 1\n-line 2\n+line 2 by a\n line 3\n*** End Patch\n"
	_, err := c.Patch(context.Background(), PatchParams{Patch: text, Session: sa})
	requireFS(t, err, provider.CodeStaleVersion)
	res, err := c.Patch(context.Background(), PatchParams{Patch: text, Session: sa, Merge: true})
	require.NoError(t, err)
	require.True(t, res.Complete)
	require.Len(t, res.Operations, 1)
	assert.Equal(t, PatchApplied, res.Operations[0].Status)
	assert.NotEmpty(t, res.Operations[0].MergedOver)
	got, _ := env.content(t, "f.txt")
	want := strings.Replace(strings.Replace(numbered(20, "\n"), "line 2\n", "line 2 by a\n", 1), "line 18\n", "line 18 by b\n", 1)
	assert.Equal(t, want, got)
}

// TestMerge_AuditedOnce: a merged change is one audit entry, the merge
// (no refusal before it); a change that cannot be merged is one entry, the
// stale refusal; a change not asking for a merge is refused as before.
func TestMerge_AuditedOnce(t *testing.T) {
	patchText := func(old, new string) string {
		return "*** Begin Patch\n*** Update File: f.txt\n@@\n-" + old + "+" + new + "*** End Patch\n"
	}
	tests := []struct {
		name        string
		change      func(c *Client, s policy.SessionID) error
		wantRefused provider.Code // "": the entry is the merge
	}{
		{name: "edit merged", change: func(c *Client, s policy.SessionID) error {
			_, err := c.Edit(context.Background(), EditParams{Path: "f.txt", OldString: "line 3\n", NewString: "line 3 by a\n", Session: s, Merge: true})
			return err
		}},
		{name: "write merged", change: func(c *Client, s policy.SessionID) error {
			content := strings.Replace(numbered(50, "\n"), "line 3\n", "line 3 by a\n", 1)
			_, err := c.Write(context.Background(), WriteParams{Path: "f.txt", Content: content, Session: s, Merge: true})
			return err
		}},
		{name: "patch merged", change: func(c *Client, s policy.SessionID) error {
			_, err := c.Patch(context.Background(), PatchParams{Patch: patchText("line 3\n", "line 3 by a\n"), Session: s, Merge: true})
			return err
		}},
		{name: "edit in conflict", wantRefused: provider.CodeStaleVersion, change: func(c *Client, s policy.SessionID) error {
			_, err := c.Edit(context.Background(), EditParams{Path: "f.txt", OldString: "line 45\n", NewString: "line 45 by a\n", Session: s, Merge: true})
			return err
		}},
		{name: "patch in conflict", wantRefused: provider.CodeStaleVersion, change: func(c *Client, s policy.SessionID) error {
			_, err := c.Patch(context.Background(), PatchParams{Patch: patchText("line 45\n", "line 45 by a\n"), Session: s, Merge: true})
			return err
		}},
		{name: "edit not merging", wantRefused: provider.CodeStaleVersion, change: func(c *Client, s policy.SessionID) error {
			_, err := c.Edit(context.Background(), EditParams{Path: "f.txt", OldString: "line 3\n", NewString: "line 3 by a\n", Session: s})
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, withSeen(t, 1<<20))
			c, sa, sb := mergeSetup(t, env, numbered(50, "\n"), "line 45\n", "line 45 by b\n")
			err := tc.change(c, sa)
			if tc.wantRefused == "" {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
			}
			log, err := c.Log(context.Background(), LogParams{Session: sa})
			require.NoError(t, err)
			mine := log.Entries
			require.Len(t, mine, 1, "one entry for the change: %+v", mine)
			assert.Equal(t, tc.wantRefused, mine[0].Refused)
			if tc.wantRefused == "" {
				assert.Contains(t, mine[0].Detail, "merge")
				assert.Contains(t, mine[0].Detail, string(sb), "the entry names the author of the bytes merged over")
			}
		})
	}
}
