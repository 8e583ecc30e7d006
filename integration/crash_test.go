package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/fuse"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/proctest"
	"github.com/dshmount/dshmount/internal/provider"
)

// crashKills is the number of kill -9 / restart cycles.
const crashKills = 10

// crashOpsPerStep: cycle k kills the daemon after k*crashOpsPerStep
// acknowledged writes, so every cycle stops the load at another moment.
const crashOpsPerStep = 6

// How a crash-test file is written.
const (
	writeInPlace = "mount-in-place" // open O_TRUNC, write, fsync: acknowledged when fsync returns
	writeAtomic  = "mount-atomic"   // temp file, fsync, rename over: acknowledged when rename returns
	writeSocket  = "socket"         // fs.write: acknowledged when the response arrives
)

// crashFile is the ledger of one file: what was acknowledged, what was in
// flight, and every version token the daemon issued for it.
type crashFile struct {
	name, how string

	mu       sync.Mutex
	seq      int
	acked    string
	inflight string                      // "" when no write is in flight
	tokens   map[provider.Version]string // token → content it was issued for ("" unknown)
	audited  []provider.Version          // versions of acknowledged socket writes this cycle
}

// next starts a write: it returns the new content and marks it in flight.
func (f *crashFile) next(cycle int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	// Multi-page content, unique per write, so a torn or mixed file shows.
	var b strings.Builder
	fmt.Fprintf(&b, "%s seq=%d cycle=%d\n", f.name, f.seq, cycle)
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&b, "%s/%d/%04d ........................\n", f.name, f.seq, i)
	}
	f.inflight = b.String()
	return f.inflight
}

// ack records that content was acknowledged (tok: its version, if known).
func (f *crashFile) ack(content string, tok provider.Version) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acked = content
	if f.inflight == content {
		f.inflight = ""
	}
	if tok != "" {
		f.tokens[tok] = content
		f.audited = append(f.audited, tok)
	}
}

// token records a version seen by a read.
func (f *crashFile) token(tok provider.Version) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.tokens[tok]; !ok {
		f.tokens[tok] = ""
	}
}

// crashLoad is one cycle's write load.
type crashLoad struct {
	d         *daemon
	cycle     int
	killAfter int64
	acks      atomic.Int64
	killNow   chan struct{}
	killOnce  sync.Once
	killed    atomic.Bool
	mu        sync.Mutex
	errs      []string
	ops       atomic.Int64
}

func (l *crashLoad) acked() {
	if l.acks.Add(1) >= l.killAfter {
		l.killOnce.Do(func() { close(l.killNow) })
	}
}

// fail records an error; errors after the kill are the crash itself.
func (l *crashLoad) fail(f *crashFile, step string, err error) {
	if l.killed.Load() {
		return
	}
	l.mu.Lock()
	l.errs = append(l.errs, fmt.Sprintf("%s (%s) %s: %v", f.name, f.how, step, err))
	l.mu.Unlock()
}

