package integration

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/policy"
)

// The mount keeps descriptors of backing directories (serve --dir-fds). A
// directory moved out of the workspace out of band takes its descriptor
// along: once the watcher reported the move, and without a watcher at all,
// nothing done through the mount under the old path reaches it.

// dirMovedOut warms the mount's descriptor of dir (a lookup below it),
// holds the directory open on the mount (a process whose working directory
// it is), moves it out of the workspace and returns the held descriptor and
// the directory's new path.
func dirMovedOut(t *testing.T, d *daemon) (int, string) {
	t.Helper()
	_, err := os.Stat(d.m("dir/f.txt"))
	require.NoError(t, err)
	held, err := unix.Open(d.m("dir"), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = unix.Close(held) })
	outside := filepath.Join(filepath.Dir(d.Src), "outside")
	require.NoError(t, os.MkdirAll(outside, 0o755))
	to := filepath.Join(outside, "dir")
	require.NoError(t, os.Rename(filepath.Join(d.Src, "dir"), to))
	return held, to
}

// requireOutsideUntouched stats, creates and unlinks under the old path,
// by name and through the held descriptor, and checks that none of it
// reached the moved directory.
func requireOutsideUntouched(t *testing.T, d *daemon, held int, outside string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "g.txt"), []byte("g\n"), 0o644))
	var st unix.Stat_t
	assert.Error(t, unix.Fstatat(held, "g.txt", &st, unix.AT_SYMLINK_NOFOLLOW), "stat through the held directory")
	fd, err := unix.Openat(held, "new.txt", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err == nil {
		_ = unix.Close(fd)
	}
	assert.Error(t, err, "create through the held directory")
	assert.Error(t, unix.Unlinkat(held, "f.txt", 0), "unlink through the held directory")
	_, err = os.Stat(d.m("dir/g.txt"))
	assert.Error(t, err, "stat by name")
	assert.Error(t, os.WriteFile(d.m("dir/new2.txt"), []byte("x"), 0o644), "create by name")
	assert.Error(t, os.Remove(d.m("dir/g.txt")), "unlink by name")
	assert.NoFileExists(t, filepath.Join(outside, "new.txt"))
	assert.NoFileExists(t, filepath.Join(outside, "new2.txt"))
	assert.FileExists(t, filepath.Join(outside, "f.txt"))
	assert.FileExists(t, filepath.Join(outside, "g.txt"))
}

func TestDirFDs_ADirectoryMovedOutIsNotFollowedOnceTheWatcherReportedIt(t *testing.T) {
	requireFUSE(t)
	d := startDaemon(t, daemonOptions{Args: longCaches, Files: map[string]string{"dir/f.txt": "f\n"}})
	held, outside := dirMovedOut(t, d)
	start := time.Now()
	for !hasExternal(externalEntries(t, d), policy.OpDelete, "dir") {
		require.Less(t, time.Since(start), 10*time.Second, "the watcher reports the move")
		time.Sleep(2 * time.Millisecond)
	}
	requireOutsideUntouched(t, d, held, outside)
}

func TestDirFDs_WithoutTheWatcherAMovedDirectoryIsNeverFollowed(t *testing.T) {
	requireFUSE(t)
	d := startDaemon(t, daemonOptions{Args: []string{"--watch=false", "--dir-fds", "64"}, Files: map[string]string{"dir/f.txt": "f\n"}})
	held, outside := dirMovedOut(t, d)
	requireOutsideUntouched(t, d, held, outside)
}
