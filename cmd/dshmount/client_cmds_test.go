package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/policy/localstore"
	"github.com/dshmount/dshmount/internal/provider/local"
	"github.com/dshmount/dshmount/internal/service"
)

// recordingBinder records session.bind calls.
type recordingBinder struct {
	mu     sync.Mutex
	binds  map[policy.SessionID]int
	strict map[int]bool // pids bound strictly (BindStrict)
}

// BindStrict records a strict binding.
func (b *recordingBinder) BindStrict(s policy.SessionID, pid int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.binds[s] = pid
	if b.strict == nil {
		b.strict = map[int]bool{}
	}
	b.strict[pid] = true
	return nil
}

// boundStrictly reports whether pid was bound with BindStrict.
func (b *recordingBinder) boundStrictly(pid int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.strict[pid]
}

func (b *recordingBinder) Bind(s policy.SessionID, pid int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.binds[s] = pid
	return nil
}

// SessionOf answers the session pid was bound to.
func (b *recordingBinder) SessionOf(pid int) (policy.SessionID, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s, p := range b.binds {
		if p == pid {
			return s, true
		}
	}
	return "", false
}

// cliEnv is a daemon's control socket over a temp workspace.
type cliEnv struct {
	root, sock string
	binder     *recordingBinder
	store      *policy.Store
}

// newCLIEnv starts a daemon's control socket; tweak adjusts its Config
// (the workspace backend is cfg.Engine.FS()).
func newCLIEnv(t *testing.T, tweak ...func(*service.Config)) *cliEnv {
	t.Helper()
	t.Setenv(envSocket, "")
	t.Setenv(envSession, "")
	t.Setenv(envRunDir, t.TempDir())
	root := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := localstore.Open(t.TempDir(), policy.DefaultOptions().WithLogger(quiet))
	require.NoError(t, err)
	fs, err := local.New(root, local.Options{Digests: store})
	require.NoError(t, err)
	dir, err := os.MkdirTemp("", "dshcli")
	require.NoError(t, err)
	env := &cliEnv{root: root, sock: filepath.Join(dir, "control.sock"), binder: &recordingBinder{binds: map[policy.SessionID]int{}}, store: store}
	cfg := service.Config{Engine: policy.NewEngine(store, fs), Binder: env.binder, Source: root, Logger: quiet}
	for _, f := range tweak {
		f(&cfg)
	}
	svc, err := service.New(cfg)
	require.NoError(t, err)
	srv, err := control.NewServer(control.Config{SocketPath: env.sock, Service: svc, Logger: quiet})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background()) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return")
		}
		require.NoError(t, store.Close())
		_ = os.RemoveAll(dir)
	})
	return env
}

// run runs the dshmount CLI with stdin and returns exit code, stdout, stderr.
func (e *cliEnv) run(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, stdio{in: strings.NewReader(stdin), out: &out, err: &errOut})
	return code, out.String(), errOut.String()
}

func TestCLI_WriteReadEditRoundTrip(t *testing.T) {
	env := newCLIEnv(t)
	code, out, stderr := env.run(t, "", "session", "open", "--name", "cli", "--socket", env.sock)
	require.Equal(t, exitOK, code, stderr)
	session := strings.TrimSpace(out)
	require.NotEmpty(t, session)

	code, out, stderr = env.run(t, "one\ntwo\n", "write", "notes.txt", "--socket", env.sock, "--session", session)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, out, "created notes.txt, version ")

	// Flags may follow the path.
	code, out, stderr = env.run(t, "", "read", "notes.txt", "--socket", env.sock, "--session", session, "--limit", "1")
	require.Equal(t, exitOK, code, stderr)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Len(t, lines, 2)
	assert.Equal(t, "     1\tone", lines[0])
	assert.True(t, strings.HasPrefix(lines[1], "lines 1-1 of 2, version "), lines[1])

	code, out, stderr = env.run(t, "", "edit", "notes.txt", "--old", "two", "--new", "three", "--socket", env.sock, "--session", session)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, out, "edited notes.txt")
	b, err := os.ReadFile(filepath.Join(env.root, "notes.txt"))
	require.NoError(t, err)
	assert.Equal(t, "one\nthree\n", string(b))
}