// TestCrash_Kill9MidLoadKeepsAcknowledgedWritesAndStalesOldTokens kills the
// daemon with SIGKILL under a write load through the mount and the socket,
// ten times at different moments, restarting it each time on the same
// mountpoint and state directory.
func TestCrash_Kill9MidLoadKeepsAcknowledgedWritesAndStalesOldTokens(t *testing.T) {
	var files []*crashFile
	initial := map[string]string{}
	for _, how := range []string{writeInPlace, writeAtomic, writeSocket} {
		for i := 0; i < 4; i++ {
			f := &crashFile{name: fmt.Sprintf("%s-%d.txt", how, i), how: how, tokens: map[provider.Version]string{}}
			f.acked = "initial " + f.name + "\n"
			initial[f.name] = f.acked
			files = append(files, f)
		}
	}
	d := startDaemon(t, daemonOptions{Files: initial})
	dirs := d.dirs()
	daemons := []*daemon{d}
	t.Cleanup(func() {
		// A failure between a kill and the restart leaves a dead mount.
		if mounted(dirs.Mnt) {
			_ = syscall.Unmount(dirs.Mnt, syscall.MNT_DETACH)
		}
	})
	totalOps, stuckCycles := int64(0), 0

	for k := 1; k <= crashKills; k++ {
		// The next daemon is forked now, while the test holds no file on
		// the mount (see daemonOptions.Gated).
		next := startDaemon(t, daemonOptions{Dirs: dirs, Gated: true})
		l := &crashLoad{d: d, cycle: k, killAfter: int64(k * crashOpsPerStep), killNow: make(chan struct{})}
		var wg sync.WaitGroup
		for _, f := range files {
			wg.Add(1)
			go func() { defer wg.Done(); l.writer(t, f) }()
		}
		wg.Add(1)
		go func() { defer wg.Done(); l.reader(files) }()

		select {
		case <-l.killNow:
		case <-time.After(time.Minute):
			l.killed.Store(true)
			killHard(t, d)
			wg.Wait()
			t.Fatalf("cycle %d: only %d writes acknowledged in a minute; errors: %v", k, l.acks.Load(), l.errs)
		}
		l.killed.Store(true)
		stuck := killHard(t, d)
		if !stuck {
			wg.Wait()
			// Opening the directory always reaches the (dead) daemon.
			_, err := os.ReadDir(d.Mnt)
			require.ErrorIs(t, err, syscall.ENOTCONN, "cycle %d: the killed daemon leaves a dead mount behind", k)
		} else {
			// The writers hang on the mount until the restart aborts
			// the stuck daemon's connection.
			stuckCycles++
		}

		old := d
		next.release()
		d = next
		daemons = append(daemons, d)
		wg.Wait()
		totalOps += l.ops.Load()
		require.Empty(t, l.errs, "cycle %d: writes failed before the kill", k)
		require.True(t, mounted(d.Mnt), "cycle %d: the restarted daemon mounts again", k)
		if stuck {
			select {
			case err := <-old.exited:
				old.exited <- err
			case <-time.After(30 * time.Second):
				t.Fatalf("cycle %d: the stuck daemon pid %d still exists after the restart; its threads: %s", k, old.pid(), stuckThreads(old.pid()))
			}
			assert.Contains(t, d.log(), "aborting its FUSE connection", "cycle %d: the restart says why it aborted a connection", k)
		}
		verifyAfterCrash(t, d, files, k)
		t.Logf("cycle %d: killed after %d acknowledged writes (%d started)", k, l.acks.Load(), l.ops.Load())
	}
	t.Logf("%d kills, %d writes started in all; %d killed daemons were stuck in the kernel and recovered by the restart", crashKills, totalOps, stuckCycles)
	stopAndCheckRaces(t, d)
	for _, dd := range daemons[:len(daemons)-1] {
		assertNoDataRace(t, dd)
	}
}

// writer rewrites one file until the daemon dies.
func (l *crashLoad) writer(t *testing.T, f *crashFile) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var c *control.Client
	var sess policy.SessionID
	if f.how == writeSocket {
		var err error
		if c, err = control.Dial(l.d.Socket); err != nil {
			l.fail(f, "dial", err)
			return
		}
		defer c.Close()
		if sess, err = c.OpenSession(ctx, f.name); err != nil {
			l.fail(f, "session.open", err)
			return
		}
		// The guarded write path: observe first.
		rd, err := c.Read(ctx, control.ReadParams{Path: f.name, Session: sess})
		if err != nil {
			l.fail(f, "read", err)
			return
		}
		f.token(rd.Version)
	}
	for !l.killed.Load() {
		content := f.next(l.cycle)
		l.ops.Add(1)
		var tok provider.Version
		var err error
		switch f.how {
		case writeInPlace:
			err = l.writeInPlace(f, content)
		case writeAtomic:
			err = l.writeAtomic(f, content)
		case writeSocket:
			var res *control.WriteResult
			if res, err = c.Write(ctx, control.WriteParams{Path: f.name, Content: content, Session: sess}); err == nil {
				tok = res.Version
			}
		}
		if err != nil {
			l.fail(f, fmt.Sprintf("write #%d of this cycle (own session %s)", l.ops.Load(), sess), err)
			return
		}
		f.ack(content, tok)
		l.acked()
	}
}

