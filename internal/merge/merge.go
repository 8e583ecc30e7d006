package merge

// This file is git's xdl_merge (xmerge.c of git 2.39) at the level and
// style `git merge-file` uses: XDL_MERGE_ZEALOUS_ALNUM, plain conflict
// markers, no favoured side.

// Hunk modes, as xdmerge_t's mode.
const (
	modeConflict  = 0
	modeOurs      = 1 // no conflict, take side 1
	modeTheirs    = 2 // no conflict, take side 2
	modeIdentical = 4 // both sides made the same change
)

// hunk is one region of the merge. i1/chg1 are lines of ours, i2/chg2 of
// theirs, i0/chg0 of base.
type hunk struct {
	mode               int
	i0, chg0           int
	i1, chg1, i2, chg2 int
}

// markerSize is DEFAULT_CONFLICT_MARKER_SIZE.
const markerSize = 7

// Options names the sides in conflict markers.
type Options struct {
	// OursLabel follows "<<<<<<<"; TheirsLabel follows ">>>>>>>". Empty
	// labels leave the marker bare, as git does.
	OursLabel, TheirsLabel string
}

// Conflict is one conflicted region of a merge.
type Conflict struct {
	// BaseStart is the 1-based line of base where the region starts
	// (for a region holding no base line, the line it comes before).
	BaseStart int
	// Base, Ours and Theirs are the region's lines on each side. Base is
	// the base region the conflict came from before git narrowed ours
	// and theirs to the lines that differ, so neighbouring conflicts cut
	// from one region share it.
	Base, Ours, Theirs string
}

// Result is the outcome of Merge.
type Result struct {
	// Text is the merged text; when Conflicts is not empty it holds
	// git-style conflict markers where the conflicts are.
	Text []byte
	// Conflicts lists the conflicted regions in order; empty when the
	// merge is clean.
	Conflicts []Conflict
}

// Clean reports whether the merge had no conflict.
func (r Result) Clean() bool { return len(r.Conflicts) == 0 }

// Merge merges the changes from base to ours and from base to theirs, as
// `git merge-file -p ours base theirs` does: the same clean/conflict
// decision, the same bytes. It only reads base, ours and theirs (callers
// may pass a string's bytes without a copy); Text is its own.
func Merge(base, ours, theirs []byte, opts Options) Result {
	if text, ok := apart(base, ours, theirs); ok {
		return Result{Text: text}
	}
	return mergeDiffed(base, ours, theirs, opts)
}

// mergeDiffed is Merge by diffing both sides against base, as xdl_merge.
func mergeDiffed(base, ours, theirs []byte, opts Options) Result {
	b := splitLines(base)
	o, t := splitLike(ours, base, b), splitLike(theirs, base, b)
	x1 := diffLines(b, o)
	x2 := diffLines(b, t)
	if len(x1) == 0 {
		return Result{Text: clone(theirs)}
	}
	if len(x2) == 0 {
		return Result{Text: clone(ours)}
	}
	m := &merger{base: b, ours: o, theirs: t, opts: opts}
	hunks := m.hunks(x1, x2)
	hunks = m.refine(hunks)
	hunks = m.simplify(hunks)
	return Result{Text: m.fill(hunks), Conflicts: m.conflicts(hunks)}
}

func clone(b []byte) []byte { return append([]byte{}, b...) }

type merger struct {
	base, ours, theirs [][]byte
	opts               Options
}

// appendHunk is xdl_append_merge: a hunk that touches the previous one is
// folded into it, and a fold of two different modes is a conflict.
func appendHunk(hs []hunk, h hunk) []hunk {
	if n := len(hs); n > 0 {
		p := &hs[n-1]
		if h.i1 <= p.i1+p.chg1 || h.i2 <= p.i2+p.chg2 {
			if h.mode != p.mode {
				p.mode = modeConflict
			}
			p.chg0 = h.i0 + h.chg0 - p.i0
			p.chg1 = h.i1 + h.chg1 - p.i1
			p.chg2 = h.i2 + h.chg2 - p.i2
			return hs
		}
	}
	return append(hs, h)
}

// sameLines reports whether n lines of ours at i1 equal n lines of theirs
// at i2.
func (m *merger) sameLines(i1, i2, n int) bool {
	for k := 0; k < n; k++ {
		if string(m.ours[i1+k]) != string(m.theirs[i2+k]) {
			return false
		}
	}
	return true
}

