package local

import (
	"iter"
	"maps"
)

// belowCounts counts, per directory, the paths of a set that lie strictly
// below it. It is kept by path prefix alone, so it stays exact when a
// directory between a path and its ancestor is not in the set. Directories
// with nothing below them are absent.
type belowCounts map[string]int

// add adds delta to the count of every ancestor directory of p (p itself
// excluded): O(depth of p).
func (c belowCounts) add(p string, delta int) {
	for i := len(p) - 1; i > 0; i-- {
		if p[i] != '/' {
			continue
		}
		dir := p[:i]
		if n := c[dir] + delta; n > 0 {
			c[dir] = n
		} else {
			delete(c, dir)
		}
	}
}

// treeSnap is what a tree watcher last knew, per workspace path, and how
// many of those paths lie below each directory, so that a directory whose
// contents already left the snapshot (rm -rf deletes, and the watcher
// classifies, children first) costs no walk of the whole snapshot. Every
// change of the snapshot goes through its methods.
type treeSnap struct {
	stats  map[string]TreeStat
	counts belowCounts
}

// newTreeSnap returns a snapshot holding stats (which it then owns).
func newTreeSnap(stats map[string]TreeStat) *treeSnap {
	s := &treeSnap{}
	s.reset(stats)
	return s
}

// reset replaces the snapshot with stats (which it then owns) and recounts.
func (s *treeSnap) reset(stats map[string]TreeStat) {
	s.stats = stats
	s.counts = belowCounts{}
	for p := range stats {
		s.counts.add(p, 1)
	}
}

// get returns what the snapshot knows of p.
func (s *treeSnap) get(p string) (TreeStat, bool) {
	st, ok := s.stats[p]
	return st, ok
}

// put records st for p.
func (s *treeSnap) put(p string, st TreeStat) {
	if _, ok := s.stats[p]; !ok {
		s.counts.add(p, 1)
	}
	s.stats[p] = st
}

// del forgets p (not what lies below it) and returns what it knew.
func (s *treeSnap) del(p string) (TreeStat, bool) {
	st, ok := s.stats[p]
	if ok {
		delete(s.stats, p)
		s.counts.add(p, -1)
	}
	return st, ok
}

// below lists the snapshot's paths strictly below dir, in no order: nil at
// once when there are none, else one walk of the snapshot that stops when
// it has found them all.
func (s *treeSnap) below(dir string) []string {
	n := s.counts[dir]
	if n == 0 {
		return nil
	}
	out := make([]string, 0, n)
	for p := range s.stats {
		if under(p, dir) {
			out = append(out, p)
			if len(out) == n {
				break
			}
		}
	}
	return out
}

// move renames everything strictly below the directory from to lie below
// to instead (from and to themselves are the caller's).
func (s *treeSnap) move(from, to string) {
	for _, p := range s.below(from) {
		st, _ := s.del(p)
		s.put(to+p[len(from):], st)
	}
}

// all iterates over the snapshot; the loop must not change it.
func (s *treeSnap) all() iter.Seq2[string, TreeStat] { return maps.All(s.stats) }

// treeWatches is a tree watcher's watch table: the directory each inotify
// watch descriptor names and back, and how many watched directories lie
// below each directory, so that removing or renaming a directory with no
// watches below it walks nothing (in rm -rf the kernel's IN_IGNORED for
// each deleted subdirectory usually arrives before its parent is
// classified). Every change of the table goes through its methods.
type treeWatches struct {
	wds    map[int]string // watch descriptor → directory
	dirs   map[string]int // directory → watch descriptor
	counts belowCounts    // watched directories below each directory
}

// newTreeWatches returns an empty watch table.
func newTreeWatches() *treeWatches {
	return &treeWatches{wds: map[int]string{}, dirs: map[string]int{}, counts: belowCounts{}}
}

// set records that wd watches rel.
func (t *treeWatches) set(rel string, wd int) {
	old, ok := t.dirs[rel]
	if ok && old != wd {
		delete(t.wds, old)
	}
	if !ok {
		t.counts.add(rel, 1)
	}
	t.wds[wd] = rel
	t.dirs[rel] = wd
}

// unname drops the directory name rel (not the descriptor it names, whose
// IN_IGNORED is still to come).
func (t *treeWatches) unname(rel string) {
	if _, ok := t.dirs[rel]; ok {
		delete(t.dirs, rel)
		t.counts.add(rel, -1)
	}
}

// ignored forgets the watch wd, which the kernel ended, and returns the
// directory it named.
func (t *treeWatches) ignored(wd int) (string, bool) {
	dir, ok := t.wds[wd]
	if !ok {
		return "", false
	}
	delete(t.wds, wd)
	if t.dirs[dir] == wd {
		t.unname(dir)
	}
	return dir, true
}

// atAndBelow lists the watched directories at and below dir.
func (t *treeWatches) atAndBelow(dir string) []string {
	var out []string
	if _, ok := t.dirs[dir]; ok {
		out = append(out, dir)
	}
	n := t.counts[dir]
	if n == 0 {
		return out
	}
	found := 0
	for rel := range t.dirs {
		if under(rel, dir) {
			out = append(out, rel)
			if found++; found == n {
				break
			}
		}
	}
	return out
}

// move renames the watched directories at and below from to lie at and
// below to.
func (t *treeWatches) move(from, to string) {
	for _, rel := range t.atAndBelow(from) {
		wd := t.dirs[rel]
		t.unname(rel)
		nrel := to + rel[len(from):]
		if _, ok := t.dirs[nrel]; !ok {
			t.counts.add(nrel, 1)
		}
		t.dirs[nrel] = wd
		t.wds[wd] = nrel
	}
}

// remove forgets the watches at and below dir and passes each descriptor
// to rm.
func (t *treeWatches) remove(dir string, rm func(wd int)) {
	for _, rel := range t.atAndBelow(dir) {
		wd := t.dirs[rel]
		rm(wd)
		t.unname(rel)
		delete(t.wds, wd)
	}
}
