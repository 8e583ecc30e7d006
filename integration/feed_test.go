package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

// The change feed through a real mount: fs.watch reports every change
// (socket, mount, and with --watch the workspace directory) by the changed
// file's own path, with its kind and actor.

// eventLog reads a watch's events and finds the ones a test waits for.
type eventLog struct {
	t   *testing.T
	w   *control.Watch
	all []control.ChangeEvent
}

// expect waits for an event of path with kind and channel (events of other
// paths or kinds are kept, not failed: the daemon may report a step's
// parts separately) and returns it.
func (l *eventLog) expect(kind control.ChangeKind, path string, channel policy.Channel) control.ChangeEvent {
	l.t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case ev, ok := <-l.w.C:
			require.True(l.t, ok, "the watch ended; events so far: %+v", l.all)
			if n := len(l.all); n > 0 {
				require.Greater(l.t, ev.Seq, l.all[n-1].Seq, "seqs increase")
			}
			l.all = append(l.all, ev)
			if ev.Kind == kind && ev.Path == path && ev.Actor != nil && ev.Actor.Channel == channel {
				return ev
			}
		case <-deadline:
			l.t.Fatalf("no %s %s by %s; got %s", kind, path, channel, describe(l.all))
		}
	}
}

// none checks that no event so far names path.
func (l *eventLog) none(path string) {
	l.t.Helper()
	for _, ev := range l.all {
		assert.NotEqual(l.t, path, ev.Path, "unexpected %+v", ev)
	}
}

func describe(evs []control.ChangeEvent) string {
	var b strings.Builder
	for _, ev := range evs {
		ch := policy.Channel("-")
		if ev.Actor != nil {
			ch = ev.Actor.Channel
		}
		fmt.Fprintf(&b, "\n  %d %s %s %s by %s", ev.Seq, ev.Kind, ev.Path, ev.To, ch)
	}
	return b.String()
}

func watchLog(t *testing.T, d *daemon, p control.WatchParams) *eventLog {
	t.Helper()
	w, err := d.Client.Watch(testCtx(t), p)
	require.NoError(t, err)
	return &eventLog{t: t, w: w}
}

func TestFeed_RecursiveWatchSeesAFileInANewDirectoryByItsOwnPath(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"keep.txt": "k\n"}})
	rec := watchLog(t, d, control.WatchParams{Path: ".", Recursive: true})
	flat := watchLog(t, d, control.WatchParams{Path: "."})
	d.sh("mkdir -p new/inner && echo hi > new/inner/f.txt && echo top > top.txt")
	ev := rec.expect(control.ChangeCreated, "new/inner/f.txt", policy.ChannelMount)
	assert.Empty(t, ev.To)
	rec.expect(control.ChangeCreated, "top.txt", policy.ChannelMount)
	flat.expect(control.ChangeCreated, "new", policy.ChannelMount)
	flat.expect(control.ChangeCreated, "top.txt", policy.ChannelMount)
	flat.none("new/inner")
	flat.none("new/inner/f.txt")
}

