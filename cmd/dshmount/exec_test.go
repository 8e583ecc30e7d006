package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/policy"
)

// sessionFromEnv returns DSH_SESSION from an environment list.
func sessionFromEnv(env []string) policy.SessionID {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, envSession+"="); ok {
			return policy.SessionID(v)
		}
	}
	return ""
}

// TestExec_ExplainsRefusalsAndClosesItsSessionAfterTheTree plays a command
// whose write is refused (the file exists and the session never read it)
// and that exits 1: exec prints one line per refusal of its session after
// the command's tree has exited, and closes the session it opened.
func TestExec_ExplainsRefusalsAndClosesItsSessionAfterTheTree(t *testing.T) {
	env := newCLIEnv(t)
	require.NoError(t, os.WriteFile(filepath.Join(env.root, "main.go"), []byte("package main\n"), 0o644))
	admin, err := control.Dial(env.sock)
	require.NoError(t, err)
	defer admin.Close()
	// A refusal of another session before and during the command: not
	// this command's.
	_, err = admin.Write(context.Background(), control.WriteParams{Path: "main.go", Content: "x"})
	require.Error(t, err)

	var session policy.SessionID
	ex := execer{
		lookPath: func(file string) (string, error) { return "/usr/bin/" + file, nil },
		pid:      func() int { return 4242 },
		supervise: func(_, _ string, _ []string, envv []string) (int, error) {
			session = sessionFromEnv(envv)
			c, err := control.Dial(env.sock)
			require.NoError(t, err)
			defer c.Close()
			_, err = c.Write(context.Background(), control.WriteParams{Path: "main.go", Content: "y", Session: session})
			require.Error(t, err, "the session never read main.go")
			_, err = admin.Write(context.Background(), control.WriteParams{Path: "main.go", Content: "z"})
			require.Error(t, err)
			st, err := c.Status(context.Background())
			require.NoError(t, err)
			assert.True(t, hasSession(st, session), "the session is open while the command runs: %s %+v", session, st.Sessions)
			return 1, nil
		},
	}
	var out, errOut bytes.Buffer
	code := execWith(context.Background(), []string{"--socket", env.sock, "--name", "builder", "--", "make"},
		stdio{in: strings.NewReader(""), out: &out, err: &errOut}, ex)
	assert.Equal(t, 1, code)
	var refusals []string
	for line := range strings.SplitSeq(errOut.String(), "\n") {
		if strings.HasPrefix(line, "dshmount: refused ") {
			refusals = append(refusals, line)
		}
	}
	require.Len(t, refusals, 1, errOut.String())
	assert.Equal(t, "dshmount: refused write to main.go: FS_NOT_OBSERVED, the file already exists and you have not read it; read it first, then write with its version",
		refusals[0])

	st, err := admin.Status(context.Background())
	require.NoError(t, err)
	assert.False(t, hasSession(st, session), "the session exec opened is closed once the tree has exited")
}

// TestExec_KeepsANamedSessionAndIsQuietOnSuccess: a session given with
// --session stays open, and a command that exits 0 prints no refusals.
func TestExec_KeepsANamedSessionAndIsQuietOnSuccess(t *testing.T) {
	env := newCLIEnv(t)
	require.NoError(t, os.WriteFile(filepath.Join(env.root, "main.go"), []byte("package main\n"), 0o644))
	admin, err := control.Dial(env.sock)
	require.NoError(t, err)
	defer admin.Close()
	id, err := admin.OpenSession(context.Background(), "kept")
	require.NoError(t, err)
	ex := execer{
		lookPath: func(file string) (string, error) { return "/usr/bin/" + file, nil },
		pid:      func() int { return 4242 },
		supervise: func(_, _ string, _ []string, envv []string) (int, error) {
			_, err := admin.Write(context.Background(), control.WriteParams{Path: "main.go", Content: "y", Session: sessionFromEnv(envv)})
			require.Error(t, err)
			return 0, nil
		},
	}
	var out, errOut bytes.Buffer
	code := execWith(context.Background(), []string{"--socket", env.sock, "--session", string(id), "--", "true"},
		stdio{in: strings.NewReader(""), out: &out, err: &errOut}, ex)
	assert.Equal(t, 0, code)
	assert.NotContains(t, errOut.String(), "refused", "a command that succeeded is not second-guessed")
	st, err := admin.Status(context.Background())
	require.NoError(t, err)
	assert.True(t, hasSession(st, id), "a session given with --session stays open")
}

