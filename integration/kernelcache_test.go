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
)

// With the backing-tree watcher (the default) the kernel caches names,
// attributes, missing names and directory listings for an hour. These tests
// pin that the caches are exact anyway: a change made through the mount or
// the socket is visible on the mount the moment it returns, and one made
// out of band within the watcher's bound, for names, missing names,
// attributes, bytes and listings alike.

// names lists a directory of the mount, sorted.
func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	slices.Sort(out)
	return out
}

// warm fills every kernel cache the tests check: the listings of the root
// and of d/, the names and attributes and pages of the files, and the
// absence of the names that do not exist yet.
func warm(t *testing.T, d *daemon) {
	t.Helper()
	names(t, d.Mnt)
	names(t, d.m("d"))
	for _, p := range []string{"a.txt", "d/b.txt"} {
		_, err := os.ReadFile(d.m(p))
		require.NoError(t, err)
	}
	for _, p := range []string{"new.txt", "d/new.txt", "nd", "nd/deep/f.txt"} {
		_, err := os.Lstat(d.m(p))
		require.True(t, os.IsNotExist(err), "%s does not exist yet", p)
	}
}

var cacheFiles = map[string]string{"a.txt": "a\n", "d/b.txt": "b\n"}

func TestKernelCache_MountAndSocketChangesAreVisibleAtOnce(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: cacheFiles})
	ctx := testCtx(t)
	for round := range 2 { // twice: the second round runs on caches the first one filled
		warm(t, d)
		// Through the mount.
		require.NoError(t, os.WriteFile(d.m("new.txt"), []byte("m\n"), 0o644))
		assert.Contains(t, names(t, d.Mnt), "new.txt", "round %d", round)
		require.NoError(t, os.Rename(d.m("new.txt"), d.m("d/new.txt")))
		assert.NotContains(t, names(t, d.Mnt), "new.txt")
		assert.Contains(t, names(t, d.m("d")), "new.txt")
		require.NoError(t, os.Remove(d.m("d/new.txt")))
		assert.NotContains(t, names(t, d.m("d")), "new.txt")
		require.NoError(t, os.MkdirAll(d.m("nd/deep"), 0o755))
		assert.Contains(t, names(t, d.Mnt), "nd")
		require.NoError(t, os.RemoveAll(d.m("nd")))
		assert.NotContains(t, names(t, d.Mnt), "nd")

		// Through the socket: names that were missing, listings, bytes.
		warm(t, d)
		_, err := d.Client.Write(ctx, control.WriteParams{Path: "new.txt", Content: "s\n", Unconditional: true})
		require.NoError(t, err)
		b, err := os.ReadFile(d.m("new.txt"))
		require.NoError(t, err, "a name the kernel cached as missing")
		assert.Equal(t, "s\n", string(b))
		assert.Contains(t, names(t, d.Mnt), "new.txt", "the root's cached listing")
		_, err = d.Client.Write(ctx, control.WriteParams{Path: "nd/deep/f.txt", Content: "deep\n", Unconditional: true})
		require.NoError(t, err)
		b, err = os.ReadFile(d.m("nd/deep/f.txt"))
		require.NoError(t, err, "a directory the kernel cached as missing, made by the publish")
		assert.Equal(t, "deep\n", string(b))
		assert.Contains(t, names(t, d.Mnt), "nd")
		_, err = d.Client.Move(ctx, control.MoveParams{From: "new.txt", To: "d/new.txt", Unconditional: true})
		require.NoError(t, err)
		assert.NotContains(t, names(t, d.Mnt), "new.txt")
		assert.Contains(t, names(t, d.m("d")), "new.txt")
		_, err = d.Client.Write(ctx, control.WriteParams{Path: "a.txt", Content: "a longer line\n", Unconditional: true})
		require.NoError(t, err)
		st, err := os.Stat(d.m("a.txt"))
		require.NoError(t, err)
		assert.Equal(t, int64(len("a longer line\n")), st.Size(), "cached attributes")
		b, err = os.ReadFile(d.m("a.txt"))
		require.NoError(t, err)
		assert.Equal(t, "a longer line\n", string(b))
		_, err = d.Client.Delete(ctx, control.DeleteParams{Path: "d/new.txt", Unconditional: true})
		require.NoError(t, err)
		assert.NotContains(t, names(t, d.m("d")), "new.txt")
		_, err = os.Lstat(d.m("d/new.txt"))
		assert.True(t, os.IsNotExist(err))
		require.NoError(t, os.RemoveAll(d.m("nd")))
		require.NoError(t, os.WriteFile(d.m("a.txt"), []byte("a\n"), 0o644))
	}
}