func TestFeed_EveryKindFromTheMountTheSocketAndOutside(t *testing.T) {
	d := startDaemon(t, daemonOptions{Args: []string{"--watch"}, Files: map[string]string{"seed.txt": "s\n"}})
	ctx := testCtx(t)
	l := watchLog(t, d, control.WatchParams{Path: ".", Recursive: true})

	// The mount (an unbound shell: no session).
	d.sh("echo one > m.txt")
	ev := l.expect(control.ChangeCreated, "m.txt", policy.ChannelMount)
	require.NotNil(t, ev.Actor.UID)
	assert.Equal(t, uint32(os.Getuid()), *ev.Actor.UID)
	assert.Positive(t, ev.Actor.PID, "the process on the mount")
	assert.Empty(t, ev.Actor.Session)
	d.sh("echo two >> m.txt")
	l.expect(control.ChangeModified, "m.txt", policy.ChannelMount)
	d.sh("chmod 600 m.txt")
	l.expect(control.ChangeAttrib, "m.txt", policy.ChannelMount)
	d.sh("touch -h -d '2001-01-01' m.txt") // times only (plain touch opens the file for writing: see README)
	l.expect(control.ChangeAttrib, "m.txt", policy.ChannelMount)
	d.sh("mv m.txt m2.txt")
	ev = l.expect(control.ChangeRenamed, "m.txt", policy.ChannelMount)
	assert.Equal(t, "m2.txt", ev.To)
	d.sh("rm m2.txt")
	l.expect(control.ChangeDeleted, "m2.txt", policy.ChannelMount)

	// The socket, in a named session.
	sess, err := d.Client.OpenSession(ctx, "agent")
	require.NoError(t, err)
	out, err := d.Client.Write(ctx, control.WriteParams{Path: "s.txt", Content: "a\n", Session: sess})
	require.NoError(t, err)
	ev = l.expect(control.ChangeCreated, "s.txt", policy.ChannelSocket)
	assert.Equal(t, out.Version, ev.Version)
	assert.Equal(t, sess, ev.Actor.Session)
	assert.Equal(t, "agent", ev.Actor.SessionName)
	_, err = d.Client.Edit(ctx, control.EditParams{Path: "s.txt", OldString: "a", NewString: "b", Session: sess})
	require.NoError(t, err)
	l.expect(control.ChangeModified, "s.txt", policy.ChannelSocket)
	_, err = d.Client.Write(ctx, control.WriteParams{Path: "s.txt", Content: "b\n", Session: sess})
	require.NoError(t, err)
	l.expect(control.ChangeAttrib, "s.txt", policy.ChannelSocket) // the same bytes again: times only
	_, err = d.Client.Move(ctx, control.MoveParams{From: "s.txt", To: "s2.txt", Session: sess})
	require.NoError(t, err)
	ev = l.expect(control.ChangeRenamed, "s.txt", policy.ChannelSocket)
	assert.Equal(t, "s2.txt", ev.To)
	_, err = d.Client.Delete(ctx, control.DeleteParams{Path: "s2.txt", Session: sess})
	require.NoError(t, err)
	l.expect(control.ChangeDeleted, "s2.txt", policy.ChannelSocket)

	// Outside: directly in the workspace directory.
	src := func(rel string) string { return filepath.Join(d.Src, rel) }
	require.NoError(t, os.MkdirAll(src("ext/deep"), 0o755))
	require.NoError(t, os.WriteFile(src("ext/deep/e.txt"), []byte("e\n"), 0o644))
	ev = l.expect(control.ChangeCreated, "ext/deep/e.txt", policy.ChannelExternal)
	assert.Empty(t, ev.Actor.Session)
	assert.Zero(t, ev.Actor.PID)
	require.NoError(t, os.WriteFile(src("ext/deep/e.txt"), []byte("changed\n"), 0o644))
	l.expect(control.ChangeModified, "ext/deep/e.txt", policy.ChannelExternal)
	require.NoError(t, os.Chmod(src("ext/deep/e.txt"), 0o600))
	l.expect(control.ChangeAttrib, "ext/deep/e.txt", policy.ChannelExternal)
	require.NoError(t, os.Rename(src("ext/deep/e.txt"), src("ext/e2.txt")))
	ev = l.expect(control.ChangeRenamed, "ext/deep/e.txt", policy.ChannelExternal)
	assert.Equal(t, "ext/e2.txt", ev.To)
	require.NoError(t, os.Remove(src("ext/e2.txt")))
	l.expect(control.ChangeDeleted, "ext/e2.txt", policy.ChannelExternal)
	t.Logf("events:%s", describe(l.all))
}

func TestFeed_SinceReplaysMountChangesAcrossAReconnectWithoutGapOrDuplicate(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	first := watchLog(t, d, control.WatchParams{Path: ".", Recursive: true})
	d.sh("echo a > a.txt")
	first.expect(control.ChangeCreated, "a.txt", policy.ChannelMount)
	// The shell's write is recorded at its close (FLUSH, before the shell
	// returns), as a second event that may reach the feed after the
	// create: a later change's event is after every event of a.txt.
	d.sh("echo m > marker.txt")
	seen := first.expect(control.ChangeCreated, "marker.txt", policy.ChannelMount).Seq
	require.NoError(t, first.w.Close(testCtx(t)))
	require.NoError(t, d.Client.Close())

	d.sh("echo b > b.txt; echo c > c.txt; mkdir dir; echo d > dir/d.txt")
	c, err := control.Dial(d.Socket)
	require.NoError(t, err)
	d.Client = c
	again := watchLog(t, d, control.WatchParams{Path: ".", Recursive: true, Since: &seen})
	assert.Equal(t, seen, again.w.Seq)
	again.expect(control.ChangeCreated, "b.txt", policy.ChannelMount)
	again.expect(control.ChangeCreated, "c.txt", policy.ChannelMount)
	again.expect(control.ChangeCreated, "dir/d.txt", policy.ChannelMount)
	d.sh("echo live > live.txt")
	again.expect(control.ChangeCreated, "live.txt", policy.ChannelMount)
	again.none("a.txt")
	for _, ev := range again.all {
		assert.Greater(t, ev.Seq, seen, "nothing from before since")
	}
}

