package procbind

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeTask is one thread of a fake /proc entry.
type fakeTask struct {
	tid    int
	state  string // "S", "D", "Z", ...
	sigPnd uint64
	shdPnd uint64
}

// writeFakeProc lays out /proc/PID/{stat,status,task/TID/status} under root.
func writeFakeProc(t *testing.T, root string, pid int, start uint64, tasks ...fakeTask) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(pid))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "task"), 0o755))
	stat := fmt.Sprintf("%d (dsh (x)) S 1 %d %d 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n", pid, pid, pid, start)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644))
	for _, task := range tasks {
		status := fmt.Sprintf("Name:\tdsh\nState:\t%s (x)\nTgid:\t%d\nPid:\t%d\nSigPnd:\t%016x\nShdPnd:\t%016x\n",
			task.state, pid, task.tid, task.sigPnd, task.shdPnd)
		tdir := filepath.Join(dir, "task", strconv.Itoa(task.tid))
		require.NoError(t, os.MkdirAll(tdir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(tdir, "status"), []byte(status), 0o644))
		if task.tid == pid {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "status"), []byte(status), 0o644))
		}
	}
}

func TestLifecycleOf_FakeProc(t *testing.T) {
	const pid, start = 4242, 777
	cases := []struct {
		name  string
		start uint64
		tasks []fakeTask
		want  Lifecycle
	}{
		{"running threads", start, []fakeTask{{tid: pid, state: "S"}, {tid: pid + 1, state: "R"}}, Running},
		{"pid reused by another process", start + 1, []fakeTask{{tid: pid, state: "S"}}, Gone},
		{"zombie with no thread left", start, []fakeTask{{tid: pid, state: "Z"}}, Gone},
		{"killed thread stuck in the kernel", start, []fakeTask{{tid: pid, state: "Z"}, {tid: pid + 1, state: "D", sigPnd: sigkillBit}}, Dying},
		{"stuck leader with SIGKILL pending", start, []fakeTask{{tid: pid, state: "D", sigPnd: sigkillBit}}, Dying},
		{"group SIGKILL in the shared mask", start, []fakeTask{{tid: pid, state: "S", shdPnd: sigkillBit | 1<<14}}, Dying},
		{"leader exited, threads live", start, []fakeTask{{tid: pid, state: "Z"}, {tid: pid + 1, state: "S"}}, Dying},
		{"other signals pending only", start, []fakeTask{{tid: pid, state: "S", sigPnd: 1 << 14, shdPnd: 1 << 1}}, Running},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			writeFakeProc(t, root, pid, start, c.tasks...)
			got, err := lifecycleOf(root, pid, c.start)
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
	got, err := lifecycleOf(t.TempDir(), pid, start)
	require.NoError(t, err)
	assert.Equal(t, Gone, got, "no /proc entry at all")
}

func TestLifecycleOf_RealProcess(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	pid := cmd.Process.Pid
	start, err := StartTime(pid)
	require.NoError(t, err)

	got, err := LifecycleOf(pid, start)
	require.NoError(t, err)
	assert.Equal(t, Running, got)
	got, err = LifecycleOf(pid, start+1)
	require.NoError(t, err)
	assert.Equal(t, Gone, got, "another start time is another process")

	require.NoError(t, cmd.Process.Kill())
	// Unreaped: a zombie with no live thread holds nothing any more.
	require.Eventually(t, func() bool {
		got, err := LifecycleOf(pid, start)
		return err == nil && got == Gone
	}, 10*time.Second, 10*time.Millisecond)
	_ = cmd.Wait()
	got, err = LifecycleOf(pid, start)
	require.NoError(t, err)
	assert.Equal(t, Gone, got)
}

// TestTaskStart_AgreesWithProcInfo pins that the allocation-free reader of
// the FUSE path reads the same start time as the full parser.
func TestTaskStart_AgreesWithProcInfo(t *testing.T) {
	got, err := TaskStart(os.Getpid())
	require.NoError(t, err)
	want, err := StartTime(os.Getpid())
	require.NoError(t, err)
	assert.Equal(t, want, got)
	_, err = TaskStart(-1)
	assert.Error(t, err)

	line := []byte("4242 (my (weird) cmd) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100\n")
	start, ok := statStart(line)
	assert.True(t, ok)
	assert.Equal(t, uint64(987654), start)
	_, ok = statStart([]byte("4242 (x) S 1 2"))
	assert.False(t, ok)
}

// BenchmarkTaskStart is the cost of checking a FUSE caller's incarnation.
func BenchmarkTaskStart(b *testing.B) {
	pid := os.Getpid()
	for i := 0; i < b.N; i++ {
		if _, err := TaskStart(pid); err != nil {
			b.Fatal(err)
		}
	}
}
