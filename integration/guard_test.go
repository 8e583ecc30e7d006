package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/provider"
)

// Cross-path cases: the socket and the mount share one guard.

func TestGuard_SocketEditSeenAtOnceThroughMount(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"a.txt": "alpha\n"}})
	ctx := testCtx(t)
	// Warm the kernel's caches for the file first.
	assert.Equal(t, "alpha\n", d.sh(`cat a.txt`))
	read, err := d.Client.Read(ctx, control.ReadParams{Path: "a.txt"})
	require.NoError(t, err)
	_, err = d.Client.Edit(ctx, control.EditParams{Path: "a.txt", OldString: "alpha", NewString: "omega",
		Expected: &control.VersionExpected{Version: read.Version}})
	require.NoError(t, err)
	got, err := os.ReadFile(d.m("a.txt"))
	require.NoError(t, err)
	assert.Equal(t, "omega\n", string(got), "the mount shows the agent's edit at once")
	assert.Equal(t, "omega\n", d.sh(`cat a.txt`))
}

func TestGuard_MountWriteMakesAgentTokenStale(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"a.txt": "alpha\n"}})
	ctx := testCtx(t)
	sess, err := d.Client.OpenSession(ctx, "agent")
	require.NoError(t, err)
	_, err = d.Client.Read(ctx, control.ReadParams{Path: "a.txt", Session: sess})
	require.NoError(t, err)

	d.sh(`echo 'a person was here' >> a.txt`)

	_, err = d.Client.Edit(ctx, control.EditParams{Path: "a.txt", OldString: "alpha", NewString: "beta", Session: sess})
	require.Error(t, err)
	assert.ErrorIs(t, err, provider.ErrStaleVersion)
	assert.Contains(t, err.Error(), "mount", "the message says the change came through the mount")
	assertBacking(t, d, "a.txt", "alpha\na person was here\n")

	// Reading again refreshes the observation; the edit then succeeds.
	_, err = d.Client.Read(ctx, control.ReadParams{Path: "a.txt", Session: sess})
	require.NoError(t, err)
	_, err = d.Client.Edit(ctx, control.EditParams{Path: "a.txt", OldString: "alpha", NewString: "beta", Session: sess})
	require.NoError(t, err)
	assertBacking(t, d, "a.txt", "beta\na person was here\n")

	// The audit log names both writers.
	log, err := d.Client.Log(ctx, control.LogParams{Path: "a.txt"})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(log.Entries), 2)
}

func TestGuard_BoundProcessMustReadBeforeWriting(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"f.txt": "original\n"}})
	ctx := testCtx(t)
	sess, err := d.Client.OpenSession(ctx, "bound") // not strict: exec --strict binds strictly
	require.NoError(t, err)
	exec := func(script string) (string, string, int) {
		return d.dsh("exec", "--socket", d.Socket, "--strict", "--session", string(sess), "--", "sh", "-c", script)
	}

	_, stderr, code := exec(`echo clobber > f.txt`)
	assert.NotEqual(t, 0, code, "writing an unseen file must fail")
	assert.Contains(t, stderr, "Permission denied")
	assertBacking(t, d, "f.txt", "original\n")

	_, _, code = exec(`cat f.txt > /dev/null && echo written > f.txt`)
	assert.Equal(t, 0, code, "after reading, the write succeeds")
	assertBacking(t, d, "f.txt", "written\n")

	// A new file is allowed: it is absent.
	_, _, code = exec(`echo fresh > new.txt`)
	assert.Equal(t, 0, code)
	assertBacking(t, d, "new.txt", "fresh\n")
}

func TestGuard_BoundProcessStaleWriteGetsESTALE(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"f.txt": "v1\n"}})
	ctx := testCtx(t)
	sess, err := openStrict(ctx, d, "bound")
	require.NoError(t, err)
	_, _, code := d.dsh("exec", "--socket", d.Socket, "--session", string(sess), "--", "cat", "f.txt")
	require.Equal(t, 0, code)

	// Someone else changes the file behind the session's back.
	require.NoError(t, os.WriteFile(filepath.Join(d.Src, "f.txt"), []byte("v2 from outside\n"), 0o644))

	_, stderr, code := d.dsh("exec", "--socket", d.Socket, "--session", string(sess), "--", "sh", "-c", `echo v3 > f.txt`)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, strings.ToLower(stderr), "stale")
	assertBacking(t, d, "f.txt", "v2 from outside\n")
}

func TestGuard_VersionXattrTracksMutations(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"f.txt": "v1\n"}})
	ctx := testCtx(t)
	v1 := d.sh(`getfattr -n user.dsh.version --only-values f.txt`)
	st, err := d.Client.Stat(ctx, control.StatParams{Path: "f.txt"})
	require.NoError(t, err)
	assert.Equal(t, string(st.Version), v1, "the xattr and the socket agree on the version")
	d.sh(`echo v2 > f.txt`)
	v2 := d.sh(`getfattr -n user.dsh.version --only-values f.txt`)
	assert.NotEqual(t, v1, v2)
}