func TestFeed_APrunedSinceIsChangesLost(t *testing.T) {
	d := startDaemon(t, daemonOptions{Args: []string{"--feed-max-entries", "3", "--feed-prune-interval", "50ms"}})
	ctx := testCtx(t)
	l := watchLog(t, d, control.WatchParams{Path: "."})
	d.sh("echo 0 > f0")
	since := l.expect(control.ChangeCreated, "f0", policy.ChannelMount).Seq - 1
	d.sh("for i in 1 2 3 4 5 6 7 8; do echo $i > f$i; done")
	l.expect(control.ChangeCreated, "f8", policy.ChannelMount)
	var re *control.RPCError
	var retained int
	require.Eventually(t, func() bool {
		// The mount records a file's last write at RELEASE, which the
		// kernel sends after close returns: wait for the prune after it.
		res, err := d.Client.Log(ctx, control.LogParams{Limit: 100})
		require.NoError(t, err)
		retained = len(res.Entries)
		w, err := d.Client.Watch(ctx, control.WatchParams{Path: ".", Since: &since})
		if err == nil {
			_ = w.Close(ctx)
			return false
		}
		return assert.ErrorAs(t, err, &re) && re.Code == provider.CodeChangesLost && retained <= 3
	}, 15*time.Second, 50*time.Millisecond, "the entries after since were pruned; fs.log lists the 3 retained")
	assert.Positive(t, re.Resume)
	resume := re.Resume
	w, err := d.Client.Watch(ctx, control.WatchParams{Path: ".", Since: &resume})
	require.NoError(t, err, "the seq it names is accepted")
	require.NoError(t, w.Close(ctx))
	_, stderr, code := d.dsh("watch", "--since", fmt.Sprint(since), ".")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "FS_CHANGES_LOST")
	assert.Contains(t, stderr, "--since ")
}

func TestFeed_ASubscriberThatDoesNotReadGetsOneLostEvent(t *testing.T) {
	d := startDaemon(t, daemonOptions{Args: []string{"--watch"}})
	nc, err := net.Dial("unix", d.Socket)
	require.NoError(t, err)
	defer nc.Close()
	_, err = nc.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"fs.watch","params":{"path":".","recursive":true}}` + "\n"))
	require.NoError(t, err)
	r := bufio.NewReaderSize(nc, 1<<20)
	first, err := r.ReadBytes('\n')
	require.NoError(t, err)
	require.Contains(t, string(first), `"watch":"w`)
	// 12,000 files made outside while the subscriber reads nothing: more
	// than the socket, the window and the feed's 4,096 hold.
	require.NoError(t, os.MkdirAll(filepath.Join(d.Src, "flood"), 0o755))
	for i := range 12000 {
		require.NoError(t, os.WriteFile(filepath.Join(d.Src, "flood", fmt.Sprintf("f%05d", i)), nil, 0o644))
	}
	// Read only once the daemon has recorded them all: a reader that starts
	// while a slow (loaded) watcher is still recording could keep up with it
	// and rightly never lose anything.
	var start struct {
		Result control.WatchResult
	}
	require.NoError(t, json.Unmarshal(first, &start))
	require.Eventually(t, func() bool {
		res, err := d.Client.Log(testCtx(t), control.LogParams{Limit: 1})
		return err == nil && len(res.Entries) == 1 && res.Entries[0].Seq >= start.Result.Seq+12000
	}, 2*time.Minute, 50*time.Millisecond, "the daemon never recorded the 12,000 out-of-band files")
	var lost, changes int
	require.NoError(t, nc.SetReadDeadline(time.Now().Add(60*time.Second)))
	for lost == 0 {
		line, err := r.ReadBytes('\n')
		require.NoError(t, err, "after %d changes", changes)
		var n struct {
			Method string
			Params control.ChangeEvent
		}
		require.NoError(t, json.Unmarshal(line, &n))
		require.Equal(t, control.NotifyChanged, n.Method)
		if n.Params.Kind == control.ChangeLost {
			lost++
		} else {
			changes++
		}
	}
	t.Logf("%d changes before the lost event", changes)
	// The watch is over: unwatching it is an error, and no notification
	// comes before that answer.
	_, err = nc.Write([]byte(`{"jsonrpc":"2.0","id":2,"method":"fs.unwatch","params":{"watch":"w1"}}` + "\n"))
	require.NoError(t, err)
	line, err := r.ReadBytes('\n')
	require.NoError(t, err)
	assert.Contains(t, string(line), `"id":2`)
	assert.Contains(t, string(line), `"error"`)
}

