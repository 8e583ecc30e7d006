package control

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/viewrules"
)

// watchedEnv is a test server whose backing-tree watcher counts as running.
func watchedEnv(t *testing.T, tweak ...func(*testConfig)) *testEnv {
	t.Helper()
	on := func(c *testConfig) { c.Svc.ExternalWatched = func() bool { return true } }
	return newTestEnv(t, append([]func(*testConfig){on}, tweak...)...)
}

// external records an out-of-band change as the watcher would.
func (e *testEnv) external(t *testing.T, op policy.MutationOp, rel, to string) {
	t.Helper()
	ctx := context.Background()
	tgt, err := e.engine.FS().Resolve(ctx, rel, provider.ResolveOptions{})
	require.NoError(t, err)
	c := policy.ExternalChange{Op: op, Target: tgt}
	if to != "" {
		dst, err := e.engine.FS().Resolve(ctx, to, provider.ResolveOptions{})
		require.NoError(t, err)
		c.To = &dst
	}
	rec, err := e.engine.RecordExternal(ctx, c)
	require.NoError(t, err)
	require.True(t, rec)
}

// changesOf calls fs.changes.
func changesOf(t *testing.T, c *Client, p ChangesParams) *ChangesResult {
	t.Helper()
	r, err := c.Changes(context.Background(), p)
	require.NoError(t, err)
	return r
}

// pathsOf lists the paths of an answer, "path/" for directories.
func pathsOf(r *ChangesResult) []string {
	var out []string
	for _, c := range r.Changes {
		p := c.Path
		if c.Dir {
			p += "/"
		}
		out = append(out, p)
	}
	return out
}

func TestChanges_WithoutSinceIsEverythingWithATokenOfThisRun(t *testing.T) {
	env := watchedEnv(t)
	c := env.client(t)
	r := changesOf(t, c, ChangesParams{})
	assert.True(t, r.Everything)
	assert.Empty(t, r.Changes)
	assert.NotEmpty(t, r.Reason)
	assert.Equal(t, env.store.LastSeq(), r.Seq)
	run, seq, ok := ParseChangesToken(r.Token)
	require.True(t, ok, "token %q", r.Token)
	assert.Equal(t, r.Run, run)
	assert.Equal(t, r.Seq, seq)

	again := changesOf(t, c, ChangesParams{Since: ChangesCursor(r.Token)})
	assert.False(t, again.Everything, "nothing changed since: %s", again.Reason)
	assert.Empty(t, again.Changes)
	assert.Equal(t, r.Token, again.Token)
}

func TestChanges_ListsEveryChangedPathOnceWithBothNamesOfARename(t *testing.T) {
	env := watchedEnv(t)
	c := env.client(t)
	ctx := context.Background()
	start := changesOf(t, c, ChangesParams{}).Token

	_, err := c.Write(ctx, WriteParams{Path: "a.txt", Content: "1"})
	require.NoError(t, err)
	_, err = c.Write(ctx, WriteParams{Path: "a.txt", Content: "2", Unconditional: true})
	require.NoError(t, err)
	_, err = c.Move(ctx, MoveParams{From: "a.txt", To: "b.txt", Unconditional: true})
	require.NoError(t, err)
	require.NoError(t, os.Mkdir(filepath.Join(env.root, "dir"), 0o755))
	env.external(t, policy.OpCreate, "dir", "")
	env.file(t, "ext.txt", "x")
	env.external(t, policy.OpWrite, "ext.txt", "")
	env.external(t, policy.OpDelete, "gone.txt", "")

	r := changesOf(t, c, ChangesParams{Since: ChangesCursor(start)})
	require.False(t, r.Everything, r.Reason)
	assert.Equal(t, []string{"a.txt", "b.txt", "dir/", "ext.txt", "gone.txt"}, pathsOf(r))
	kinds := map[string]ChangedPath{}
	for _, ch := range r.Changes {
		kinds[ch.Path] = ch
		assert.Positive(t, ch.Seq)
	}
	assert.Equal(t, "renamed", kinds["a.txt"].Kind)
	assert.Equal(t, "b.txt", kinds["a.txt"].To)
	assert.Equal(t, "a.txt", kinds["b.txt"].From)
	assert.Equal(t, "created", kinds["dir"].Kind)
	assert.Equal(t, "modified", kinds["ext.txt"].Kind)
	assert.Equal(t, "deleted", kinds["gone.txt"].Kind)
	assert.Equal(t, env.store.LastSeq(), r.Seq)

	// A bare seq works as well as the token.
	bySeq := changesOf(t, c, ChangesParams{Since: ChangesCursor(strings.Split(start, ":")[2])})
	assert.Equal(t, pathsOf(r), pathsOf(bySeq))
	next := changesOf(t, c, ChangesParams{Since: ChangesCursor(r.Token)})
	assert.Empty(t, next.Changes, "each change is reported once")
}

