package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/policy"
)

// The backing-tree watcher: a change made directly in the workspace
// directory shows through the mount at once (the kernel's caches, 10 s by
// default, are dropped) and is audited with channel external. The bound
// checked is the (1 s); the measured latencies are logged.

// visibleWithin is the bound for an out-of-band change.
const visibleWithin = time.Second

// longCaches makes the kernel keep names and attributes for an hour: what
// the mount shows at once is what the watcher invalidated.
var longCaches = []string{"--watch", "--entry-timeout", "1h", "--attr-timeout", "1h"}

// externalEntries lists the daemon's audit entries of channel external.
func externalEntries(t *testing.T, d *daemon) []control.LogEntry {
	t.Helper()
	res, err := d.Client.Log(testCtx(t), control.LogParams{Limit: 10000})
	require.NoError(t, err)
	var out []control.LogEntry
	for _, e := range res.Entries {
		if e.Channel == policy.ChannelExternal {
			out = append(out, e)
		}
	}
	return out
}

// hasExternal reports whether an external entry of op names path.
func hasExternal(entries []control.LogEntry, op policy.MutationOp, path string) bool {
	for _, e := range entries {
		if e.Op == op && e.Path == path {
			return true
		}
	}
	return false
}

// waitVisible polls check until it holds and returns how long that took
// since start; it fails the test past the bound.
func waitVisible(t *testing.T, start time.Time, what string, check func() bool) time.Duration {
	t.Helper()
	for !check() {
		if time.Since(start) > visibleWithin {
			t.Fatalf("%s: not visible through the mount within %v", what, visibleWithin)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}

func readIs(p, want string) func() bool {
	return func() bool {
		b, err := os.ReadFile(p)
		return err == nil && string(b) == want
	}
}

func missing(p string) func() bool {
	return func() bool {
		_, err := os.Lstat(p)
		return os.IsNotExist(err)
	}
}

func TestWatcher_OutOfBandChangesShowAtOnceAndAreAudited(t *testing.T) {
	d := startDaemon(t, daemonOptions{Args: longCaches, Files: map[string]string{
		"a.txt": "original\n", "gone.txt": "soon gone\n", "old.txt": "moving\n", "mode.txt": "m\n", "dir/deep.txt": "d\n",
	}})
	// Warm the kernel's caches: names, attributes, pages, negative entries.
	for _, name := range []string{"a.txt", "gone.txt", "old.txt", "mode.txt", "dir/deep.txt"} {
		_, err := os.ReadFile(d.m(name))
		require.NoError(t, err)
	}
	for _, name := range []string{"new.txt", "new.txt", "dir/new.txt"} {
		_, err := os.Stat(d.m(name))
		require.True(t, os.IsNotExist(err))
	}
	cases := []struct {
		name   string
		op     policy.MutationOp
		path   string
		change func()
		check  func() bool
	}{
		{"write", policy.OpWrite, "a.txt", func() {
			require.NoError(t, os.WriteFile(filepath.Join(d.Src, "a.txt"), []byte("rewritten\n"), 0o644))
		}, readIs(d.m("a.txt"), "rewritten\n")},
		{"create", policy.OpCreate, "new.txt", func() {
			require.NoError(t, os.WriteFile(filepath.Join(d.Src, "new.txt"), []byte("new\n"), 0o644))
		}, readIs(d.m("new.txt"), "new\n")},
		{"create in a subdirectory", policy.OpCreate, "dir/new.txt", func() {
			require.NoError(t, os.WriteFile(filepath.Join(d.Src, "dir/new.txt"), []byte("n\n"), 0o644))
		}, readIs(d.m("dir/new.txt"), "n\n")},
		{"delete", policy.OpDelete, "gone.txt", func() {
			require.NoError(t, os.Remove(filepath.Join(d.Src, "gone.txt")))
		}, missing(d.m("gone.txt"))},
		{"rename", policy.OpRename, "old.txt", func() {
			require.NoError(t, os.Rename(filepath.Join(d.Src, "old.txt"), filepath.Join(d.Src, "renamed.txt")))
		}, func() bool { return missing(d.m("old.txt"))() && readIs(d.m("renamed.txt"), "moving\n")() }},
		{"chmod", policy.OpSetattr, "mode.txt", func() {
			require.NoError(t, os.Chmod(filepath.Join(d.Src, "mode.txt"), 0o600))
		}, func() bool {
			st, err := os.Stat(d.m("mode.txt"))
			return err == nil && st.Mode().Perm() == 0o600
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			tc.change()
			took := waitVisible(t, start, tc.name, tc.check)
			var audited time.Duration
			for !hasExternal(externalEntries(t, d), tc.op, tc.path) {
				require.Less(t, time.Since(start), visibleWithin, "audited as external within the bound")
				time.Sleep(2 * time.Millisecond)
			}
			audited = time.Since(start)
			t.Logf("%s: visible through the mount after %v, audited after %v", tc.name, took, audited)
		})
	}
	entries := externalEntries(t, d)
	for _, e := range entries {
		if e.Op == policy.OpRename {
			assert.Equal(t, "renamed.txt", e.To)
		}
	}
}

// percentile returns the p-th percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

func TestWatcher_VisibilityLatency(t *testing.T) {
	const n = 200
	files := map[string]string{}
	for i := range n {
		files[fmt.Sprintf("f%03d.txt", i)] = "v0\n"
	}
	d := startDaemon(t, daemonOptions{Args: longCaches, Files: files})
	for name := range files {
		_, err := os.ReadFile(d.m(name))
		require.NoError(t, err)
	}
	lat := make([]time.Duration, 0, n)
	for i := range n {
		name := fmt.Sprintf("f%03d.txt", i)
		// An editor's save: a new file renamed over the old name.
		start := time.Now()
		tmp := filepath.Join(d.Src, name+".new")
		require.NoError(t, os.WriteFile(tmp, []byte("saved by an editor\n"), 0o644))
		require.NoError(t, os.Rename(tmp, filepath.Join(d.Src, name)))
		lat = append(lat, waitVisible(t, start, name, readIs(d.m(name), "saved by an editor\n")))
	}
	slices.Sort(lat)
	t.Logf("out-of-band save (write and rename) → visible through the mount, %d changes one at a time: p50 %v p99 %v max %v",
		n, percentile(lat, 0.5), percentile(lat, 0.99), lat[n-1])
	assert.Less(t, percentile(lat, 0.99), visibleWithin)
}

func TestWatcher_BurstOfAThousandFiles(t *testing.T) {
	const n = 1000
	d := startDaemon(t, daemonOptions{Args: longCaches, Files: map[string]string{"keep.txt": "k\n"}})
	// Warm the negative entry of the directory.
	_, err := os.Stat(d.m("burst"))
	require.True(t, os.IsNotExist(err))

	written := make(map[string]time.Time, n)
	for i := range n {
		name := fmt.Sprintf("burst/d%02d/f%04d.txt", i%20, i)
		p := filepath.Join(d.Src, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		written[name] = time.Now()
		require.NoError(t, os.WriteFile(p, []byte(name), 0o644))
	}
	// The audit entry is appended right before the kernel's caches of the
	// path are dropped: its time is when the change became visible.
	var lat []time.Duration
	require.Eventually(t, func() bool {
		lat = lat[:0]
		for _, e := range externalEntries(t, d) {
			if w, ok := written[e.Path]; ok && e.Op == policy.OpCreate {
				lat = append(lat, e.Time.Sub(w))
			}
		}
		return len(lat) >= n
	}, 20*time.Second, 50*time.Millisecond, "every file of the burst is audited as external")
	require.Len(t, lat, n, "each file once")
	for name := range written {
		require.True(t, readIs(d.m(name), name)(), "%s shows through the mount", name)
	}
	slices.Sort(lat)
	t.Logf("burst of %d files written out of band → audited and invalidated: p50 %v p99 %v max %v",
		n, percentile(lat, 0.5), percentile(lat, 0.99), lat[n-1])
	assert.Less(t, percentile(lat, 0.99), visibleWithin)
}

func TestWatcher_TheDaemonsOwnChangesAreNotReportedAgain(t *testing.T) {
	d := startDaemon(t, daemonOptions{Args: []string{"--watch"}, Files: map[string]string{
		"sock.txt": "s\n", "mnt.txt": "m\n", "mv.txt": "v\n", "rm.txt": "r\n", "chmod.txt": "c\n",
	}})
	ctx := testCtx(t)
	_, err := d.Client.Write(ctx, control.WriteParams{Path: "sock.txt", Content: "socket\n", Unconditional: true})
	require.NoError(t, err)
	_, err = d.Client.Write(ctx, control.WriteParams{Path: "sockdir/new.txt", Content: "socket\n", Unconditional: true})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(d.m("mnt.txt"), []byte("mount\n"), 0o644))
	require.NoError(t, os.WriteFile(d.m("mntnew.txt"), []byte("mount\n"), 0o644))
	require.NoError(t, os.Rename(d.m("mv.txt"), d.m("moved.txt")))
	require.NoError(t, os.Remove(d.m("rm.txt")))
	require.NoError(t, os.Chmod(d.m("chmod.txt"), 0o600))
	require.NoError(t, os.MkdirAll(d.m("mntdir/sub"), 0o755))
	require.NoError(t, os.WriteFile(d.m("mntdir/sub/f.txt"), []byte("m\n"), 0o644))
	require.NoError(t, os.Symlink("mnt.txt", d.m("link")))
	// A write through the mount that lasts longer than the watcher's
	// window and the 2 s its create explains: recorded when flushed, not
	// as external before (with passthrough the kernel writes the backing
	// file directly, so the watcher sees every write).
	f, err := os.OpenFile(d.m("slow.txt"), os.O_CREATE|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	_, err = f.WriteString("first half\n")
	require.NoError(t, err)
	time.Sleep(2500 * time.Millisecond)
	_, err = f.WriteString("second half\n")
	require.NoError(t, err)
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, f.Close())

	// An out-of-band marker afterwards: once it is audited, the watcher has
	// handled everything before it.
	require.NoError(t, os.WriteFile(filepath.Join(d.Src, "marker.txt"), []byte("x\n"), 0o644))
	var entries []control.LogEntry
	require.Eventually(t, func() bool {
		entries = externalEntries(t, d)
		return hasExternal(entries, policy.OpCreate, "marker.txt")
	}, 5*time.Second, 5*time.Millisecond)
	var paths []string
	for _, e := range entries {
		paths = append(paths, fmt.Sprintf("%s %s", e.Op, e.Path))
	}
	assert.Equal(t, []string{"create marker.txt"}, paths, "only the out-of-band change is external")
}

func TestWatcher_AnOverflowIsRecoveredByARescan(t *testing.T) {
	const n = 300
	d := startDaemon(t, daemonOptions{Args: append([]string{"--watch-max-pending", "8"}, longCaches...),
		Files: map[string]string{"keep.txt": "k\n", "drop.txt": "d\n"}})
	_, err := os.ReadFile(d.m("drop.txt"))
	require.NoError(t, err)
	for i := range n {
		name := filepath.Join(d.Src, fmt.Sprintf("many/f%03d.txt", i))
		require.NoError(t, os.MkdirAll(filepath.Dir(name), 0o755))
		require.NoError(t, os.WriteFile(name, []byte("x\n"), 0o644))
	}
	require.NoError(t, os.Remove(filepath.Join(d.Src, "drop.txt")))
	require.Eventually(t, func() bool {
		entries := externalEntries(t, d)
		created := 0
		for _, e := range entries {
			if e.Op == policy.OpCreate && filepath.Dir(e.Path) == "many" {
				created++
			}
		}
		return created == n && hasExternal(entries, policy.OpDelete, "drop.txt")
	}, 10*time.Second, 20*time.Millisecond, "the rescan records every change it lost")
	assert.True(t, missing(d.m("drop.txt"))())
	assert.True(t, readIs(d.m("many/f299.txt"), "x\n")())
	assert.Contains(t, d.log(), "the workspace watcher lost events")
	// The rescan watched the new directory.
	require.NoError(t, os.WriteFile(filepath.Join(d.Src, "many/later.txt"), []byte("l\n"), 0o644))
	require.Eventually(t, func() bool { return hasExternal(externalEntries(t, d), policy.OpCreate, "many/later.txt") },
		5*time.Second, 10*time.Millisecond)
}

func TestWatcher_HiddenPathsAreNotAudited(t *testing.T) {
	d := startDaemon(t, daemonOptions{Args: []string{"--watch", "--hide", "/secret"}, Files: map[string]string{"secret/k.txt": "s\n"}})
	require.NoError(t, os.WriteFile(filepath.Join(d.Src, "secret/k.txt"), []byte("changed\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(d.Src, "marker.txt"), []byte("m\n"), 0o644))
	var entries []control.LogEntry
	require.Eventually(t, func() bool {
		entries = externalEntries(t, d)
		return hasExternal(entries, policy.OpCreate, "marker.txt")
	}, 5*time.Second, 5*time.Millisecond)
	for _, e := range entries {
		assert.NotContains(t, e.Path, "secret", "a hidden path's change is not in the view's log")
	}
}