// hunks is the walk of xdl_do_merge over both edit scripts.
func (m *merger) hunks(x1, x2 []change) []hunk {
	var hs []hunk
	for len(x1) > 0 && len(x2) > 0 {
		c1, c2 := x1[0], x2[0]
		if c1.i1+c1.chg1 < c2.i1 {
			hs = appendHunk(hs, hunk{mode: modeOurs, i0: c1.i1, chg0: c1.chg1,
				i1: c1.i2, chg1: c1.chg2, i2: c2.i2 - c2.i1 + c1.i1, chg2: c1.chg1})
			x1 = x1[1:]
			continue
		}
		if c2.i1+c2.chg1 < c1.i1 {
			hs = appendHunk(hs, hunk{mode: modeTheirs, i0: c2.i1, chg0: c2.chg1,
				i1: c1.i2 - c1.i1 + c2.i1, chg1: c2.chg1, i2: c2.i2, chg2: c2.chg2})
			x2 = x2[1:]
			continue
		}
		if c1.i1 != c2.i1 || c1.chg1 != c2.chg1 || c1.chg2 != c2.chg2 ||
			!m.sameLines(c1.i2, c2.i2, c1.chg2) {
			off := c1.i1 - c2.i1
			ffo := off + c1.chg1 - c2.chg1
			i0, i1, i2 := c1.i1, c1.i2, c2.i2
			if off > 0 {
				i0 -= off
				i1 -= off
			} else {
				i2 += off
			}
			chg0 := c1.i1 + c1.chg1 - i0
			chg1 := c1.i2 + c1.chg2 - i1
			chg2 := c2.i2 + c2.chg2 - i2
			if ffo < 0 {
				chg0 -= ffo
				chg1 -= ffo
			} else {
				chg2 += ffo
			}
			hs = appendHunk(hs, hunk{mode: modeConflict, i0: i0, chg0: chg0,
				i1: i1, chg1: chg1, i2: i2, chg2: chg2})
		}
		end1, end2 := c1.i1+c1.chg1, c2.i1+c2.chg1
		if end1 >= end2 {
			x2 = x2[1:]
		}
		if end2 >= end1 {
			x1 = x1[1:]
		}
	}
	d2 := len(m.theirs) - len(m.base)
	for _, c1 := range x1 {
		hs = appendHunk(hs, hunk{mode: modeOurs, i0: c1.i1, chg0: c1.chg1,
			i1: c1.i2, chg1: c1.chg2, i2: c1.i1 + d2, chg2: c1.chg1})
	}
	d1 := len(m.ours) - len(m.base)
	for _, c2 := range x2 {
		hs = appendHunk(hs, hunk{mode: modeTheirs, i0: c2.i1, chg0: c2.chg1,
			i1: c2.i1 + d1, chg1: c2.chg1, i2: c2.i2, chg2: c2.chg2})
	}
	return hs
}

// refine is xdl_refine_conflicts: a conflict is diffed ours against
// theirs; identical sides stop being a conflict, and otherwise only the
// differing lines stay conflicted. Each piece keeps its region's base.
func (m *merger) refine(hs []hunk) []hunk {
	out := make([]hunk, 0, len(hs))
	for _, h := range hs {
		if h.mode != modeConflict || h.chg1 == 0 || h.chg2 == 0 {
			out = append(out, h)
			continue
		}
		x := diffLines(m.ours[h.i1:h.i1+h.chg1], m.theirs[h.i2:h.i2+h.chg2])
		if len(x) == 0 {
			h.mode = modeIdentical
			out = append(out, h)
			continue
		}
		for _, c := range x {
			out = append(out, hunk{mode: modeConflict, i0: h.i0, chg0: h.chg0,
				i1: c.i1 + h.i1, chg1: c.chg1, i2: c.i2 + h.i2, chg2: c.chg2})
		}
	}
	return out
}

// simplify is xdl_simplify_non_conflicts with the alnum rule: two
// conflicts with at most three lines between them, or only lines without
// a letter or digit, become one.
func (m *merger) simplify(hs []hunk) []hunk {
	if len(hs) == 0 {
		return hs
	}
	out := []hunk{hs[0]}
	for _, next := range hs[1:] {
		cur := &out[len(out)-1]
		begin, end := cur.i1+cur.chg1, next.i1
		if cur.mode != modeConflict || next.mode != modeConflict ||
			(end-begin > 3 && containsAlnum(m.ours[begin:end])) {
			out = append(out, next)
			continue
		}
		cur.chg1 = next.i1 + next.chg1 - cur.i1
		cur.chg2 = next.i2 + next.chg2 - cur.i2
		cur.chg0 = max(cur.i0+cur.chg0, next.i0+next.chg0) - cur.i0
	}
	return out
}

func containsAlnum(lines [][]byte) bool {
	for _, l := range lines {
		for _, c := range l {
			if c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
				return true
			}
		}
	}
	return false
}

func (m *merger) conflicts(hs []hunk) []Conflict {
	var out []Conflict
	for _, h := range hs {
		if h.mode != modeConflict {
			continue
		}
		out = append(out, Conflict{
			BaseStart: h.i0 + 1,
			Base:      string(join(m.base[h.i0 : h.i0+h.chg0])),
			Ours:      string(join(m.ours[h.i1 : h.i1+h.chg1])),
			Theirs:    string(join(m.theirs[h.i2 : h.i2+h.chg2])),
		})
	}
	return out
}

func join(lines [][]byte) []byte {
	var out []byte
	for _, l := range lines {
		out = append(out, l...)
	}
	return out
}
