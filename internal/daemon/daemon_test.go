package daemon

import (
	"context"
	"log/slog"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/service"
)

// testConfig is a daemon configuration over new temporary directories.
func testConfig(t *testing.T) Config {
	t.Helper()
	src, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return Config{Source: src, Mountpoint: filepath.Join(t.TempDir(), "mnt"), StateDir: t.TempDir(),
		MergeCache: 1 << 20, FeedRetention: DefaultFeedRetention, FeedMaxEntries: DefaultFeedMaxEntries,
		FeedPruneInterval: DefaultFeedPruneInterval, Logger: slog.New(slog.DiscardHandler)}
}

func TestOpen_AFailedOpenClosesWhatItOpened(t *testing.T) {
	cfg := testConfig(t)
	bad := cfg
	bad.Unguarded = []string{""} // refused after the store, the workspace and the branches are open
	_, err := Open(context.Background(), bad)
	require.ErrorContains(t, err, "empty pattern")

	d, err := Open(context.Background(), cfg)
	require.NoError(t, err, "the failed open released the store's lock and the branches")
	require.NoError(t, d.Close())
	d, err = Open(context.Background(), cfg)
	require.NoError(t, err, "Close released them too")
	require.NoError(t, d.Close())
}

func TestOpen_TheViewHidesTheCommitStaging(t *testing.T) {
	cfg := testConfig(t)
	cfg.Hide = []string{"secret"}
	d, err := Open(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	hide := d.View.Rules().Hide
	assert.Contains(t, hide, "secret")
	assert.Contains(t, hide, "/.dshmount-staging", "the journal's staging directory is never shown")
}

func TestService_ABindMakesTheMountsForgetTheirCallers(t *testing.T) {
	d, err := Open(context.Background(), testConfig(t))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	forgot := 0
	svc, err := d.Service(ServiceConfig{ForgetCallers: func() { forgot++ }})
	require.NoError(t, err)
	sess, err := svc.Store().OpenSession("bound")
	require.NoError(t, err)
	child := exec.Command("sleep", "60") // the daemon's own process cannot be bound
	require.NoError(t, child.Start())
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	pid := child.Process.Pid

	require.NoError(t, svc.Binder().Bind(sess.ID, pid))
	assert.Equal(t, 1, forgot, "a bind tells the mounts to resolve their callers again")
	got, ok := svc.Binder().SessionOf(pid)
	require.True(t, ok)
	assert.Equal(t, sess.ID, got)
	require.NoError(t, svc.Binder().(service.StrictBinder).BindStrict(sess.ID, pid))
	assert.Equal(t, 2, forgot, "a strict bind too")
	var pids []int
	for _, b := range svc.Binder().(service.BindingLister).Bindings() {
		pids = append(pids, b.PID)
	}
	assert.Contains(t, pids, pid, "daemon.status lists the binding")
}