// writeInPlace truncates, writes and fsyncs; the fsync is the
// acknowledgement.
func (l *crashLoad) writeInPlace(f *crashFile, content string) error {
	return syncedWrite(l.d.m(f.name), os.O_WRONLY|os.O_TRUNC, content, func() { f.ack(content, "") })
}

// writeAtomic writes a temp file, fsyncs it and renames it over the file.
func (l *crashLoad) writeAtomic(f *crashFile, content string) error {
	tmp := l.d.m(f.name + ".tmp")
	if err := syncedWrite(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, content, func() {}); err != nil {
		return err
	}
	return os.Rename(tmp, l.d.m(f.name))
}

// syncedWrite opens path with flag, writes content and fsyncs it; synced
// runs once the fsync returned, before the close.
func syncedWrite(path string, flag int, content string, synced func()) error {
	fh, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return err
	}
	if _, err := fh.WriteString(content); err != nil {
		fh.Close()
		return err
	}
	if err := fh.Sync(); err != nil {
		fh.Close()
		return fmt.Errorf("fsync: %w", err)
	}
	synced()
	if err := fh.Close(); err != nil {
		return fmt.Errorf("close after fsync: %w", err)
	}
	return nil
}

// reader collects version tokens of every file until the daemon dies.
func (l *crashLoad) reader(files []*crashFile) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := control.Dial(l.d.Socket)
	if err != nil {
		l.fail(files[0], "reader dial", err)
		return
	}
	defer c.Close()
	for i := 0; !l.killed.Load(); i++ {
		f := files[i%len(files)]
		st, err := c.Stat(ctx, control.StatParams{Path: f.name})
		if err != nil {
			l.fail(f, "stat", err)
			return
		}
		f.token(st.Version)
		time.Sleep(time.Millisecond)
	}
}

// verifyAfterCrash checks every file through the new mount and every token
// issued before the crash, then resets the ledger for the next cycle.
func verifyAfterCrash(t *testing.T, d *daemon, files []*crashFile, cycle int) {
	t.Helper()
	ctx := testCtx(t)
	for _, f := range files {
		f.mu.Lock()
		acked, inflight, tokens, audited := f.acked, f.inflight, f.tokens, f.audited
		f.mu.Unlock()

		// An acknowledged socket write is in the audit log, crash or not.
		if len(audited) > 0 {
			log, err := d.Client.Log(ctx, control.LogParams{Path: f.name, Limit: 100000})
			require.NoError(t, err)
			after := map[provider.Version]bool{}
			for _, e := range log.Entries {
				after[e.After] = true
			}
			for _, v := range audited {
				assert.True(t, after[v], "cycle %d: %s: the acknowledged socket write of version %s is missing from the audit log after the crash", cycle, f.name, v)
			}
		}

		mountedBytes, err := os.ReadFile(d.m(f.name))
		require.NoError(t, err, "cycle %d: read %s through the new mount", cycle, f.name)
		backing, err := os.ReadFile(filepath.Join(d.Src, f.name))
		require.NoError(t, err)
		got := string(mountedBytes)
		assert.Equal(t, string(backing), got, "cycle %d: %s: the new mount and the backing file disagree", cycle, f.name)
		switch {
		case got == acked:
		case inflight != "" && got == inflight:
		case inflight != "" && got == "" && f.how == writeInPlace:
			// Killed between the program's O_TRUNC and its write: the
			// program's own save pattern is not atomic.
		default:
			t.Errorf("cycle %d: %s (%s) holds %d bytes starting %q; want the acknowledged write %q or the one in flight %q",
				cycle, f.name, f.how, len(got), head(got), head(acked), head(inflight))
		}

		st, err := d.Client.Stat(ctx, control.StatParams{Path: f.name})
		require.NoError(t, err)
		for tok, content := range tokens {
			if tok == st.Version {
				if content != "" {
					assert.Equal(t, content, got, "cycle %d: %s: the version survived the restart but the content did not", cycle, f.name)
				}
				continue
			}
			_, err := d.Client.Write(ctx, control.WriteParams{Path: f.name, Content: "stale write must not land\n",
				Expected: &control.WriteExpected{Kind: provider.ReplaceIfVersion, Version: tok}})
			if !assert.ErrorIs(t, err, provider.ErrStaleVersion, "cycle %d: %s: pre-crash token %s must be stale", cycle, f.name, tok) {
				continue
			}
			_, err = d.Client.Edit(ctx, control.EditParams{Path: f.name, OldString: f.name, NewString: "stale edit",
				Expected: &control.VersionExpected{Version: tok}})
			assert.ErrorIs(t, err, provider.ErrStaleVersion, "cycle %d: %s: pre-crash token %s must be stale for edits", cycle, f.name, tok)
		}
		after, err := os.ReadFile(filepath.Join(d.Src, f.name))
		require.NoError(t, err)
		require.Equal(t, got, string(after), "cycle %d: %s: a refused stale request changed the file", cycle, f.name)

		f.mu.Lock()
		f.acked, f.inflight, f.tokens, f.audited = got, "", map[provider.Version]string{st.Version: got}, nil
		f.mu.Unlock()
	}
	log, err := d.Client.Log(ctx, control.LogParams{Limit: 5})
	require.NoError(t, err, "cycle %d: the audit log opens after the crash", cycle)
	assert.NotEmpty(t, log.Entries, "cycle %d: the audit log kept its entries", cycle)
}

