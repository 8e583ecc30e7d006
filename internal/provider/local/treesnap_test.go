package local

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// recount is the from-scratch count of the paths below each directory.
func recount[V any](paths map[string]V) belowCounts {
	c := belowCounts{}
	for p := range paths {
		for q := range paths {
			if under(q, p) {
				c[p]++
			}
		}
	}
	// Directories that are not themselves in the set count too.
	for q := range paths {
		for i := range len(q) {
			if dir := q[:i]; q[i] == '/' {
				if _, in := paths[dir]; !in {
					c[dir]++
				}
			}
		}
	}
	return c
}

func TestTreeSnap_BelowIsExactWhateverTheOrderOfChanges(t *testing.T) {
	dir := TreeStat{Mode: unix.S_IFDIR}
	file := TreeStat{Mode: unix.S_IFREG}
	type op struct {
		put, del   string // one of them
		dir        bool   // put a directory
		from, to   string // or a move of what is below from
		wantBelow  string // then below(wantBelow) must be want
		want       []string
		wantAbsent bool // wantBelow has no count at all
	}
	tests := []struct {
		name string
		ops  []op
	}{
		{"a path below a directory missing from the snapshot still counts", []op{
			{put: "a", dir: true}, {put: "a/b/c"}, {wantBelow: "a", want: []string{"a/b/c"}},
			{wantBelow: "a/b", want: []string{"a/b/c"}},
		}},
		{"children deleted first leave nothing below", []op{
			{put: "a", dir: true}, {put: "a/b", dir: true}, {put: "a/b/f"}, {put: "a/g"},
			{del: "a/b/f"}, {del: "a/b"}, {wantBelow: "a/b", wantAbsent: true},
			{del: "a/g"}, {wantBelow: "a", wantAbsent: true},
		}},
		{"putting a known path again counts it once", []op{
			{put: "a/f"}, {put: "a/f"}, {wantBelow: "a", want: []string{"a/f"}},
			{del: "a/f"}, {wantBelow: "a", wantAbsent: true},
		}},
		{"deleting an unknown path changes nothing", []op{
			{put: "a/f"}, {del: "a/g"}, {del: "a/f/x"}, {wantBelow: "a", want: []string{"a/f"}},
		}},
		{"a sibling with the directory's name as prefix is not below it", []op{
			{put: "a/f"}, {put: "ab/f"}, {put: "a.b/f"}, {wantBelow: "a", want: []string{"a/f"}},
		}},
		{"moving a directory's contents moves their counts", []op{
			{put: "a", dir: true}, {put: "a/b", dir: true}, {put: "a/b/f"}, {put: "x/y", dir: true},
			{from: "a", to: "x/y/a"}, {del: "a"}, {put: "x/y/a", dir: true},
			{wantBelow: "a", wantAbsent: true},
			{wantBelow: "x", want: []string{"x/y", "x/y/a", "x/y/a/b", "x/y/a/b/f"}},
			{wantBelow: "x/y/a", want: []string{"x/y/a/b", "x/y/a/b/f"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTreeSnap(map[string]TreeStat{})
			for i, o := range tt.ops {
				switch {
				case o.put != "":
					st := file
					if o.dir {
						st = dir
					}
					s.put(o.put, st)
				case o.del != "":
					s.del(o.del)
				case o.from != "":
					s.move(o.from, o.to)
				default:
					got := s.below(o.wantBelow)
					if o.wantAbsent {
						assert.Nil(t, got, "op %d", i)
						assert.NotContains(t, s.counts, o.wantBelow, "op %d", i)
					} else {
						assert.ElementsMatch(t, o.want, got, "op %d", i)
					}
				}
				require.Equal(t, recount(s.stats), s.counts, "op %d %+v", i, o)
			}
		})
	}
}

// drainTree reads every event queued for w, as one window, and flushes it;
// it returns the delivered events rendered, in their order.
func drainTree(t *testing.T, w *treeWatcher, delivered *[]TreeEvent) []string {
	t.Helper()
	buf := make([]byte, treeReadBuf)
	for {
		require.NoError(t, w.f.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
		n, err := w.f.Read(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		require.NoError(t, err)
		require.False(t, w.parse(buf[:n]), "the root's watch ended")
	}
	*delivered = nil
	w.flush()
	var got []string
	for _, ev := range *delivered {
		got = append(got, render(ev))
	}
	return got
}

func TestTreeWatch_CountsMatchARecountAfterEveryChange(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	for _, p := range []string{"base/x/y.txt", "d/e/f.txt", "d/g.txt", "m/n/o.txt", "r/s/t.txt", "keep.txt", "gone.txt"} {
		put(t, root, p, "x")
	}
	outside := filepath.Join(filepath.Dir(root), "outside")
	var delivered []TreeEvent
	w, err := fs.newTreeWatcher(TreeWatchOptions{Window: time.Hour, MaxPending: 1000}, func(evs []TreeEvent, err error) {
		require.NoError(t, err)
		delivered = append(delivered, evs...)
	})
	require.NoError(t, err)
	defer w.f.Close() // never started: nothing to wait for
	abs := func(rel string) string { return filepath.Join(root, rel) }

	steps := []struct {
		name  string
		do    func()
		want  []string // in any order
		first string   // when set, the first event
	}{
		{"initial scan", func() {}, nil, ""},
		{"create nested directories and files", func() {
			put(t, root, "a/b/c/f1", "1")
			put(t, root, "a/b/f2", "2")
			put(t, root, "a/g", "3")
		}, []string{"created a", "created a/b", "created a/b/c", "created a/b/c/f1", "created a/b/f2", "created a/g"}, ""},
		{"delete a file", func() { require.NoError(t, os.Remove(abs("a/g"))) }, []string{"deleted a/g"}, ""},
		{"delete a subtree children first", func() { require.NoError(t, os.RemoveAll(abs("a/b"))) },
			[]string{"deleted a/b", "deleted a/b/c", "deleted a/b/c/f1", "deleted a/b/f2"}, ""},
		{"delete a directory seen before its children", func() {
			// The chmod makes d the window's first path: it is
			// classified while its contents are still in the snapshot.
			require.NoError(t, os.Chmod(abs("d"), 0o700))
			require.NoError(t, os.RemoveAll(abs("d")))
		}, []string{"deleted d", "deleted d/e", "deleted d/e/f.txt", "deleted d/g.txt"}, "deleted d"},
		{"move a directory out of the tree", func() { require.NoError(t, os.Rename(abs("m"), outside)) },
			[]string{"deleted m", "deleted m/n", "deleted m/n/o.txt"}, ""},
		{"rename a directory with contents", func() { require.NoError(t, os.Rename(abs("r"), abs("base/q"))) },
			[]string{"renamed r -> base/q"}, ""},
		{"rescan after an overflow", func() {
			put(t, root, "base/q/s/new.txt", "n")
			require.NoError(t, os.Remove(abs("gone.txt")))
			require.NoError(t, os.RemoveAll(abs("base/x")))
			w.parse(overflowEvent())
		}, []string{"created base/q/s/new.txt", "deleted base/x", "deleted base/x/y.txt", "deleted gone.txt", "overflow"}, ""},
	}
	for _, st := range steps {
		st.do()
		got := drainTree(t, w, &delivered)
		if st.first != "" && assert.NotEmpty(t, got, st.name) {
			assert.Equal(t, st.first, got[0], st.name)
		}
		slices.Sort(got)
		assert.Equal(t, st.want, got, st.name)
		assert.Equal(t, recount(w.snap.stats), w.snap.counts, "%s: the snapshot's counts", st.name)
		assert.Equal(t, recount(w.watches.dirs), w.watches.counts, "%s: the watch table's counts", st.name)

		// The snapshot and the watch table are the tree's.
		var onDisk, dirs []string
		require.NoError(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			rel, _ := filepath.Rel(root, p)
			if d.IsDir() {
				dirs = append(dirs, filepath.ToSlash(rel))
			}
			if rel != "." {
				onDisk = append(onDisk, filepath.ToSlash(rel))
			}
			return err
		}), st.name)
		assert.ElementsMatch(t, onDisk, slices.Collect(maps.Keys(w.snap.stats)), "%s: the snapshot", st.name)
		assert.ElementsMatch(t, dirs, slices.Collect(maps.Keys(w.watches.dirs)), "%s: the watch table", st.name)
	}
}
