package fuse

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// metaOpsEnv makes the test binary run metaOpsRounds rounds of metadata
// operations under the directory it names (runMetaOps) and exit: the
// program a signal storm is aimed at.
const metaOpsEnv = "DSH_FUSE_TEST_META_OPS"

// metaOpsRounds is how many rounds runMetaOps does.
const metaOpsRounds = 400

// runMetaOps does, metaOpsRounds times, the quick metadata operations a
// build or a test suite does all the time (mkdir, chmod, chown, create,
// rename, unlink, rmdir), with raw system calls that do not retry EINTR,
// and returns the first failure.
func runMetaOps(dir string) error {
	for i := range metaOpsRounds {
		d := filepath.Join(dir, "d"+strconv.Itoa(i))
		f, g := filepath.Join(d, "f"), filepath.Join(d, "g")
		steps := []struct {
			name string
			call func() error
		}{
			{"mkdir", func() error { return unix.Mkdir(d, 0o755) }},
			{"chmod dir", func() error { return unix.Chmod(d, 0o750) }},
			{"chown dir", func() error { return unix.Chown(d, os.Getuid(), os.Getgid()) }},
			{"create", func() error {
				fd, err := unix.Open(f, unix.O_CREAT|unix.O_WRONLY|unix.O_EXCL, 0o644)
				if err == nil {
					err = unix.Close(fd)
				}
				return err
			}},
			{"chmod file", func() error { return unix.Chmod(f, 0o600) }},
			{"truncate", func() error { return unix.Truncate(f, 0) }},
			{"rename", func() error { return unix.Rename(f, g) }},
			{"unlink", func() error { return unix.Unlink(g) }},
			{"rmdir", func() error { return unix.Rmdir(d) }},
		}
		for _, s := range steps {
			if err := s.call(); err != nil {
				return fmt.Errorf("round %d: %s: %w", i, s.name, err)
			}
		}
	}
	return nil
}

// TestMount_SignalStormDoesNotInterruptQuickMetadataOperations: a program
// that receives signals all the time (a Go program's SIGURG preemption
// does) makes the kernel send FUSE_INTERRUPT for the request it waits on.
// A quick metadata operation must finish anyway, on the workspace's mount
// and on a branch's: only a real wait (a lock held by a slow peer, a
// commit) may answer EINTR.
func TestMount_SignalStormDoesNotInterruptQuickMetadataOperations(t *testing.T) {
	t.Run("workspace", func(t *testing.T) {
		e := newEnv(t, envOptions{})
		stormed(t, metaOpsEnv+"="+e.mnt, 2*time.Minute)
	})
	t.Run("branch", func(t *testing.T) {
		be := newBranchEnv(t, envOptions{})
		stormed(t, metaOpsEnv+"="+be.bmnt, 2*time.Minute)
	})
}

// TestMount_InterruptEndsAWaitThatReallyBlocks: a chmod waiting for a
// file's lock held by a slow peer answers EINTR once the program has been
// interrupted for interruptGrace (a killed program's request must end).
func TestMount_InterruptEndsAWaitThatReallyBlocks(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.put("f", "x")
	unlock, err := e.lfs.Lock(t.Context(), e.lfs.TargetForRel("f").Key)
	require.NoError(t, err)
	defer unlock()
	start := time.Now()
	err = stormedErr(t, chmodEnv+"="+e.m("f"), 30*time.Second)
	require.Error(t, err, "a chmod waiting for a held lock under signals")
	require.Contains(t, err.Error(), "interrupted system call")
	require.GreaterOrEqual(t, time.Since(start), interruptGrace, "the wait went on for interruptGrace")
}

// chmodEnv makes the test binary chmod the file it names once and exit.
const chmodEnv = "DSH_FUSE_TEST_CHMOD"

// stormed runs the test binary with env under a storm of signals and
// requires it to succeed.
func stormed(t *testing.T, env string, limit time.Duration) {
	t.Helper()
	require.NoError(t, stormedErr(t, env, limit), "a program doing metadata operations under a signal storm")
}

// stormedErr runs the test binary with env (metaOpsEnv, chmodEnv) and
// sends it SIGURG every 20 µs until it exits; it returns the program's
// failure with its stderr.
func stormedErr(t *testing.T, env string, limit time.Duration) error {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), env)
	var stderr bytes.Buffer
	child.Stderr = &stderr
	require.NoError(t, child.Start())
	done := make(chan error, 1)
	go func() { done <- child.Wait() }()
	signals := 0
	deadline := time.After(limit)
	for {
		select {
		case err := <-done:
			t.Logf("%d signals sent", signals)
			if err != nil {
				return fmt.Errorf("%w: %s", err, stderr.String())
			}
			require.Greater(t, signals, 100, "the storm reached the program")
			return nil
		case <-deadline:
			_ = child.Process.Kill()
			t.Fatalf("the program did not finish within %s", limit)
		default:
		}
		// SIGURG: a Go program's runtime catches it and goes on.
		if unix.Kill(child.Process.Pid, unix.SIGURG) == nil {
			signals++
		}
		time.Sleep(20 * time.Microsecond)
	}
}