func TestChanges_AnUnvouchedSinceIsEverything(t *testing.T) {
	env := watchedEnv(t)
	c := env.client(t)
	first := changesOf(t, c, ChangesParams{})
	env.file(t, "x.txt", "x")
	env.external(t, policy.OpCreate, "x.txt", "")
	cases := map[string]ChangesCursor{
		"garbage":         "builtin:0:1",
		"another run":     ChangesCursor(FormatChangesToken("0123456789abcdef", first.Seq)),
		"the future":      ChangesCursor(FormatChangesToken(first.Run, first.Seq+1000)),
		"a negative seq":  "dsh:" + ChangesCursor(first.Run) + ":-1",
		"before this run": "0",
	}
	for name, since := range cases {
		t.Run(name, func(t *testing.T) {
			r := changesOf(t, c, ChangesParams{Since: since})
			assert.True(t, r.Everything)
			assert.Empty(t, r.Changes)
			assert.Equal(t, env.store.LastSeq(), r.Seq)
		})
	}
	env.store.MarkChangesLost()
	r := changesOf(t, c, ChangesParams{Since: ChangesCursor(first.Token)})
	assert.True(t, r.Everything, "a token from before the watcher lost changes")
	assert.Contains(t, r.Reason, "not all known")
}

func TestChanges_WithoutTheWatcherIsEverything(t *testing.T) {
	env := newTestEnv(t) // no ExternalWatched: changes in the workspace directory are unknown
	c := env.client(t)
	first := changesOf(t, c, ChangesParams{})
	_, err := c.Write(context.Background(), WriteParams{Path: "a.txt", Content: "1"})
	require.NoError(t, err)
	r := changesOf(t, c, ChangesParams{Since: ChangesCursor(first.Token)})
	assert.True(t, r.Everything)
	assert.Contains(t, r.Reason, "--watch")
	assert.Greater(t, r.Seq, first.Seq, "the token still moves on")
}

func TestChanges_MoreThanMaxPathsIsEverything(t *testing.T) {
	env := watchedEnv(t)
	c := env.client(t)
	start := changesOf(t, c, ChangesParams{})
	for _, p := range []string{"a", "b", "c"} {
		env.external(t, policy.OpCreate, p, "")
	}
	r := changesOf(t, c, ChangesParams{Since: ChangesCursor(start.Token), Max: 2})
	assert.True(t, r.Everything)
	assert.Empty(t, r.Changes)
	r = changesOf(t, c, ChangesParams{Since: ChangesCursor(start.Token), Max: 3})
	assert.False(t, r.Everything)
	assert.Len(t, r.Changes, 3)
	_, err := c.Changes(context.Background(), ChangesParams{Max: -1})
	require.Error(t, err)
}

func TestChanges_PathLimitsTheAnswerToItsSubtree(t *testing.T) {
	env := watchedEnv(t)
	c := env.client(t)
	env.file(t, "repo/.keep", "")
	start := changesOf(t, c, ChangesParams{})
	env.external(t, policy.OpCreate, "repo/in.txt", "")
	env.external(t, policy.OpCreate, "repository.txt", "")
	env.external(t, policy.OpRename, "outside.txt", "repo/moved-in.txt")
	r := changesOf(t, c, ChangesParams{Since: ChangesCursor(start.Token), Path: "repo"})
	assert.Equal(t, []string{"repo/in.txt", "repo/moved-in.txt"}, pathsOf(r))
	r = changesOf(t, c, ChangesParams{Since: ChangesCursor(start.Token), Path: "in.txt", Cwd: "repo"})
	assert.Equal(t, []string{"repo/in.txt"}, pathsOf(r), "path resolves against cwd")
}

func TestChanges_PathsBeingChangedNowAreListed(t *testing.T) {
	env := watchedEnv(t)
	c := env.client(t)
	start := changesOf(t, c, ChangesParams{})
	tgt, err := env.engine.FS().Resolve(context.Background(), "open.txt", provider.ResolveOptions{})
	require.NoError(t, err)
	release := env.engine.HoldOwn(tgt) // open for writing through the mount
	r := changesOf(t, c, ChangesParams{Since: ChangesCursor(start.Token)})
	require.Len(t, r.Changes, 1)
	assert.Equal(t, "open.txt", r.Changes[0].Path)
	assert.True(t, r.Changes[0].InProgress)
	release()
	r = changesOf(t, c, ChangesParams{Since: ChangesCursor(start.Token)})
	assert.Empty(t, r.Changes)
}