func TestKernelCache_OutOfBandChangesAreVisibleWithinTheWatchersBound(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: cacheFiles})
	src := func(p string) string { return filepath.Join(d.Src, p) }
	steps := []struct {
		name   string
		change func()
		check  func() bool
	}{
		{"create where the name was cached missing", func() {
			require.NoError(t, os.WriteFile(src("new.txt"), []byte("x\n"), 0o644))
		}, func() bool { return readIs(d.m("new.txt"), "x\n")() && slices.Contains(names(t, d.Mnt), "new.txt") }},
		{"create in a new directory cached missing", func() {
			require.NoError(t, os.MkdirAll(src("nd/deep"), 0o755))
			require.NoError(t, os.WriteFile(src("nd/deep/f.txt"), []byte("deep\n"), 0o644))
		}, func() bool { return readIs(d.m("nd/deep/f.txt"), "deep\n")() }},
		{"rename between listed directories", func() {
			require.NoError(t, os.Rename(src("new.txt"), src("d/new.txt")))
		}, func() bool {
			return !slices.Contains(names(t, d.Mnt), "new.txt") && slices.Contains(names(t, d.m("d")), "new.txt") &&
				missing(d.m("new.txt"))()
		}},
		{"rewrite in place, longer", func() {
			require.NoError(t, os.WriteFile(src("a.txt"), []byte("a longer line\n"), 0o644))
		}, func() bool {
			st, err := os.Stat(d.m("a.txt"))
			return err == nil && st.Size() == int64(len("a longer line\n")) && readIs(d.m("a.txt"), "a longer line\n")()
		}},
		{"mode", func() {
			require.NoError(t, os.Chmod(src("d/b.txt"), 0o600))
		}, func() bool {
			st, err := os.Stat(d.m("d/b.txt"))
			return err == nil && st.Mode().Perm() == 0o600
		}},
		{"delete", func() {
			require.NoError(t, os.Remove(src("d/new.txt")))
		}, func() bool { return missing(d.m("d/new.txt"))() && !slices.Contains(names(t, d.m("d")), "new.txt") }},
	}
	warm(t, d)
	for _, s := range steps {
		// Cache the state before the change: listings, names, attributes.
		names(t, d.Mnt)
		names(t, d.m("d"))
		start := time.Now()
		s.change()
		took := waitVisible(t, start, s.name, s.check)
		t.Logf("%s: visible after %v", s.name, took)
	}
}

func TestKernelCache_AnOutOfBandChangeToAFileTheMountHoldsOpenIsVisible(t *testing.T) {
	d := startDaemon(t, daemonOptions{Files: cacheFiles})
	f, err := os.OpenFile(d.m("a.txt"), os.O_WRONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	st, err := os.Stat(d.m("a.txt")) // cache its attributes
	require.NoError(t, err)
	require.Equal(t, int64(2), st.Size())
	// Counted as the mount's own change while the mount holds the file
	// open for writing, but the kernel must not keep the old size.
	start := time.Now()
	require.NoError(t, os.WriteFile(filepath.Join(d.Src, "a.txt"), []byte("written out of band\n"), 0o644))
	took := waitVisible(t, start, "size of a file held open by the mount", func() bool {
		st, err := os.Stat(d.m("a.txt"))
		return err == nil && st.Size() == int64(len("written out of band\n"))
	})
	t.Logf("visible after %v", took)
}

// TestKernelCache_AListingRefreshesTheAttributesOfHeldFiles pins the
// READDIRPLUS rule (fuse dirHandle.Lookup): a listing carries the backing
// files' current attributes for the files the kernel holds, so the stats
// that follow it cost no request and still show a change made out of band
// that no watcher reported (--watch=false; the kernel's own attributes of
// the files are 10 s old at most, and a write through the mount dropped
// their size and times).
func TestKernelCache_AListingRefreshesTheAttributesOfHeldFiles(t *testing.T) {
	const n = 400 // more than the first listing batch
	d := startDaemon(t, daemonOptions{Args: []string{"--watch=false"}})
	require.NoError(t, os.Mkdir(d.m("l"), 0o755))
	name := func(i int) string { return fmt.Sprintf("l/f%d", i) }
	for i := range n {
		require.NoError(t, os.WriteFile(d.m(name(i)), []byte("through the mount\n"), 0o644))
	}
	const outOfBand = "through the mount\nand out of band\n"
	for i := range n {
		require.NoError(t, os.WriteFile(filepath.Join(d.Src, name(i)), []byte(outOfBand), 0o644))
	}
	before := d.requestCounts()
	assert.Len(t, names(t, d.m("l")), n)
	for i := range n {
		st, err := os.Lstat(d.m(name(i)))
		require.NoError(t, err)
		require.Equal(t, int64(len(outOfBand)), st.Size(), "%s: the size the backing file has", name(i))
	}
	after := d.requestCounts()
	stats := after["GETATTR"] + after["LOOKUP"] - before["GETATTR"] - before["LOOKUP"]
	assert.LessOrEqual(t, float64(stats), requestSlack*n, "the stats after the listing are answered by its attributes")
}

// TestKernelCache_AListingNamesTheFilesTheKernelDoesNotHold pins the other
// half of the READDIRPLUS rule: of a directory whose files the kernel does
// not hold (made out of band), a listing carries attributes for its first
// 256 entries only (fuse readdirPlusCold) and names the rest, so a plain
// listing does not make the daemon look every entry up; a stat of one of
// the rest is a LOOKUP.
func TestKernelCache_AListingNamesTheFilesTheKernelDoesNotHold(t *testing.T) {
	const n, cold = 1000, 256
	d := startDaemon(t, daemonOptions{})
	require.NoError(t, os.Mkdir(filepath.Join(d.Src, "c"), 0o755))
	for i := range n {
		require.NoError(t, os.WriteFile(filepath.Join(d.Src, fmt.Sprintf("c/f%d", i)), []byte("x"), 0o644))
	}
	before := d.requestCounts()
	assert.Len(t, names(t, d.m("c")), n)
	for i := range n {
		_, err := os.Lstat(d.m(fmt.Sprintf("c/f%d", i)))
		require.NoError(t, err)
	}
	after := d.requestCounts()
	lookups := float64(after["LOOKUP"] - before["LOOKUP"])
	assert.InDelta(t, n-cold, lookups, requestSlack*n, "LOOKUPs after listing %d files the kernel did not hold", n)
}