func TestCLI_FilesystemErrorExitsOneWithCode(t *testing.T) {
	env := newCLIEnv(t)
	require.NoError(t, os.WriteFile(filepath.Join(env.root, "a.txt"), []byte("a\n"), 0o644))
	code, _, stderr := env.run(t, "", "edit", "a.txt", "--old", "a", "--new", "b", "--version", "not-the-version", "--socket", env.sock)
	assert.Equal(t, exitFS, code)
	assert.True(t, strings.HasPrefix(stderr, "FS_STALE_VERSION: "), stderr)

	code, _, stderr = env.run(t, "", "rm", "a.txt", "--socket", env.sock)
	assert.Equal(t, exitFS, code)
	assert.True(t, strings.HasPrefix(stderr, "FS_NOT_OBSERVED: "), stderr)

	code, _, stderr = env.run(t, "", "read", "missing.txt", "--socket", env.sock)
	assert.Equal(t, exitFS, code)
	assert.True(t, strings.HasPrefix(stderr, "FS_NOT_FOUND: "), stderr)
}

func TestCLI_UsageAndConnectionErrorsExitTwo(t *testing.T) {
	env := newCLIEnv(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"read", "a.txt", "--bogus", "--socket", env.sock}, "flag provided but not defined"},
		{"missing path", []string{"read", "--socket", env.sock}, "expected PATH"},
		{"no socket", []string{"status"}, "no control socket"},
		{"no daemon", []string{"status", "--socket", filepath.Join(t.TempDir(), "none.sock")}, "is the daemon running?"},
		{"unknown session", []string{"stat", "a.txt", "--session", "ghost", "--socket", env.sock}, "unknown session ghost"},
		{"guard conflict", []string{"write", "a.txt", "--create", "--version", "v", "--socket", env.sock}, "exclude each other"},
		{"session action", []string{"session", "frob", "--socket", env.sock}, "unknown session action"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := env.run(t, "", tt.args...)
			assert.Equal(t, exitUsage, code)
			assert.Contains(t, stderr, tt.want)
		})
	}
}

func TestCLI_HelpExplainsEachVerb(t *testing.T) {
	env := newCLIEnv(t)
	for _, v := range clientVerbs() {
		code, out, _ := env.run(t, "", v.name, "--help")
		assert.Equal(t, exitOK, code, v.name)
		assert.Contains(t, out, "Usage: dshmount "+v.name, v.name)
		assert.Contains(t, out, "-socket", v.name)
	}
	code, out, _ := env.run(t, "", "exec", "--help")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, out, "Usage: dshmount exec")
}

func TestCLI_JSONAndPatchAndLog(t *testing.T) {
	env := newCLIEnv(t)
	patch := "*** Begin Patch\n*** Add File: p/q.txt\n+hi\n*** End Patch\n"
	code, out, stderr := env.run(t, patch, "patch", "--json", "--socket", env.sock)
	require.Equal(t, exitOK, code, stderr)
	var res control.PatchResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.True(t, res.Complete)
	require.Len(t, res.Operations, 1)
	assert.Equal(t, "p/q.txt", res.Operations[0].Path)

	code, out, stderr = env.run(t, "", "log", "p/q.txt", "--socket", env.sock)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, out, "write")
	assert.Contains(t, out, "p/q.txt")

	code, out, stderr = env.run(t, "", "ls", "p", "--socket", env.sock)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, out, "q.txt")

	code, _, stderr = env.run(t, "*** Begin Patch\n*** Bogus\n*** End Patch\n", "patch", "--socket", env.sock)
	assert.Equal(t, exitFS, code)
	assert.Contains(t, stderr, "invalid patch at line")
}

func TestExec_BindsOwnPidThenRunsTheCommandWithSessionEnv(t *testing.T) {
	env := newCLIEnv(t)
	var gotPath string
	var gotArgv, gotEnv []string
	ex := execer{
		lookPath: func(file string) (string, error) { return "/usr/bin/" + file, nil },
		pid:      func() int { return 31337 },
		supervise: func(path, _ string, argv, envv []string) (int, error) {
			gotPath, gotArgv, gotEnv = path, argv, envv
			return 7, nil
		},
	}
	var out, errOut bytes.Buffer
	code := execWith(context.Background(), []string{"--socket", env.sock, "--session", "", "--name", "tool", "--", "make", "-j2"},
		stdio{in: strings.NewReader(""), out: &out, err: &errOut}, ex)
	assert.Equal(t, 7, code, "the command's exit status: %s", errOut.String())
	assert.Equal(t, "/usr/bin/make", gotPath)
	assert.Equal(t, []string{"make", "-j2"}, gotArgv)
	env.binder.mu.Lock()
	defer env.binder.mu.Unlock()
	require.Len(t, env.binder.binds, 1)
	for session, pid := range env.binder.binds {
		assert.Equal(t, 31337, pid)
		assert.Contains(t, gotEnv, envSession+"="+string(session))
		assert.Contains(t, errOut.String(), "session "+string(session))
	}
	assert.Contains(t, gotEnv, envSocket+"="+env.sock)
}

