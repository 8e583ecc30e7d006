package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
)

// nobodyDshmount runs the dshmount binary as uid 65534 (a copy it may
// execute) in dir with env; it returns stdout, stderr and the exit code.
func nobodyDshmount(t *testing.T, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	binDir, err := os.MkdirTemp("", "dsh-nobody-bin-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(binDir) })
	require.NoError(t, os.Chmod(binDir, 0o755))
	exe, err := os.ReadFile(dshBinary)
	require.NoError(t, err)
	bin := filepath.Join(binDir, "dshmount")
	require.NoError(t, os.WriteFile(bin, exe, 0o755))
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	return runCaptured(t, cmd)
}

// publicRunDir is a registry directory uid 65534 can read, set as
// DSH_RUN_DIR for the daemon the test starts.
func publicRunDir(t *testing.T) string {
	t.Helper()
	runDir, err := os.MkdirTemp("", "dsh-run-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(runDir) })
	require.NoError(t, os.Chmod(runDir, 0o755))
	t.Setenv("DSH_RUN_DIR", runDir)
	return runDir
}

// TestFeedOwner_ChangesAndFsmonitorHideNamesTheCallerMayNotList is item 1
// of issue 28: uid 65534 asks fs.changes (and runs dshmount fsmonitor)
// after root created and renamed files in its 0700 priv/: no name there is
// listed, and a file renamed out of priv/ is a new file to that uid.
func TestFeedOwner_ChangesAndFsmonitorHideNamesTheCallerMayNotList(t *testing.T) {
	runDir := publicRunDir(t)
	d := ownerDaemon(t, "--watch")
	ctx := testCtx(t)
	// waitFor waits until root's fs.changes since tok lists name; it
	// returns that answer.
	waitFor := func(tok, name string) *control.ChangesResult {
		var last *control.ChangesResult
		require.Eventually(t, func() bool {
			res, err := d.Client.Changes(ctx, control.ChangesParams{Since: control.ChangesCursor(tok)})
			require.NoError(t, err)
			last = res
			for _, c := range res.Changes {
				if c.Path == name {
					return true
				}
			}
			return false
		}, 10*time.Second, 20*time.Millisecond, "the watcher records %s", name)
		return last
	}
	start, err := d.Client.Changes(ctx, control.ChangesParams{})
	require.NoError(t, err)
	priv, pub := filepath.Join(d.Src, "priv"), filepath.Join(d.Src, "pub")
	require.NoError(t, os.Mkdir(priv, 0o700))
	require.NoError(t, os.Mkdir(pub, 0o777))
	require.NoError(t, os.Chmod(pub, 0o777))
	for _, f := range []string{"a-old-name", "moved-out"} {
		require.NoError(t, os.WriteFile(filepath.Join(priv, f), []byte("x\n"), 0o600))
	}
	require.NoError(t, os.WriteFile(filepath.Join(pub, "ready"), nil, 0o644))
	first := waitFor(start.Token, "pub/ready")

	hookEnv := []string{"DSH_RUN_DIR=" + runDir}
	out, stderr, code := nobodyDshmount(t, d.Mnt, hookEnv, "fsmonitor", "2", "")
	require.Equal(t, 0, code, stderr)
	hookTok, _, _ := strings.Cut(out, "\x00")

	require.NoError(t, os.WriteFile(filepath.Join(priv, "oob-secret-name"), []byte("s\n"), 0o600))
	require.NoError(t, os.Rename(filepath.Join(priv, "a-old-name"), filepath.Join(priv, "a-new-name")))
	require.NoError(t, os.Rename(filepath.Join(priv, "moved-out"), filepath.Join(pub, "moved-in")))
	// Root sees everything once the watcher has recorded the last change.
	var all []string
	for _, c := range waitFor(first.Token, "pub/moved-in").Changes {
		all = append(all, c.Path)
	}
	assert.Contains(t, all, "priv/oob-secret-name", "root may list priv/")

	s := jsonString(first.Token)
	lines := peer(t, d.Socket,
		string(rpcLine(1, control.MethodChanges, `{"since":`+s+`,"path":"priv"}`)),
		string(rpcLine(2, control.MethodChanges, `{"since":`+s+`}`)))
	for i, l := range lines {
		r := answer(t, l)
		if r.Error != nil {
			assert.NotContains(t, r.Raw, "secret", "answer %d", i)
			continue
		}
		var res control.ChangesResult
		require.NoError(t, json.Unmarshal(r.Result, &res), r.Raw)
		require.False(t, res.Everything, "answer %d: %s", i, r.Raw)
		for _, c := range res.Changes {
			assert.NotContains(t, c.Path+" "+c.From+" "+c.To, "priv/", "answer %d names a path in root's 0700 priv/: %s", i, r.Raw)
		}
		if i == 1 {
			require.Len(t, res.Changes, 1, r.Raw)
			assert.Equal(t, control.ChangedPath{Seq: res.Changes[0].Seq, Path: "pub/moved-in", Kind: "created"}, res.Changes[0])
		}
	}

	out, stderr, code = nobodyDshmount(t, d.Mnt, hookEnv, "fsmonitor", "2", hookTok)
	require.Equal(t, 0, code, stderr)
	_, rest, _ := strings.Cut(out, "\x00")
	assert.Equal(t, "pub/moved-in\x00", rest, "dshmount fsmonitor as uid 65534 lists only what it may list")
}