// cookieWatcher stands in for the backing-tree watcher: it reports a change
// queued before any cookie file that appears in dir, then the cookie.
func cookieWatcher(t *testing.T, env *testEnv, dir, queued string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		seen := map[string]bool{}
		for ctx.Err() == nil {
			names, _ := filepath.Glob(filepath.Join(env.root, dir, ChangesCookiePrefix+"*"))
			for _, n := range names {
				if seen[n] {
					continue
				}
				seen[n] = true
				rel, _ := filepath.Rel(env.root, n)
				for _, p := range []string{queued, rel} {
					tgt, err := env.engine.FS().Resolve(ctx, p, provider.ResolveOptions{})
					if assert.NoError(t, err) {
						_, err = env.engine.RecordExternal(ctx, policy.ExternalChange{Op: policy.OpCreate, Target: tgt})
						assert.NoError(t, err)
					}
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
}

func TestChanges_SyncWaitsForTheWatcherToCatchUp(t *testing.T) {
	env := watchedEnv(t)
	c := env.client(t)
	require.NoError(t, os.MkdirAll(filepath.Join(env.root, "repo", ".git"), 0o755))
	start := changesOf(t, c, ChangesParams{Path: "repo"})
	cookieWatcher(t, env, "repo/.git", "repo/late.txt")

	unsynced := changesOf(t, c, ChangesParams{Since: ChangesCursor(start.Token), Path: "repo"})
	assert.False(t, unsynced.Synced)
	assert.Empty(t, unsynced.Changes, "the watcher has not reported late.txt yet")

	r := changesOf(t, c, ChangesParams{Since: ChangesCursor(start.Token), Path: "repo", Sync: true})
	require.False(t, r.Everything, r.Reason)
	assert.True(t, r.Synced)
	assert.Equal(t, []string{"repo/late.txt"}, pathsOf(r), "what the watcher reported before the cookie is in; the cookie is not")
	left, err := filepath.Glob(filepath.Join(env.root, "repo", ".git", ChangesCookiePrefix+"*"))
	require.NoError(t, err)
	assert.Empty(t, left, "the cookie is removed")

	noGit := changesOf(t, c, ChangesParams{Since: ChangesCursor(r.Token), Sync: true})
	assert.False(t, noGit.Synced, "no .git directory at the workspace root: answered without sync")
	assert.False(t, noGit.Everything)
}

func TestParseChangesToken(t *testing.T) {
	run, seq, ok := ParseChangesToken(FormatChangesToken("00ff", 42))
	require.True(t, ok)
	assert.Equal(t, "00ff", run)
	assert.Equal(t, uint64(42), seq)
	for _, bad := range []string{"", "dsh:", "dsh::1", "dsh:00ff:", "dsh:00ff:x", "dsh:00FF:1", "dsh:zz:1",
		"builtin:00ff:1", "dsh:00ff:1:2", "dsh:00ff:-1", "dsh:00ff:99999999999999999999", "1700000000"} {
		_, _, ok := ParseChangesToken(bad)
		assert.False(t, ok, "%q", bad)
	}
}

func TestChanges_HiddenPathsMakeAWorkspaceCallerGetEverything(t *testing.T) {
	cases := []struct {
		name       string
		hide       []string
		path       string
		everything bool
	}{
		{"a name hidden at any depth", []string{"secret"}, "repo", true},
		{"an anchored rule below the path", []string{"/repo/secret"}, "repo", true},
		{"an anchored rule elsewhere", []string{"/other/secret"}, "repo", false},
		{"only the daemon's branch staging", []string{"/" + branch.StagingDir}, "", false},
		{"nothing hidden", nil, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := watchedEnv(t, func(c *testConfig) {
				view, err := viewrules.New(c.Svc.Engine.FS(), viewrules.Rules{Hide: tc.hide})
				require.NoError(t, err)
				c.Svc.Engine, c.Svc.View = policy.NewEngine(c.Svc.Engine.Store(), view), view
			})
			require.NoError(t, os.MkdirAll(filepath.Join(env.root, "repo"), 0o755))
			c := env.client(t)
			start := changesOf(t, c, ChangesParams{})
			onMount := changesOf(t, c, ChangesParams{Since: ChangesCursor(start.Token), Path: tc.path})
			assert.False(t, onMount.Everything, "on the mount hidden paths do not exist: %s", onMount.Reason)
			onWorkspace := changesOf(t, c, ChangesParams{Since: ChangesCursor(start.Token), Path: tc.path, Workspace: true})
			assert.Equal(t, tc.everything, onWorkspace.Everything, "in the workspace directory hidden paths exist, unwatched: %s", onWorkspace.Reason)
			if tc.everything {
				assert.Contains(t, onWorkspace.Reason, "--hide")
			}
		})
	}
}
