package fuse

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/policy/localstore"
	"github.com/dshmount/dshmount/internal/proctest"
	"github.com/dshmount/dshmount/internal/provider/local"
	"github.com/dshmount/dshmount/internal/viewrules"
)

// childEnv makes the test binary mount SRC at MNT and wait to be killed:
// a daemon that crashes.
const childEnv = "DSH_FUSE_TEST_CHILD_MOUNT"

func TestMain(m *testing.M) {
	if dir := os.Getenv(metaOpsEnv); dir != "" {
		if err := runMetaOps(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		return
	}
	if dir := os.Getenv(cwdEnv); dir != "" {
		if err := runInDir(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		return
	}
	if f := os.Getenv(chmodEnv); f != "" {
		if err := unix.Chmod(f, 0o600); err != nil {
			fmt.Fprintln(os.Stderr, "chmod:", err)
			os.Exit(3)
		}
		return
	}
	if spec := os.Getenv(childEnv); spec != "" {
		if err := runChildMount(spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		return
	}
	os.Exit(m.Run())
}

// runChildMount mounts and blocks; spec is "DIR" holding src/ and mnt/.
func runChildMount(dir string) error {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := localstore.Open(filepath.Join(dir, "state"), policy.DefaultOptions().WithLogger(quiet))
	if err != nil {
		return err
	}
	lfs, err := local.New(filepath.Join(dir, "src"), local.Options{Digests: store})
	if err != nil {
		return err
	}
	view, err := viewrules.New(lfs, viewrules.Rules{})
	if err != nil {
		return err
	}
	if _, err := Mount(filepath.Join(dir, "mnt"), Config{
		Local: lfs, View: view, Engine: policy.NewEngine(store, view), Logger: quiet,
	}); err != nil {
		return err
	}
	fmt.Println("ready")
	select {}
}

func TestCleanupStale_DetachesTheMountOfACrashedDaemon(t *testing.T) {
	dir, child := startChildMount(t)
	mnt := filepath.Join(dir, "mnt")

	require.NoError(t, child.Process.Kill())
	_ = child.Wait()
	_, err := os.ReadDir(mnt)
	require.ErrorIs(t, err, syscall.ENOTCONN, "a crashed daemon leaves a dead mount")

	require.NoError(t, CleanupStale(mnt))
	_, err = os.Stat(mnt)
	require.NoError(t, err)
	assert.False(t, isMounted(t, mnt))
	_, err = os.Stat(filepath.Join(mnt, "a.txt"))
	assert.ErrorIs(t, err, os.ErrNotExist, "the bare mountpoint directory is back")
}

// startChildMount starts a daemon in a child process serving dir/src on
// dir/mnt (with a.txt in it).
func startChildMount(t *testing.T) (dir string, child *exec.Cmd) {
	t.Helper()
	requireFuse(t)
	dir = t.TempDir()
	for _, d := range []string{"src", "mnt"} {
		require.NoError(t, os.Mkdir(filepath.Join(dir, d), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "src", "a.txt"), []byte("a"), 0o644))
	child = exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"="+dir)
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready\n", line)
	_, err = os.Stat(filepath.Join(dir, "mnt", "a.txt"))
	require.NoError(t, err, "the child serves the mount")
	return dir, child
}

// hangOnStoppedDaemon stops the child daemon serving mnt (device) and
// returns the result channel of a program blocked on the mount. SIGSTOP is
// asynchronous, so it waits until every thread of the child is stopped;
// the program looks up a name never used before, which no kernel cache can
// answer; and it returns once that request is waiting on the connection.
func hangOnStoppedDaemon(t *testing.T, child *exec.Cmd, mnt, device string) <-chan error {
	t.Helper()
	require.NoError(t, proctest.Stop(child.Process.Pid, time.Minute))
	fresh := filepath.Join(mnt, fmt.Sprintf("never-looked-up-%d", time.Now().UnixNano()))
	hung, err := proctest.Hang(device, func() error { _, err := os.Stat(fresh); return err }, time.Minute)
	require.NoError(t, err, "a lookup on the mount of a stopped daemon must hang")
	return hung
}

func TestAbortConnection_FreesTheMountOfADaemonThatNoLongerAnswers(t *testing.T) {
	dir, child := startChildMount(t)
	mnt := filepath.Join(dir, "mnt")
	device, err := MountDevice(mnt)
	require.NoError(t, err)
	require.Regexp(t, `^0:[0-9]+$`, device, "a FUSE mount has an anonymous device")

	// A stopped daemon answers nothing: a program touching the mount
	// hangs. (A killed daemon stuck in the kernel is the same to the mount.)
	hung := hangOnStoppedDaemon(t, child, mnt, device)

	require.NoError(t, AbortConnection(device))
	select {
	case err := <-hung:
		require.Error(t, err)
		assert.True(t, errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.ENOTCONN),
			"the waiting program is released with ECONNABORTED or ENOTCONN, got %v", err)
		_, err = os.ReadDir(mnt)
		require.ErrorIs(t, err, syscall.ENOTCONN, "the mount is dead")
	case <-time.After(time.Minute):
		t.Fatal("aborting the connection did not release the waiting program")
	}
	require.NoError(t, CleanupStale(mnt), "an aborted mount is a dead mount")
	assert.False(t, isMounted(t, mnt))
	again, err := MountDevice(mnt)
	require.NoError(t, err)
	assert.Empty(t, again, "nothing is mounted there any more")

	err = AbortConnection(device)
	require.ErrorIs(t, err, ErrNoConnection, "the connection ended with its mount")
	require.Error(t, AbortConnection("garbage"))
	require.Error(t, AbortConnection("0:../../x"))
}

func TestAbortMount_DetachesAHungMountAndRefusesOthers(t *testing.T) {
	dir, child := startChildMount(t)
	mnt := filepath.Join(dir, "mnt")
	device, err := MountDevice(mnt)
	require.NoError(t, err)
	hung := hangOnStoppedDaemon(t, child, mnt, device)

	require.NoError(t, AbortMount(mnt))
	select {
	case err := <-hung:
		require.Error(t, err, "the waiting program gets an error")
	case <-time.After(time.Minute):
		t.Fatal("AbortMount did not release the waiting program")
	}
	assert.False(t, isMounted(t, mnt), "the mount is detached")

	err = AbortMount(mnt)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a mount point")
	err = AbortMount("/")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a FUSE mount")
}

func TestCleanupStale_LiveMountIsAnErrorAndPlainDirIsFine(t *testing.T) {
	e := newEnv(t, envOptions{})
	err := CleanupStale(e.mnt)
	require.ErrorIs(t, err, ErrMounted)
	assert.Contains(t, err.Error(), "dshmount unmount")
	require.NoError(t, CleanupStale(t.TempDir()))
	require.NoError(t, CleanupStale(filepath.Join(t.TempDir(), "missing")), "nothing to clean up")
}

func TestUnmount_BusyMountIsDetachedAfterTheGracePeriod(t *testing.T) {
	requireFuse(t)
	e := newEnv(t, envOptions{})
	e.put("a.txt", "keep")
	f, err := os.Open(e.m("a.txt"))
	require.NoError(t, err)
	defer f.Close()

	require.ErrorIs(t, Unmount(e.mnt, false), syscall.EBUSY, "a clean unmount of a busy mount fails")
	assert.True(t, isMounted(t, e.mnt))

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	require.NoError(t, e.srv.Unmount(ctx))
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond, "it waited for the grace period")
	assert.False(t, isMounted(t, e.mnt), "the name is gone at once")

	// The open file still reads; closing it lets the server finish.
	buf := make([]byte, 4)
	_, err = f.ReadAt(buf, 0)
	require.NoError(t, err)
	assert.Equal(t, "keep", string(buf))
	require.NoError(t, f.Close())
	done := make(chan struct{})
	go func() { e.srv.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the serve loop did not end after the last file was closed")
	}
}

func TestUnmount_IdleMountUnmountsCleanly(t *testing.T) {
	e := newEnv(t, envOptions{})
	require.NoError(t, Unmount(e.mnt, false))
	assert.False(t, isMounted(t, e.mnt))
	e.srv.Wait()
	require.NoError(t, e.srv.Unmount(context.Background()), "unmounting twice is harmless")
}

func TestMount_RefusesIncompleteConfig(t *testing.T) {
	_, err := Mount(t.TempDir(), Config{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Config.Local is required")
	assert.Contains(t, err.Error(), "Config.Engine is required")
}
