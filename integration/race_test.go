package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/version"
)

// raceOp is one attempted mutation of the race test.
type raceOp struct {
	Actor   string
	Kind    string // "socket-edit", "socket-write", "mount-write"
	File    string
	Content string // what a success leaves in the file
	Base    provider.Version
	Result  provider.Version
	Start   time.Time // just before the mutation was sent
	Ack     time.Time // when its answer arrived
	OK      bool
	Refusal string // FS code or errno name of a refusal
	Err     string // unexpected error, "" otherwise
}

// raceLedger collects the operations of every actor.
type raceLedger struct {
	mu  sync.Mutex
	ops []raceOp
}

func (l *raceLedger) add(op raceOp) {
	l.mu.Lock()
	l.ops = append(l.ops, op)
	l.mu.Unlock()
}

// raceSeconds is the length of the race run: $DSH_RACE_SECONDS, default 30.
func raceSeconds(t *testing.T) time.Duration {
	t.Helper()
	s := os.Getenv("DSH_RACE_SECONDS")
	if s == "" {
		return 30 * time.Second
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, "DSH_RACE_SECONDS must be a whole number of seconds")
	require.Positive(t, n, "DSH_RACE_SECONDS must be positive")
	return time.Duration(n) * time.Second
}

// TestRace_GuardedMutationsFromSocketAndMountNeverLoseAcknowledgedWork runs
// 32 actors on 4 files: 12 socket sessions editing, 12 socket sessions
// writing and 8 bound processes rewriting through the mount, each reading
// before it mutates. Successes must form a consistent history and every
// refusal must be a stale/unseen guard.
func TestRace_GuardedMutationsFromSocketAndMountNeverLoseAcknowledgedWork(t *testing.T) {
	files := []string{"r0.txt", "r1.txt", "r2.txt", "r3.txt"}
	initial := map[string]string{}
	for _, f := range files {
		initial[f] = "initial-" + f + "\n"
	}
	// The backing-tree watcher is on: nothing here changes the workspace
	// directory out of band, so every change it sees is the daemon's own.
	d := startDaemon(t, daemonOptions{Args: []string{"--watch"}, Files: initial})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	ledger := &raceLedger{}
	begin := time.Now()
	for _, f := range files {
		ledger.add(raceOp{Actor: "initial", Kind: "initial", File: f, Content: initial[f], Start: begin, Ack: begin, OK: true})
	}

	// The mount writers start first: each is a bound helper process.
	const socketEditors, socketWriters, mountWriters = 12, 12, 8
	writers := make([]*mountWriterProc, mountWriters)
	for i := range writers {
		writers[i] = startMountWriter(t, d, ctx, socketEditors+socketWriters+i)
	}

	deadline := time.Now().Add(raceSeconds(t))
	var wg sync.WaitGroup
	for i := 0; i < socketEditors+socketWriters; i++ {
		kind := "socket-edit"
		if i >= socketEditors {
			kind = "socket-write"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			runSocketActor(ctx, t, d, ledger, i, kind, files, deadline)
		}()
	}
	for _, w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run(d, ledger, files, deadline)
		}()
	}
	wg.Wait()
	for _, w := range writers {
		w.stop(t)
	}

	checkRaceHistory(t, d, ledger, files)
	checkNoExternal(t, d, ledger)
	stopAndCheckRaces(t, d)
}

// checkNoExternal fails on every external audit entry: the run makes no
// out-of-band change. Each one is reported with the successes on its path
// acknowledged around it, to tell which own write the watcher misread.
func checkNoExternal(t *testing.T, d *daemon, ledger *raceLedger) {
	t.Helper()
	// The watcher delivers within its window; let the last one land.
	time.Sleep(200 * time.Millisecond)
	ext := externalEntries(t, d)
	ledger.mu.Lock()
	defer ledger.mu.Unlock()
	for _, e := range ext {
		var near []string
		for _, op := range ledger.ops {
			if op.OK && op.File == e.Path && op.Ack.After(e.Time.Add(-300*time.Millisecond)) && op.Start.Before(e.Time.Add(50*time.Millisecond)) {
				near = append(near, fmt.Sprintf("%s %s start %+.1fms ack %+.1fms", op.Actor, op.Kind,
					float64(op.Start.Sub(e.Time).Microseconds())/1000, float64(op.Ack.Sub(e.Time).Microseconds())/1000))
			}
		}
		producer := "no operation"
		for _, op := range ledger.ops {
			if op.File == e.Path && e.After != "" && version.OfBytes([]byte(op.Content)) == e.After {
				producer = fmt.Sprintf("%s %s ok=%v start %+.1fms ack %+.1fms", op.Actor, op.Kind, op.OK,
					float64(op.Start.Sub(e.Time).Microseconds())/1000, float64(op.Ack.Sub(e.Time).Microseconds())/1000)
			}
		}
		t.Errorf("false external entry seq %d: %s %s after %s (bytes of %s); successes near it: %v", e.Seq, e.Op, e.Path, e.After, producer, near)
	}
}