// killHard sends SIGKILL and waits for the daemon to exit. It reports
// whether the daemon is stuck instead: a killed daemon with a thread
// blocked uninterruptibly in the kernel (dropping a cached name waits for a
// directory lock held by a program's request that only the daemon could
// answer) cannot exit, and its mount hangs rather than dies until the next
// `dshmount serve` on the same state aborts the connection. A daemon that
// is merely slow to exit on a busy machine is not taken for a stuck one:
// stuck means every thread left has been blocked in the kernel (state D)
// for stuckFor, which a dying process waiting for a CPU never is.
func killHard(t *testing.T, d *daemon) (stuck bool) {
	t.Helper()
	const stuckFor = time.Second
	if d.Client != nil {
		d.Client.Close()
		d.Client = nil
	}
	_ = d.cmd.Process.Kill()
	deadline := time.Now().Add(2 * time.Minute)
	var blockedSince time.Time
	for {
		select {
		case err := <-d.exited:
			d.exited <- err
			return false
		case <-time.After(20 * time.Millisecond):
		}
		blocked, err := proctest.BlockedInKernel(d.pid())
		require.NoError(t, err)
		switch {
		case !blocked:
			blockedSince = time.Time{}
		case blockedSince.IsZero():
			blockedSince = time.Now()
		case time.Since(blockedSince) >= stuckFor:
			t.Logf("the killed daemon cannot exit: its threads have been blocked in the kernel for %v: %s", stuckFor, stuckThreads(d.pid()))
			return true
		}
		if time.Now().After(deadline) {
			states, _ := proctest.ThreadStates(d.pid())
			t.Fatalf("the daemon neither exited nor got stuck in the kernel 2 minutes after SIGKILL; its threads: %s", proctest.FormatStates(states))
		}
	}
}

