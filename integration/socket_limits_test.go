package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/control"
)

// plain builds dshmount without -race once per test binary run.
var plain struct {
	once sync.Once
	path string
	err  error
}

// plainBinary returns a dshmount binary built without the race detector.
func plainBinary(t *testing.T) string {
	t.Helper()
	plain.once.Do(func() {
		plain.path = filepath.Join(filepath.Dir(dshBinary), "dshmount-plain")
		out, err := exec.Command("go", "build", "-o", plain.path, "../cmd/dshmount").CombinedOutput()
		if err != nil {
			plain.err = fmt.Errorf("go build: %w: %s", err, out)
		}
	})
	require.NoError(t, plain.err)
	return plain.path
}

// rssSampler records the peak VmRSS of a process until stopped.
type rssSampler struct {
	peak atomic.Int64
	stop chan struct{}
	done chan struct{}
}

func sampleRSS(t *testing.T, pid int) *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan struct{})}
	s.peak.Store(procStatusKiB(t, pid, "VmRSS"))
	go func() {
		defer close(s.done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err != nil {
				continue
			}
			if kib, ok := statusField(string(b), "VmRSS"); ok && kib > s.peak.Load() {
				s.peak.Store(kib)
			}
		}
	}()
	return s
}

func (s *rssSampler) finish() int64 {
	close(s.stop)
	<-s.done
	return s.peak.Load()
}

