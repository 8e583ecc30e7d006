package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/policy"
)

// watchProc is a running 'dshmount watch' and its output lines.
type watchProc struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *strings.Builder
	done   chan struct{}
}

// startWatch runs the built binary's watch verb in dir.
func startWatch(t *testing.T, dir string, args ...string) *watchProc {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"watch"}, args...)...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DSH_") && !strings.HasPrefix(kv, "XDG_RUNTIME_DIR=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, envRunDir+"="+t.TempDir())
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p := &watchProc{cmd: cmd, lines: make(chan string, 100), stderr: &strings.Builder{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	require.NoError(t, cmd.Start())
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p
}

// line returns the next output line.
func (p *watchProc) line(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		require.True(t, ok, "watch exited: %s", p.stderr)
		return l
	case <-time.After(15 * time.Second):
		t.Fatalf("no line from watch; stderr: %s", p.stderr)
	}
	return ""
}

// exit waits for the process and returns its exit code.
func (p *watchProc) exit(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		t.Fatal("watch did not exit")
	}
	return p.cmd.ProcessState.ExitCode()
}

// waitWatching waits until the daemon serves a watch (the process has
// subscribed), so the changes that follow are live.
func waitWatching(t *testing.T, cl *control.Client) {
	t.Helper()
	require.Eventually(t, func() bool {
		st, err := cl.Status(context.Background())
		return err == nil && st.Counters[control.MethodWatch].Requests > 0
	}, 15*time.Second, 10*time.Millisecond)
}

func TestCLI_WatchPrintsOneLinePerChangeOfTheTreeUnderARelativePath(t *testing.T) {
	env := newCLIEnv(t)
	require.NoError(t, os.MkdirAll(filepath.Join(env.root, "d", "sub"), 0o755))
	ctx := context.Background()
	cl, err := control.Dial(env.sock)
	require.NoError(t, err)
	defer cl.Close()
	sess, err := cl.OpenSession(ctx, "agent")
	require.NoError(t, err)

	p := startWatch(t, filepath.Join(env.root, "d"), "-r", "--socket", env.sock, ".")
	waitWatching(t, cl)
	_, err = cl.Write(ctx, control.WriteParams{Path: "top.txt", Content: "outside\n", Session: sess})
	require.NoError(t, err)
	_, err = cl.Write(ctx, control.WriteParams{Path: "d/sub/new.txt", Content: "x\n", Session: sess})
	require.NoError(t, err)
	line := p.line(t)
	assert.Regexp(t, regexp.MustCompile(`^\d+ created d/sub/new\.txt by socket session=agent$`), line)
	_, err = cl.Move(ctx, control.MoveParams{From: "d/sub/new.txt", To: "d/moved.txt", Session: sess})
	require.NoError(t, err)
	assert.Regexp(t, regexp.MustCompile(`^\d+ renamed d/sub/new\.txt -> d/moved\.txt by socket session=agent$`), p.line(t))

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGINT))
	assert.Equal(t, exitOK, p.exit(t), "interrupted: a normal end; stderr: %s", p.stderr)
}

func TestCLI_WatchJSONPrintsOneObjectPerLine(t *testing.T) {
	env := newCLIEnv(t)
	ctx := context.Background()
	cl, err := control.Dial(env.sock)
	require.NoError(t, err)
	defer cl.Close()
	since := env.store.LastSeq()
	_, err = cl.Write(ctx, control.WriteParams{Path: "a.txt", Content: "a\n"})
	require.NoError(t, err)
	// --since replays the change made before the watch started.
	p := startWatch(t, env.root, "--json", "--since", jsonNumber(since), "--socket", env.sock, ".")
	var ev control.ChangeEvent
	require.NoError(t, json.Unmarshal([]byte(p.line(t)), &ev))
	assert.Equal(t, "a.txt", ev.Path)
	assert.Equal(t, control.ChangeCreated, ev.Kind)
	assert.Greater(t, ev.Seq, since)
	require.NotNil(t, ev.Actor)
	assert.Equal(t, policy.ChannelSocket, ev.Actor.Channel)
}

func TestCLI_WatchSinceTooOldExitsWithTheSeqToResumeFrom(t *testing.T) {
	env := newCLIEnv(t)
	code, out, stderr := runBinary(t, binRun{dir: env.root}, "watch", "--since", "0", "--socket", env.sock, ".")
	assert.Equal(t, exitFS, code)
	assert.Empty(t, out)
	assert.Contains(t, stderr, "FS_CHANGES_LOST")
	assert.Contains(t, stderr, "--since "+jsonNumber(env.store.LastSeq()))
}

func TestCLI_WatchThatLosesChangesExitsSayingResubscribe(t *testing.T) {
	env := newCLIEnv(t)
	cl, err := control.Dial(env.sock)
	require.NoError(t, err)
	defer cl.Close()
	p := startWatch(t, env.root, "--socket", env.sock, ".")
	waitWatching(t, cl)
	env.store.MarkChangesLost()
	assert.Equal(t, exitFS, p.exit(t))
	assert.Contains(t, p.stderr.String(), "FS_CHANGES_LOST")
	assert.Regexp(t, regexp.MustCompile(`rescan and resubscribe with --since \d+`), p.stderr.String())
}

func TestCLI_WatchHelpAndServeRetentionFlags(t *testing.T) {
	help := helpOf(t, "watch")
	for _, want := range []string{"SEQ KIND PATH [-> TO] by ACTOR", "-r", "-since SEQ", "FS_CHANGES_LOST", "--json"} {
		assert.Contains(t, help, want)
	}
	serve := helpOf(t, "serve")
	assert.Contains(t, serve, "-feed-retention")
	assert.Contains(t, serve, "-feed-max-entries")

	dir := t.TempDir()
	cfg, err := parseServeArgs([]string{dir, dir}, io.Discard, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, policy.DefaultFeedRetention, cfg.FeedRetention)
	assert.Equal(t, uint64(policy.DefaultFeedMaxEntries), cfg.FeedMaxEntries)
	cfg, err = parseServeArgs([]string{"--feed-retention", "2h", "--feed-max-entries", "50", dir, dir}, io.Discard, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 2*time.Hour, cfg.FeedRetention)
	assert.Equal(t, uint64(50), cfg.FeedMaxEntries)
	_, err = parseServeArgs([]string{"--feed-retention", "-1h", dir, dir}, io.Discard, io.Discard)
	assert.Error(t, err)
}

func jsonNumber(v uint64) string {
	b, _ := json.Marshal(v)
	return string(b)
}