// runSocketActor loops read-then-mutate on random files with its own
// connection and session until deadline.
func runSocketActor(ctx context.Context, t *testing.T, d *daemon, ledger *raceLedger, id int, kind string, files []string, deadline time.Time) {
	actor := fmt.Sprintf("%s-%d", kind, id)
	c, err := control.Dial(d.Socket)
	if err != nil {
		ledger.add(raceOp{Actor: actor, Kind: kind, Err: "dial: " + err.Error()})
		return
	}
	defer c.Close()
	sess, err := c.OpenSession(ctx, actor)
	if err != nil {
		ledger.add(raceOp{Actor: actor, Kind: kind, Err: "session.open: " + err.Error()})
		return
	}
	rng := rand.New(rand.NewPCG(uint64(id), 7))
	for seq := 1; time.Now().Before(deadline); seq++ {
		file := files[rng.IntN(len(files))]
		rd, err := c.Read(ctx, control.ReadParams{Path: file, Session: sess})
		if err != nil {
			ledger.add(raceOp{Actor: actor, Kind: kind, File: file, Err: "read: " + err.Error()})
			continue
		}
		mine := fmt.Sprintf("writer-%d-%d", id, seq)
		op := raceOp{Actor: actor, Kind: kind, File: file, Content: mine + "\n", Base: rd.Version}
		var version provider.Version
		op.Start = time.Now()
		if kind == "socket-edit" && len(rd.Lines) > 0 && rd.Lines[0].Text != "" {
			var res *control.EditResult
			res, err = c.Edit(ctx, control.EditParams{Path: file, OldString: rd.Lines[0].Text, NewString: mine, Session: sess})
			if err == nil {
				version = res.Version
			}
		} else {
			var res *control.WriteResult
			res, err = c.Write(ctx, control.WriteParams{Path: file, Content: mine + "\n", Session: sess})
			if err == nil {
				version = res.Version
			}
		}
		op.Ack = time.Now()
		switch code := provider.CodeOf(err); {
		case err == nil:
			op.OK, op.Result = true, version
		case code == provider.CodeStaleVersion:
			op.Refusal = string(code)
		default:
			op.Err = err.Error()
		}
		ledger.add(op)
	}
}

// mountWriterProc is one bound helper process rewriting files on the mount.
type mountWriterProc struct {
	id      int
	session policy.SessionID
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     *bufio.Scanner
	stderr  strings.Builder
	waited  bool
}

// startMountWriter opens a session and starts the test binary as the
// mount-writer helper under `dshmount exec --session`.
func startMountWriter(t *testing.T, d *daemon, ctx context.Context, id int) *mountWriterProc {
	t.Helper()
	sess, err := openStrict(ctx, d, fmt.Sprintf("mount-writer-%d", id))
	require.NoError(t, err)
	w := &mountWriterProc{id: id, session: sess}
	w.cmd = exec.Command(dshBinary, "exec", "--socket", d.Socket, "--session", string(sess), "--",
		testBinary(t), "-test.run=^TestHelperMountWriter$")
	w.cmd.Env = append(os.Environ(), helperEnv+"="+helperMountWriter)
	w.cmd.Stderr = &w.stderr
	w.in, err = w.cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := w.cmd.StdoutPipe()
	require.NoError(t, err)
	w.out = bufio.NewScanner(stdout)
	require.NoError(t, w.cmd.Start())
	t.Cleanup(func() {
		if !w.waited {
			_ = w.cmd.Process.Kill()
			_ = w.cmd.Wait()
		}
	})
	return w
}

// run drives the helper until deadline, one read-then-rewrite at a time.
func (w *mountWriterProc) run(d *daemon, ledger *raceLedger, files []string, deadline time.Time) {
	actor := fmt.Sprintf("mount-writer-%d", w.id)
	rng := rand.New(rand.NewPCG(uint64(w.id), 11))
	for seq := 1; time.Now().Before(deadline); seq++ {
		file := files[rng.IntN(len(files))]
		content := fmt.Sprintf("writer-%d-%d", w.id, seq)
		op := raceOp{Actor: actor, Kind: "mount-write", File: file, Content: content + "\n", Start: time.Now()}
		if _, err := fmt.Fprintf(w.in, "%s\t%s\n", d.m(file), content); err != nil {
			op.Err = fmt.Sprintf("helper stdin: %v (its stderr is reported when it is stopped)", err)
			ledger.add(op)
			return
		}
		if !w.out.Scan() {
			op.Err = fmt.Sprintf("helper exited: %v (its stderr is reported when it is stopped)", w.out.Err())
			ledger.add(op)
			return
		}
		op.Ack = time.Now()
		r := parseWriterReply(w.out.Text())
		switch {
		case r.OK:
			op.OK = true
		case (r.Step == "open" || r.Step == "write" || r.Step == "close") &&
			(r.Errno == syscall.ESTALE || r.Errno == syscall.EACCES):
			op.Refusal = r.Errno.Error()
		default:
			op.Err = "mount " + r.Line
		}
		ledger.add(op)
	}
}