func TestFeed_HiddenPathsNeverAppear(t *testing.T) {
	d := startDaemon(t, daemonOptions{Args: []string{"--watch", "--hide", "/secret"}, Files: map[string]string{"secret/k.txt": "s\n"}})
	_, err := d.Client.Watch(testCtx(t), control.WatchParams{Path: "secret"})
	require.Error(t, err, "a hidden path cannot be watched")
	l := watchLog(t, d, control.WatchParams{Path: ".", Recursive: true})
	require.NoError(t, os.WriteFile(filepath.Join(d.Src, "secret", "k.txt"), []byte("changed\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(d.Src, "secret", "new.txt"), []byte("n\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(d.Src, "visible.txt"), []byte("v\n"), 0o644))
	l.expect(control.ChangeCreated, "visible.txt", policy.ChannelExternal)
	d.sh("echo m > after.txt")
	l.expect(control.ChangeCreated, "after.txt", policy.ChannelMount)
	for _, ev := range l.all {
		assert.False(t, strings.HasPrefix(ev.Path, "secret") || strings.HasPrefix(ev.To, "secret"), "%+v", ev)
	}
}

func TestFeed_CLIWatchInASubdirectoryOfTheMount(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"sub/inner/keep": "k\n"}})
	cmd := exec.Command(dshBinary, "watch", "-r", ".")
	cmd.Dir = d.m("sub")
	cmd.Env = append(os.Environ(), "DSH_SOCKET="+d.Socket)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	require.Eventually(t, func() bool {
		st, err := d.Client.Status(testCtx(t))
		return err == nil && st.Counters[control.MethodWatch].Requests > 0
	}, 15*time.Second, 10*time.Millisecond, "the CLI subscribed")
	d.sh("echo outside > top.txt; echo x > sub/inner/f.txt")
	select {
	case line := <-lines:
		assert.Regexp(t, regexp.MustCompile(`^\d+ created sub/inner/f\.txt by mount pid=\d+ uid=\d+$`), line, "stderr: %s", stderr.String())
	case <-time.After(15 * time.Second):
		t.Fatalf("no line; stderr: %s", stderr.String())
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	select {
	case <-exited:
		require.NoError(t, waitErr, "interrupted: exit 0; stderr: %s", stderr.String())
	case <-time.After(15 * time.Second):
		t.Fatal("watch did not exit on SIGINT")
	}
}

func TestFeed_NotificationLatency(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	l := watchLog(t, d, control.WatchParams{Path: ".", Recursive: true})
	const n = 100
	took := make([]time.Duration, 0, n)
	for i := range n {
		name := fmt.Sprintf("lat%03d.txt", i)
		start := time.Now()
		require.NoError(t, os.WriteFile(d.m(name), []byte("x\n"), 0o644))
		l.expect(control.ChangeCreated, name, policy.ChannelMount)
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	t.Logf("mount create → fs.changed (window %v included): p50 %v, p99 %v, max %v",
		control.DefaultWatchWindow, took[n/2], took[n*99/100], took[n-1])
	assert.Less(t, took[n*99/100], time.Second, "the issue's bound")
}