func TestCLI_LogRefusedSessionAndSince(t *testing.T) {
	env := newCLIEnv(t)
	require.NoError(t, os.WriteFile(filepath.Join(env.root, "a.txt"), []byte("a\n"), 0o644))
	code, out, stderr := env.run(t, "", "session", "open", "--name", "agent", "--socket", env.sock)
	require.Equal(t, exitOK, code, stderr)
	session := strings.TrimSpace(out)

	code, _, stderr = env.run(t, "evil\n", "write", "a.txt", "--socket", env.sock, "--session", session)
	require.Equal(t, exitFS, code)
	require.True(t, strings.HasPrefix(stderr, "FS_NOT_OBSERVED: "), stderr)
	code, _, stderr = env.run(t, "fine\n", "write", "b.txt", "--socket", env.sock, "--session", session)
	require.Equal(t, exitOK, code, stderr)

	// $DSH_SESSION does not filter the log: only --session does.
	t.Setenv(envSession, "s-someone-else")
	code, out, stderr = env.run(t, "", "log", "--refused", "--socket", env.sock)
	require.Equal(t, exitOK, code, stderr)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Len(t, lines, 1, out)
	assert.Contains(t, lines[0], "write")
	assert.Contains(t, lines[0], "a.txt")
	assert.Contains(t, lines[0], "session "+session+` ("agent")`)
	assert.Contains(t, lines[0], "REFUSED FS_NOT_OBSERVED: the file already exists and you have not read it")

	code, out, stderr = env.run(t, "", "log", "--refused", "--session", session, "--json", "--socket", env.sock)
	require.Equal(t, exitOK, code, stderr)
	var res control.LogResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Len(t, res.Entries, 1)
	refusal := res.Entries[0]
	assert.Equal(t, policy.SessionID(session), refusal.Session)
	assert.Equal(t, "agent", refusal.SessionName, "fs.log entries carry the session's name")
	assert.Equal(t, "FS_NOT_OBSERVED", string(refusal.Refused))
	assert.NotEmpty(t, refusal.Reason)

	code, out, stderr = env.run(t, "", "log", "--refused", "--session", "s-nobody", "--socket", env.sock)
	require.Equal(t, exitOK, code, stderr)
	assert.Empty(t, out)

	code, out, stderr = env.run(t, "", "log", "--since", strconv.FormatUint(refusal.Seq, 10), "--json", "--socket", env.sock)
	require.Equal(t, exitOK, code, stderr)
	res = control.LogResult{}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Len(t, res.Entries, 1, "only what came after the refusal")
	assert.Equal(t, "b.txt", res.Entries[0].Path)
	assert.Empty(t, res.Entries[0].Refused)
}

// TestCLI_ReadThenEditWithoutASessionSaysThereIsNone: without --session or
// $DSH_SESSION each call has a session of its own, so an edit after a read
// in an earlier call is FS_NOT_OBSERVED; the message says there is no
// session and how to open one (not "you have not read this file").
func TestCLI_ReadThenEditWithoutASessionSaysThereIsNone(t *testing.T) {
	env := newCLIEnv(t)
	require.NoError(t, os.WriteFile(filepath.Join(env.root, "a.txt"), []byte("a\n"), 0o644))
	code, _, stderr := runBinary(t, binRun{}, "read", "a.txt", "--socket", env.sock)
	require.Equal(t, exitOK, code, stderr)
	code, out, stderr := runBinary(t, binRun{}, "edit", "a.txt", "--old", "a", "--new", "b", "--socket", env.sock, "--json")
	assert.Equal(t, exitFS, code)
	assert.True(t, strings.HasPrefix(stderr, "FS_NOT_OBSERVED: a.txt: there is no session"), stderr)
	assert.Contains(t, stderr, "export DSH_SESSION=$(dshmount session open --name NAME)")
	assert.Contains(t, out, "there is no session", "--json says it too")

	// With a session, the message is the guard's own.
	code, sid, stderr := runBinary(t, binRun{}, "session", "open", "--name", "s", "--socket", env.sock)
	require.Equal(t, exitOK, code, stderr)
	code, _, stderr = runBinary(t, binRun{env: []string{envSession + "=" + strings.TrimSpace(sid)}},
		"edit", "a.txt", "--old", "a", "--new", "b", "--socket", env.sock)
	assert.Equal(t, exitFS, code)
	assert.Contains(t, stderr, "you have not read this file in this session")
}