// stuckThreads lists the threads of pid that are not sleeping
// interruptibly, with their state and kernel wait channel.
func stuckThreads(pid int) string {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	var out []string
	for _, task := range tasks {
		stat, err := os.ReadFile(filepath.Join(task, "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) == 0 || f[0] == "S" {
			continue
		}
		wchan, _ := os.ReadFile(filepath.Join(task, "wchan"))
		out = append(out, fmt.Sprintf("%s state %s in %s", filepath.Base(task), f[0], wchan))
	}
	return strings.Join(out, "; ")
}

// head shortens s for messages.
func head(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// TestCrash_FsyncedMountWriteKeepsItsAuditEntry kills the daemon right after
// a program's fsync through the mount returned: the change and its audit
// entry (who wrote, through the mount) both survive.
func TestCrash_FsyncedMountWriteKeepsItsAuditEntry(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"a.txt": "before\n"}})
	dirs := d.dirs()
	next := startDaemon(t, daemonOptions{Dirs: dirs, Gated: true})

	fh, err := os.OpenFile(d.m("a.txt"), os.O_WRONLY, 0)
	require.NoError(t, err)
	// The audit log flushes the store before it answers: before counts
	// whatever the open recorded.
	before := mountEntries(t, d, "a.txt")
	_, err = fh.WriteString("after the fsync\n")
	require.NoError(t, err)
	require.NoError(t, fh.Sync())
	stuck := killHard(t, d) // well within the store's batching interval
	_ = fh.Close()          // the daemon is gone; the close cannot be recorded

	next.release()
	if stuck {
		t.Log("the killed daemon was stuck in the kernel; the restart recovered it")
	}
	got, err := os.ReadFile(next.m("a.txt"))
	require.NoError(t, err)
	assert.Equal(t, "after the fsync\n", string(got))
	after := mountEntries(t, next, "a.txt")
	assert.Greater(t, after, before, "the audit log keeps the fsynced mount write of pid %d", os.Getpid())
}

// mountEntries counts the audit entries of rel made through the mount by
// this process.
func mountEntries(t *testing.T, d *daemon, rel string) int {
	t.Helper()
	log, err := d.Client.Log(testCtx(t), control.LogParams{Path: rel, Limit: 1000})
	require.NoError(t, err)
	n := 0
	for _, e := range log.Entries {
		if e.Channel == policy.ChannelMount && e.PID == int32(os.Getpid()) {
			n++
		}
	}
	return n
}

// TestCrash_UnmountAbortFreesAHungMount: a daemon that answers nothing
// (stopped here; killed and stuck in the kernel is the same to the mount)
// hangs every program on its mount; `dshmount unmount --abort` frees them
// and detaches the mount, and the daemon, once it runs again, sees its mount
// gone and exits cleanly.
func TestCrash_UnmountAbortFreesAHungMount(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: map[string]string{"a.txt": "a\n"}})
	// Not d.dsh: its working directory is the (hung) mount. The test
	// holds no file on the mount, so forking stays safe (daemonOptions.Gated).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	abort := exec.CommandContext(ctx, dshBinary, "unmount", "--abort", d.Mnt)

	device, err := fuse.MountDevice(d.Mnt)
	require.NoError(t, err)
	// SIGSTOP is asynchronous: wait until no thread of the daemon runs.
	require.NoError(t, proctest.Stop(d.pid(), time.Minute))
	defer func() { _ = d.cmd.Process.Signal(syscall.SIGCONT) }()
	// A name never looked up before: no kernel cache can answer it.
	fresh := d.m(fmt.Sprintf("never-looked-up-%d", time.Now().UnixNano()))
	hung, err := proctest.Hang(device, func() error { _, err := os.Stat(fresh); return err }, time.Minute)
	require.NoError(t, err, "a lookup on the mount of a stopped daemon must hang")
	out, err := abort.CombinedOutput()
	require.NoError(t, err, "dshmount unmount --abort: %s", out)
	select {
	case err := <-hung:
		require.Error(t, err, "the hung program gets an error")
	case <-time.After(time.Minute):
		t.Fatal("unmount --abort did not release the hung program")
	}
	assert.False(t, mounted(d.Mnt), "the mount is detached")

	require.NoError(t, d.cmd.Process.Signal(syscall.SIGCONT))
	select {
	case err := <-d.exited:
		d.exited <- err
		assert.NoError(t, err, "the daemon exits cleanly once its mount is gone\n%s", d.log())
	case <-time.After(30 * time.Second):
		t.Fatalf("the daemon did not exit after its mount was aborted\n%s", d.log())
	}
}