// TestExec_OwnSessionIsStrict: the session exec opens for a one-off
// command has seen nothing and reads before it writes (strict); --strict
// says so explicitly; with a given session, --strict binds the command
// strictly (the session keeps the rule it was opened with, the binding
// reads before every write) and without it the binding is not strict.
func TestExec_OwnSessionIsStrict(t *testing.T) {
	env := newCLIEnv(t)
	admin, err := control.Dial(env.sock)
	require.NoError(t, err)
	defer admin.Close()
	for _, flags := range [][]string{nil, {"--strict"}} {
		strict := false
		ex := execer{
			lookPath: func(file string) (string, error) { return "/usr/bin/" + file, nil },
			pid:      func() int { return 4242 },
			supervise: func(_, _ string, _ []string, envv []string) (int, error) {
				st, err := admin.Status(context.Background())
				require.NoError(t, err)
				for _, s := range st.Sessions {
					if s.ID == sessionFromEnv(envv) {
						strict = s.Strict
					}
				}
				return 0, nil
			},
		}
		var out, errOut bytes.Buffer
		args := append(append([]string{"--socket", env.sock}, flags...), "--", "true")
		code := execWith(context.Background(), args, stdio{in: strings.NewReader(""), out: &out, err: &errOut}, ex)
		require.Equal(t, 0, code, errOut.String())
		assert.True(t, strict, "exec %v opens a strict session", flags)
	}
	id, err := admin.OpenSession(context.Background(), "agent")
	require.NoError(t, err)
	for pid, flags := range map[int][]string{5151: {"--strict"}, 5252: nil} {
		ex := execer{
			lookPath:  func(string) (string, error) { return "/bin/true", nil },
			pid:       func() int { return pid },
			supervise: func(_, _ string, _ []string, _ []string) (int, error) { return 0, nil },
		}
		var out, errOut bytes.Buffer
		args := append(append([]string{"--socket", env.sock}, flags...), "--session", string(id), "--", "true")
		code := execWith(context.Background(), args, stdio{in: strings.NewReader(""), out: &out, err: &errOut}, ex)
		require.Equal(t, 0, code, errOut.String())
		assert.Equal(t, len(flags) > 0, env.binder.boundStrictly(pid), "exec %v --session binds strictly only with --strict", flags)
	}
}

// hasSession reports whether st lists session id.
func hasSession(st *control.StatusResult, id policy.SessionID) bool {
	for _, s := range st.Sessions {
		if s.ID == id {
			return true
		}
	}
	return false
}

// TestExec_StaleRefusalNamesWhoChangedTheFile: a stale refusal is
// explained with the change that made it stale, in the wording the socket
// and MCP use.
func TestExec_StaleRefusalNamesWhoChangedTheFile(t *testing.T) {
	env := newCLIEnv(t)
	require.NoError(t, os.WriteFile(filepath.Join(env.root, "main.go"), []byte("package main\n"), 0o644))
	admin, err := control.Dial(env.sock)
	require.NoError(t, err)
	defer admin.Close()
	ctx := context.Background()
	other, err := admin.OpenSession(ctx, "other")
	require.NoError(t, err)
	ex := execer{
		lookPath: func(file string) (string, error) { return "/usr/bin/" + file, nil },
		pid:      func() int { return 4242 },
		supervise: func(_, _ string, _ []string, envv []string) (int, error) {
			mine := sessionFromEnv(envv)
			_, err := admin.Read(ctx, control.ReadParams{Path: "main.go", Session: mine})
			require.NoError(t, err)
			_, err = admin.Read(ctx, control.ReadParams{Path: "main.go", Session: other})
			require.NoError(t, err)
			_, err = admin.Edit(ctx, control.EditParams{Path: "main.go", OldString: "main", NewString: "app", Session: other})
			require.NoError(t, err)
			_, err = admin.Edit(ctx, control.EditParams{Path: "main.go", OldString: "package", NewString: "pkg", Session: mine})
			require.Error(t, err)
			return 2, nil
		},
	}
	var out, errOut bytes.Buffer
	code := execWith(ctx, []string{"--socket", env.sock, "--", "make"}, stdio{in: strings.NewReader(""), out: &out, err: &errOut}, ex)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut.String(), "dshmount: refused edit to main.go: FS_STALE_VERSION, changed since you read it (by an edit from session "+
		string(other)+` ("other") over the socket, just now)`)
}
