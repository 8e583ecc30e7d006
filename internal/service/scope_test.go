package service

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/branch"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/policy/localstore"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/local"
)

// newBranchService is newTestService with branches kept in a temp state
// directory.
func newBranchService(tb testing.TB) (*Service, *branch.Manager) {
	tb.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := localstore.Open(tb.TempDir(), policy.DefaultOptions().WithLogger(quiet))
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, store.Close()) })
	lfs, err := local.New(tb.TempDir(), local.Options{Digests: store})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = lfs.Close() })
	mgr, err := branch.Open(tb.TempDir(), lfs, branch.Options{Logger: quiet,
		Upper: func(dir string) (branch.Upper, error) {
			return local.New(dir, local.Options{Durability: local.DurabilityNone})
		}})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = mgr.Close() })
	s, err := New(Config{Engine: policy.NewEngine(store, lfs), Source: lfs.Root(), Mount: "/mnt/test",
		Logger: quiet, Branches: mgr, Journal: mgr.Journal()})
	require.NoError(tb, err)
	return s, mgr
}

// TestRequestScope_NamedBranchElseSessionDefaultElseWorkspace pins where
// a request acts: the branch it names, else its session's default branch,
// else the workspace; a branch of another uid or an unknown one is refused.
func TestRequestScope_NamedBranchElseSessionDefaultElseWorkspace(t *testing.T) {
	const me, other = 4243, 4242
	s, mgr := newBranchService(t)
	_, err := mgr.CreateFor("feat", me)
	require.NoError(t, err)
	_, err = mgr.CreateFor("theirs", other)
	require.NoError(t, err)
	require.NoError(t, mgr.SetSessionBranch("in-feat", "feat"))
	c := s.NewCaller(CallerConfig{UID: me})

	for _, tc := range []struct {
		name, session, branch string
		want                  string // the scope's branch; "" the workspace
		code                  provider.Code
	}{
		{name: "no branch, no session default: the workspace"},
		{name: "a session without a default: the workspace", session: "plain"},
		{name: "a named branch", branch: "feat", want: "feat"},
		{name: "the session's default branch", session: "in-feat", want: "feat"},
		{name: "a named branch over the session's default", session: "in-feat", branch: "feat", want: "feat"},
		{name: "another uid's branch", branch: "theirs", code: provider.CodePermissionDenied},
		{name: "an unknown branch", branch: "nope", code: provider.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := s.requestScope(c, policy.SessionID(tc.session), tc.branch)
			if tc.code != "" {
				assert.Equal(t, tc.code, provider.CodeOf(err), "err: %v", err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, sc.Branch)
			assert.Equal(t, tc.want == "", sc.Workspace())
			wantEngine := s.engine
			if tc.want != "" {
				wantEngine, err = s.BranchEngine(tc.want)
				require.NoError(t, err)
			}
			assert.Same(t, wantEngine, sc.engine)
			assert.Equal(t, wantEngine.FS(), sc.fs)
			_, err = sc.resolve(context.Background(), "path", "a.txt", "")
			assert.NoError(t, err)
		})
	}
}
