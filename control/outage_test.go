package control

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/policy/kv/etcdkv"
	"github.com/dshmount/dshmount/internal/policy/kv/etcdkv/etcdtest"
	"github.com/dshmount/dshmount/internal/provider"
)

// etcdEnv starts an embedded etcd and a server whose store is on it, with
// the etcd client's default timeouts (what `serve --store etcd://` uses).
func etcdEnv(t *testing.T) (*testEnv, *etcdtest.Server) {
	t.Helper()
	srv, err := etcdtest.Start(t.TempDir(), etcdtest.Options{})
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	root := t.TempDir()
	db, err := etcdkv.Open(context.Background(), etcdkv.Config{Endpoints: []string{srv.Endpoint()}, Prefix: "/ctl/"})
	require.NoError(t, err)
	store, err := policy.Open(db, "etcd", policy.DefaultOptions().WithLogger(quietLogger()).WithWorkspaceRoot(root))
	require.NoError(t, err)
	return newTestEnvOn(t, root, store), srv
}

func TestOutage_ReadsAreAnsweredUnobservedAndEveryCallWithin3s(t *testing.T) {
	env, srv := etcdEnv(t)
	env.file(t, "f.txt", "one\n")
	ctx := context.Background()
	c := env.client(t)
	sess := mustSession(t, c)
	rd, err := c.Read(ctx, ReadParams{Path: "f.txt", Session: sess})
	require.NoError(t, err)
	require.True(t, rd.Observed)

	srv.Stop()
	within := func(what string, call func()) {
		t.Helper()
		start := time.Now()
		call()
		assert.Less(t, time.Since(start), 3*time.Second, "%s is answered within 3 s during an outage", what)
	}
	fresh := env.client(t) // no implicit session yet: it cannot be stored
	for name, rc := range map[string]struct {
		c *Client
		p ReadParams
	}{
		"read with a session":                     {c, ReadParams{Path: "f.txt", Session: sess}},
		"read without one, on a fresh connection": {fresh, ReadParams{Path: "f.txt"}},
	} {
		within(name, func() {
			rd, err := rc.c.Read(ctx, rc.p)
			require.NoError(t, err, name)
			assert.Equal(t, "one", rd.Lines[0].Text)
			assert.False(t, rd.Observed, "%s says it was not recorded", name)
		})
	}
	within("a guarded edit's refusal", func() {
		_, err := c.Edit(ctx, EditParams{Path: "f.txt", OldString: "one", NewString: "two", Session: sess})
		require.Equal(t, provider.CodeIOError, provider.CodeOf(err), "got %v", err)
	})
	within("a write's refusal on a fresh connection", func() {
		_, err := env.client(t).Write(ctx, WriteParams{Path: "f.txt", Content: "x\n", Unconditional: true})
		require.Equal(t, provider.CodeIOError, provider.CodeOf(err), "got %v", err)
	})
	got, _ := env.content(t, "f.txt")
	assert.Equal(t, "one\n", got, "nothing let through")
}
