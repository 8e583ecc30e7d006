package proctest

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// spinEnv makes the test binary spin on N busy threads until killed.
const spinEnv = "DSH_PROCTEST_SPIN"

func TestMain(m *testing.M) {
	if os.Getenv(spinEnv) != "" {
		spin()
	}
	os.Exit(m.Run())
}

// spin keeps four locked threads running, so a SIGSTOP has to reach
// threads that are on a CPU or waiting for one.
func spin() {
	for i := 0; i < 4; i++ {
		go func() {
			runtime.LockOSThread()
			//lint:ignore SA5002 the busy loop is the point: a thread on a CPU when SIGSTOP arrives
			for {
			}
		}()
	}
	fmt.Println("spinning")
	select {}
}

// startSpinner starts the spinning child and waits for its line.
func startSpinner(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), spinEnv+"=1")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	buf := make([]byte, 9)
	_, err = out.Read(buf)
	require.NoError(t, err)
	require.Equal(t, "spinning\n", string(buf))
	return cmd
}

func TestStop_ReturnsOnceEveryThreadIsStopped(t *testing.T) {
	cmd := startSpinner(t)
	pid := cmd.Process.Pid
	// The spinner prints its line before the runtime has necessarily
	// started the threads of its locked goroutines: wait for them.
	var states map[int]string
	require.Eventually(t, func() bool {
		var err error
		states, err = ThreadStates(pid)
		return err == nil && len(states) >= 5
	}, time.Minute, 5*time.Millisecond, "the spinner runs several threads: %s", FormatStates(states))
	var err error

	for round := 0; round < 3; round++ {
		require.NoError(t, Stop(pid, time.Minute))
		states, err = ThreadStates(pid)
		require.NoError(t, err)
		for tid, s := range states {
			assert.Equal(t, "T", s, "round %d: thread %d is not stopped: %s", round, tid, FormatStates(states))
		}
		blocked, err := BlockedInKernel(pid)
		require.NoError(t, err)
		assert.False(t, blocked, "a stopped process is not blocked in the kernel")
		require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
	}
}

func TestStop_GoneProcessIsAnError(t *testing.T) {
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	err := Stop(cmd.Process.Pid, time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf("stop pid %d", cmd.Process.Pid))
	states, err := ThreadStates(cmd.Process.Pid)
	require.NoError(t, err)
	assert.Empty(t, states, "a reaped process has no threads")
}

func TestBlockedInKernel_RunningAndZombieProcessesAreNot(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	// Wait until it sleeps: while exec loads the binary it may be in D.
	require.Eventually(t, func() bool {
		states, err := ThreadStates(pid)
		if err != nil || len(states) == 0 {
			return false
		}
		for _, st := range states {
			if st != "S" {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond, "sleep never went to sleep")
	blocked, err := BlockedInKernel(pid)
	require.NoError(t, err)
	assert.False(t, blocked, "a sleeping process")

	require.NoError(t, cmd.Process.Kill())
	// Not reaped: the zombie keeps its one thread in state Z.
	var states map[int]string
	require.Eventually(t, func() bool {
		states, err = ThreadStates(pid)
		return err == nil && allIn(states, "Z")
	}, time.Minute, pollInterval, "the killed child becomes a zombie: %s", FormatStates(states))
	blocked, err = BlockedInKernel(pid)
	require.NoError(t, err)
	assert.False(t, blocked, "a zombie holds nothing")
}

func TestFuseWaiting_RefusesABadDevice(t *testing.T) {
	for _, device := range []string{"garbage", "0:", "0:../../x", "0:1/2"} {
		_, err := FuseWaiting(device)
		require.Error(t, err, device)
		assert.Contains(t, err.Error(), "bad device")
	}
}

func TestStatusBytes_ResidentSetGrowsWithTouchedMemory(t *testing.T) {
	before, err := StatusBytes(os.Getpid(), "VmRSS")
	require.NoError(t, err)
	buf := make([]byte, 64<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	after, err := StatusBytes(os.Getpid(), "VmRSS")
	require.NoError(t, err)
	assert.GreaterOrEqual(t, after-before, int64(32<<20), "64 MiB touched")
	assert.Equal(t, byte(1), buf[len(buf)/2])
	_, err = StatusBytes(os.Getpid(), "NoSuchField")
	assert.Error(t, err)
}