// stop closes the helper's input and waits for it.
func (w *mountWriterProc) stop(t *testing.T) {
	t.Helper()
	_ = w.in.Close()
	err := w.cmd.Wait()
	w.waited = true
	assert.NoError(t, err, "mount writer %d: %s", w.id, w.stderr.String())
}

// checkRaceHistory verifies the ledger against the final files.
func checkRaceHistory(t *testing.T, d *daemon, ledger *raceLedger, files []string) {
	t.Helper()
	ledger.mu.Lock()
	ops := append([]raceOp(nil), ledger.ops...)
	ledger.mu.Unlock()

	type tally struct{ tried, ok, refused int }
	byKind := map[string]*tally{}
	refusals := map[string]int{}
	unexpected := 0
	for _, op := range ops {
		if op.Kind == "initial" {
			continue
		}
		k := byKind[op.Kind]
		if k == nil {
			k = &tally{}
			byKind[op.Kind] = k
		}
		k.tried++
		switch {
		case op.OK:
			k.ok++
		case op.Refusal != "":
			k.refused++
			refusals[op.Kind+" "+op.Refusal]++
		default:
			unexpected++
			if unexpected <= 20 {
				t.Errorf("%s on %s: not a success and not a stale/unseen refusal: %s", op.Actor, op.File, op.Err)
			}
		}
	}
	for kind, k := range byKind {
		t.Logf("%s: %d tried, %d succeeded, %d refused", kind, k.tried, k.ok, k.refused)
	}
	t.Logf("refusals: %v", refusals)
	assert.Zero(t, unexpected, "operations that failed with an error other than a guard refusal")
	for _, kind := range []string{"socket-edit", "socket-write", "mount-write"} {
		k := byKind[kind]
		if assert.NotNil(t, k, "no %s was tried", kind) {
			assert.Positive(t, k.ok, "no %s ever succeeded: the run proves nothing about it", kind)
		}
	}

	// Socket successes: one per base version, each with a fresh version.
	// Versions name bytes and every actor writes unique content, so a base
	// repeats only for the empty file: a mount writer's open(O_TRUNC)
	// empties the file again and again before it writes, and an agent that
	// read it then may legitimately replace it each time.
	empty := version.OfBytes(nil)
	perBase := map[string][]raceOp{}
	results := map[provider.Version]raceOp{}
	for _, op := range ops {
		if !op.OK || !strings.HasPrefix(op.Kind, "socket") {
			continue
		}
		if op.Base != empty {
			key := op.File + "\x00" + string(op.Base)
			perBase[key] = append(perBase[key], op)
		}
		assert.NotEqual(t, op.Base, op.Result, "%s on %s returned its base version", op.Actor, op.File)
		if prev, dup := results[op.Result]; dup {
			t.Errorf("version %s returned to both %s (%s) and %s (%s)", op.Result, prev.Actor, prev.File, op.Actor, op.File)
		}
		results[op.Result] = op
	}
	for key, list := range perBase {
		if len(list) > 1 {
			file, base, _ := strings.Cut(key, "\x00")
			t.Errorf("%d socket mutations of %s succeeded on the same base version %s: %v", len(list), file, base, list)
		}
	}

	// Final content: the unique string of one success, and no success was
	// started after that one was acknowledged.
	for _, f := range files {
		backing, err := os.ReadFile(filepath.Join(d.Src, f))
		require.NoError(t, err)
		mounted, err := os.ReadFile(d.m(f))
		require.NoError(t, err)
		assert.Equal(t, string(backing), string(mounted), "%s: the mount and the backing file disagree", f)
		var last *raceOp
		for i := range ops {
			if ops[i].OK && ops[i].File == f && ops[i].Content == string(backing) {
				require.Nil(t, last, "%s: content %q claimed by two successes", f, backing)
				last = &ops[i]
			}
		}
		if !assert.NotNil(t, last, "%s holds %q, which no acknowledged write produced", f, backing) {
			continue
		}
		for _, op := range ops {
			if op.OK && op.File == f && op.Start.After(last.Ack) {
				t.Errorf("%s: final content %q is from %s (%s), but %s (%s, %q) started after it was acknowledged and also succeeded",
					f, backing, last.Actor, last.Kind, op.Actor, op.Kind, op.Content)
			}
		}
	}
}
