package local

import (
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkTreeWatch_RemoveSubtree classifies an rm -rf of a subtree of
// 1,111 directories and 10,000 files (children first, as rm -rf deletes
// them; the kernel has already dropped the deleted directories' watches)
// in a watcher that knows 100,000 other paths in 10,000 watched
// directories. One op is one window's flush; the paths do not exist, so
// each classifies as deleted.
func BenchmarkTreeWatch_RemoveSubtree(b *testing.B) {
	fs, _ := newTestFS(b, Options{})
	deleted := 0
	w, err := fs.newTreeWatcher(TreeWatchOptions{Window: time.Hour, MaxPending: 1 << 20}, func(evs []TreeEvent, _ error) {
		for _, ev := range evs {
			if ev.Kind == TreeDeleted {
				deleted++
			}
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer w.f.Close() // never started: nothing to wait for
	dir := TreeStat{Mode: unix.S_IFDIR | 0o755}
	file := TreeStat{Mode: unix.S_IFREG | 0o644}
	for d := range 10000 {
		rel := fmt.Sprintf("ws/d%02d/e%04d", d/100, d)
		benchPut(w, rel, dir)
		benchWatch(w, rel, 1000+d)
		for f := range 9 {
			benchPut(w, fmt.Sprintf("%s/f%d", rel, f), file)
		}
	}
	// The subtree in rm -rf order: a directory's files, then its
	// subdirectories' trees, then the directory.
	type entry struct {
		path string
		st   TreeStat
	}
	var order []entry
	var walk func(rel string, depth int)
	walk = func(rel string, depth int) {
		if depth == 3 {
			for f := range 10 {
				order = append(order, entry{fmt.Sprintf("%s/f%d", rel, f), file})
			}
		} else {
			for i := range 10 {
				walk(fmt.Sprintf("%s/s%d", rel, i), depth+1)
			}
		}
		order = append(order, entry{rel, dir})
	}
	walk("big", 0)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for _, e := range order {
			benchPut(w, e.path, e.st)
		}
		for _, e := range order {
			w.touch(e.path, false)
		}
		deleted = 0
		b.StartTimer()
		w.flush()
		if deleted != len(order) {
			b.Fatalf("%d paths deleted, %d reported", len(order), deleted)
		}
	}
}

// benchPut records p in the snapshot.
func benchPut(w *treeWatcher, p string, st TreeStat) { w.snap.put(p, st) }

// benchWatch records a watch table entry.
func benchWatch(w *treeWatcher, rel string, wd int) { w.watches.set(rel, wd) }