// TestSocketLimits_UnterminatedLinesStayWithinThePendingBound is the memory
// half of case 9 of issue 14: 4 connections each send an unterminated 60 MB
// line (each within --max-request-bytes) and stay connected; the daemon
// holds no more than --max-pending-bytes of them, refusing the lines that
// would pass it, and its RSS grows by no more than the bound plus slack.
func TestSocketLimits_UnterminatedLinesStayWithinThePendingBound(t *testing.T) {
	const line = 60 << 20
	const bound = 64 << 20
	// The race detector multiplies a daemon's memory: measure a plain build.
	d := startDaemon(t, daemonOptions{Binary: plainBinary(t),
		Args: []string{"--max-request-bytes", fmt.Sprint(line + 1<<20), "--max-pending-bytes", fmt.Sprint(bound)}})
	pid := d.pid()
	before := procStatusKiB(t, pid, "VmRSS")
	rss := sampleRSS(t, pid)

	conns := make([]*rawConn, 4)
	for i := range conns {
		conns[i] = dialRaw(t, d.Socket)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(conns))
	chunk := bytes.Repeat([]byte{'a'}, 1<<20)
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.nc.SetWriteDeadline(time.Now().Add(3 * time.Minute))
			if _, err := c.nc.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"fs.write","params":{"path":"big.txt","content":"`)); err != nil {
				errs[i] = err
				return
			}
			for n := 0; n < line>>20; n++ {
				if _, err := c.nc.Write(chunk); err != nil {
					errs[i] = fmt.Errorf("after %d MiB: %w", n, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "connection %d: the daemon must keep reading", i)
	}
	time.Sleep(500 * time.Millisecond) // the last fragments are read
	peak := rss.finish()

	// The lines that passed the bound were answered with an error; the
	// others are still held, unterminated.
	refused := 0
	for _, c := range conns {
		require.NoError(t, c.nc.SetReadDeadline(time.Now().Add(200*time.Millisecond)))
		l, err := c.r.ReadBytes('\n')
		if err != nil {
			continue
		}
		refused++
		assert.Contains(t, string(l), "--max-pending-bytes", "a refused line says which bound it hit")
	}
	assert.GreaterOrEqual(t, refused, 3, "at most one 60 MB line fits in 64 MiB")
	growth := peak - before
	t.Logf("daemon RSS %d KiB before, peak %d KiB with 4 × 60 MB unterminated lines (growth %d KiB, bound %d KiB, %d lines refused)", before, peak, growth, bound>>10, refused)
	assert.Less(t, growth, int64(bound>>10+48<<10), "the daemon's RSS grew past the pending bound plus 48 MiB of slack")

	for _, c := range conns {
		_ = c.nc.Close()
	}
	st, err := control.Dial(d.Socket)
	require.NoError(t, err)
	defer st.Close()
	_, err = st.Status(testCtx(t))
	require.NoError(t, err, "the daemon answers afterwards")
	d.stop()
}

// TestSocketLimits_ConnectionFloodCannotStarveTheMount is the descriptor
// half of case 9: a daemon whose descriptor limit is 3,000 gets 4,000
// connections; those past --max-connections are refused with an error
// line, and the mount keeps working throughout.
func TestSocketLimits_ConnectionFloodCannotStarveTheMount(t *testing.T) {
	const maxConns = 64
	d := startDaemon(t, daemonOptions{Args: []string{"--max-connections", fmt.Sprint(maxConns)}, Files: map[string]string{"f.txt": "before\n"}})
	pid := d.pid()
	lim := unix.Rlimit{Cur: 3000, Max: 3000}
	require.NoError(t, unix.Prlimit(pid, unix.RLIMIT_NOFILE, &lim, nil), "lower the daemon's descriptor limit")

	var flood []net.Conn
	t.Cleanup(func() {
		for _, c := range flood {
			_ = c.Close()
		}
	})
	for i := 0; i < 4000; i++ {
		var nc net.Conn
		var err error
		for tries := 0; tries < 1000; tries++ {
			if nc, err = net.Dial("unix", d.Socket); errnoOf(err) != unix.EAGAIN {
				break
			}
			time.Sleep(time.Millisecond)
		}
		require.NoError(t, err, "dial %d", i)
		flood = append(flood, nc)
	}

	// The last connection was refused with an error line, then closed: the
	// daemon has taken every connection off its queue.
	last := flood[len(flood)-1]
	require.NoError(t, last.SetReadDeadline(time.Now().Add(30*time.Second)))
	b, err := io.ReadAll(last)
	require.NoError(t, err)
	assert.Contains(t, string(b), fmt.Sprintf(`"code":%d`, control.CodeUnavailable))
	assert.Contains(t, string(b), "--max-connections")

	// The mount works while the flood is connected.
	require.NoError(t, os.WriteFile(d.m("f.txt"), []byte("during the flood\n"), 0o644), "a write through the mount")
	got, err := os.ReadFile(d.m("f.txt"))
	require.NoError(t, err, "a read through the mount")
	assert.Equal(t, "during the flood\n", string(got))
	for i := 0; i < 50; i++ {
		require.NoError(t, os.WriteFile(d.m(fmt.Sprintf("new-%d.txt", i)), []byte("x\n"), 0o644), "create %d through the mount", i)
	}

	fds := openFDs(t, pid)
	t.Logf("daemon holds %d descriptors with 4,000 connections attempted (cap %d)", fds, maxConns)
	assert.Less(t, fds, 1000, "the refused connections hold no descriptor")

	for _, c := range flood {
		_ = c.Close()
	}
	flood = nil
	require.Eventually(t, func() bool {
		c, err := control.Dial(d.Socket)
		if err != nil {
			return false
		}
		defer c.Close()
		_, err = c.Status(testCtx(t))
		return err == nil
	}, time.Minute, 50*time.Millisecond, "a new client is served once the flood is gone")
	stopAndCheckRaces(t, d)
}

// TestSocketLimits_UnfinishedLineAndIdleConnectionAreClosed checks the
// timeout flags on a real daemon.
func TestSocketLimits_UnfinishedLineAndIdleConnectionAreClosed(t *testing.T) {
	d := startDaemon(t, daemonOptions{Args: []string{"--request-timeout", "300ms", "--idle-timeout", "1s"}})
	half := dialRaw(t, d.Socket)
	_, err := half.nc.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"fs.st`))
	require.NoError(t, err)
	r := half.recv()
	require.NotNil(t, r.Error, r.Raw)
	assert.Contains(t, r.Error.Message, "unfinished after 300ms")
	_, err = half.r.ReadByte()
	assert.True(t, errors.Is(err, io.EOF), "then the connection is closed: %v", err)

	idle := dialRaw(t, d.Socket)
	r = idle.call([]byte(`{"jsonrpc":"2.0","id":1,"method":"daemon.status"}`))
	require.Nil(t, r.Error)
	r = idle.recv()
	require.NotNil(t, r.Error, r.Raw)
	assert.Contains(t, r.Error.Message, "idle for 1s")

	watcher := dialRaw(t, d.Socket)
	r = watcher.call([]byte(`{"jsonrpc":"2.0","id":1,"method":"fs.watch","params":{"path":"."}}`))
	require.Nil(t, r.Error, r.Raw)
	time.Sleep(3 * time.Second)
	watcher.requireAlive() // a quiet watch connection is not idle
	stopAndCheckRaces(t, d)
}
