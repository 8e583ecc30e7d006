package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

// TestRefusals_MountRefusalIsInTheAuditLog: a process bound with dshmount
// exec that the guard refuses (EACCES for an unseen file, ESTALE for one
// changed since it read it) leaves an audit entry naming the path, the
// session, its pid and the code, visible with fs.log {refused: true};
// before, the reason was only in the daemon's stderr.
func TestRefusals_MountRefusalIsInTheAuditLog(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"unseen.txt": "original\n", "stale.txt": "v1\n"}})
	ctx := testCtx(t)
	sess, err := openStrict(ctx, d, "bound")
	require.NoError(t, err)
	exec := func(script string) (pid int32, stderr string, code int) {
		out, stderr, code := d.dsh("exec", "--socket", d.Socket, "--session", string(sess), "--", "sh", "-c", "echo $$; "+script)
		n, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(out, "\n", 2)[0]))
		require.NoError(t, err, "stdout %q", out)
		return int32(n), stderr, code
	}

	unseenPID, stderr, code := exec(`echo clobber > unseen.txt`)
	require.NotEqual(t, 0, code)
	require.Contains(t, stderr, "Permission denied")

	_, _, code = exec(`cat stale.txt > /dev/null`)
	require.Equal(t, 0, code)
	require.NoError(t, os.WriteFile(filepath.Join(d.Src, "stale.txt"), []byte("v2 from a person\n"), 0o644))
	stalePID, stderr, code := exec(`echo v3 > stale.txt`)
	require.NotEqual(t, 0, code)
	require.Contains(t, strings.ToLower(stderr), "stale")
	assertBacking(t, d, "unseen.txt", "original\n")
	assertBacking(t, d, "stale.txt", "v2 from a person\n")

	refused := true
	log, err := d.Client.Log(ctx, control.LogParams{Refused: &refused, Session: sess})
	require.NoError(t, err)
	byPath := map[string][]control.LogEntry{}
	for _, e := range log.Entries {
		byPath[e.Path] = append(byPath[e.Path], e)
	}
	require.Len(t, byPath["unseen.txt"], 1, "entries: %+v", log.Entries)
	require.Len(t, byPath["stale.txt"], 1, "one entry however often the kernel retried the open: %+v", log.Entries)

	u := byPath["unseen.txt"][0]
	assert.Equal(t, provider.CodeNotObserved, u.Refused)
	assert.Equal(t, sess, u.Session)
	assert.Equal(t, unseenPID, u.PID)
	assert.Equal(t, policy.ChannelMount, u.Channel)
	assert.Equal(t, uint32(os.Getuid()), u.UID)
	assert.NotEmpty(t, u.Reason)

	s := byPath["stale.txt"][0]
	assert.Equal(t, provider.CodeStaleVersion, s.Refused)
	assert.Equal(t, sess, s.Session)
	assert.Equal(t, stalePID, s.PID)
	assert.Equal(t, policy.ChannelMount, s.Channel)
	assert.Contains(t, s.Reason, "changed since you read it")

	// The change log (what a change feed reads) has no refusals.
	changes := false
	log, err = d.Client.Log(ctx, control.LogParams{Refused: &changes, Limit: 1000})
	require.NoError(t, err)
	for _, e := range log.Entries {
		assert.Empty(t, e.Refused, "%+v", e)
	}
}
