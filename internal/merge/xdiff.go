package merge

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"math"
)

// This file is the line diff the merge is built on: git's xdiff Myers
// implementation (xprepare.c, xdiffi.c of git 2.39) without the options
// merge-file does not use. Hunk boundaries decide whether two changes
// touch, so the port keeps git's record cleanup, split heuristics and
// group compaction step by step.

const (
	maxCostMin   = 256 // XDL_MAX_COST_MIN
	heurMinCost  = 256 // XDL_HEUR_MIN_COST
	snakeCnt     = 20  // XDL_SNAKE_CNT
	kHeur        = 4   // XDL_K_HEUR
	kpdisRun     = 4   // XDL_KPDIS_RUN
	maxEqLimit   = 1024
	simscanWidth = 100 // XDL_SIMSCAN_WINDOW
)

// side is one file of a two-way diff.
type side struct {
	recs [][]byte // lines, each with its terminator
	rchg []bool   // changed flags, offset by one so index -1 and nrec exist

	dstart, dend int   // the part left after trimming common ends
	ha           []int // class of each line of that part, from dstart
	rindex       []int // line number of each record kept for Myers
	haeff        []int // class of each record kept for Myers
}

// same reports whether lines i and j hold equal bytes (xdiff compares
// their classes, which is the same).
func (s *side) same(i, j int) bool { return bytes.Equal(s.recs[i], s.recs[j]) }

func (s *side) nrec() int { return len(s.recs) }

// changed reports whether line i is changed; lines outside the file are not.
func (s *side) changed(i int) bool {
	if i < -1 || i > len(s.recs) {
		return false
	}
	return s.rchg[i+1]
}

func (s *side) setChanged(i int, v bool) { s.rchg[i+1] = v }

// change is one hunk of an edit script: chg1 lines at i1 of the first file
// become chg2 lines at i2 of the second.
type change struct {
	i1, i2, chg1, chg2 int
}

// splitLines cuts text into records ending in '\n'; the last may lack it.
func splitLines(text []byte) [][]byte {
	recs := make([][]byte, 0, bytes.Count(text, []byte{'\n'})+1)
	for len(text) > 0 {
		n := bytes.IndexByte(text, '\n') + 1
		if n == 0 {
			n = len(text)
		}
		recs = append(recs, text[:n:n])
		text = text[n:]
	}
	return recs
}

// splitLike is splitLines(text) for a text that is mostly base (baseLines
// are its lines): the whole lines both share at the start and at the end
// are found by comparing bytes and taken from baseLines (equal bytes), and
// only the lines between are split.
func splitLike(text, base []byte, baseLines [][]byte) [][]byte {
	head, tail := sharedEnds(text, base)
	nHead := bytes.Count(base[:head], []byte{'\n'})
	nTail := 0
	if tail > 0 {
		end := base[len(base)-tail:]
		nTail = bytes.Count(end, []byte{'\n'})
		if end[len(end)-1] != '\n' {
			nTail++ // a last line without a newline
		}
	}
	mid := splitLines(text[head : len(text)-tail])
	out := make([][]byte, 0, nHead+len(mid)+nTail)
	out = append(out, baseLines[:nHead]...)
	out = append(out, mid...)
	return append(out, baseLines[len(baseLines)-nTail:]...)
}

// sharedEnds returns the bytes of the whole lines text and base share at
// the start (head) and, in what is left, at the end (tail), as xdiff's
// trimming of a pair's common ends finds them, or fewer lines at the end
// (never more): head and tail never overlap in either text.
func sharedEnds(text, base []byte) (head, tail int) {
	head = commonPrefix(text, base)
	head = bytes.LastIndexByte(text[:head], '\n') + 1 // whole lines
	rest, baseRest := text[head:], base[head:]
	tail = commonSuffix(rest, baseRest)
	// The shared end starts after a newline inside it: whole lines in both.
	if tail < len(rest) || tail < len(baseRest) {
		if nl := bytes.IndexByte(rest[len(rest)-tail:], '\n'); nl >= 0 {
			tail -= nl + 1
		} else {
			tail = 0
		}
	}
	return head, tail
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for ; i+8 <= n && binary.LittleEndian.Uint64(a[i:]) == binary.LittleEndian.Uint64(b[i:]); i += 8 {
	}
	for ; i < n && a[i] == b[i]; i++ {
	}
	return i
}

// commonSuffix is the length of the longest common suffix of a and b.
func commonSuffix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for ; i+8 <= n && binary.LittleEndian.Uint64(a[len(a)-i-8:]) == binary.LittleEndian.Uint64(b[len(b)-i-8:]); i += 8 {
	}
	for ; i < n && a[len(a)-1-i] == b[len(b)-1-i]; i++ {
	}
	return i
}

// bogosqrt is xdl_bogosqrt, git's shift-based square root approximation.
func bogosqrt(n int) int {
	i := 1
	for ; n > 0; n >>= 2 {
		i <<= 1
	}
	return i
}

// diffEnv holds both sides of one diff, prepared as xdl_prepare_env does.
type diffEnv struct {
	a, b       side
	len1, len2 []int // per class of the middle parts: how many lines of a, of b
}

// classifier numbers distinct lines: an open-addressing table of class
// numbers keyed by each line's hash; a hit is confirmed by the hash and
// then the bytes of the class's first line.
type classifier struct {
	seed   maphash.Seed
	table  []int32  // class+1 at each slot, 0 when empty
	mask   uint64   // len(table)-1, a power of two minus one
	hashes []uint64 // the hash of each class
	reps   [][]byte // the first line of each class
}

// newClassifier returns a classifier sized for about hint lines.
func newClassifier(hint int) *classifier {
	size := 64
	for size < 2*hint {
		size <<= 1
	}
	return &classifier{seed: maphash.MakeSeed(), table: make([]int32, size), mask: uint64(size - 1),
		hashes: make([]uint64, 0, hint), reps: make([][]byte, 0, hint)}
}

// class returns the class of line, giving it a new one if no equal line
// came before.
func (c *classifier) class(line []byte) int {
	h := maphash.Bytes(c.seed, line)
	if id, ok := c.find(h, line); ok {
		return id
	}
	id := len(c.reps)
	c.hashes = append(c.hashes, h)
	c.reps = append(c.reps, line)
	c.place(h, id)
	if 2*len(c.reps) > len(c.table) {
		c.grow()
	}
	return id
}

// lookup returns the class of line, if an equal line has one.
func (c *classifier) lookup(line []byte) (int, bool) {
	return c.find(maphash.Bytes(c.seed, line), line)
}

func (c *classifier) find(h uint64, line []byte) (int, bool) {
	for i := h & c.mask; ; i = (i + 1) & c.mask {
		slot := c.table[i]
		if slot == 0 {
			return 0, false
		}
		if id := int(slot - 1); c.hashes[id] == h && bytes.Equal(c.reps[id], line) {
			return id, true
		}
	}
}

func (c *classifier) place(h uint64, id int) {
	i := h & c.mask
	for c.table[i] != 0 {
		i = (i + 1) & c.mask
	}
	c.table[i] = int32(id + 1)
}

// grow doubles the table, keeping it at most half full.
func (c *classifier) grow() {
	c.table = make([]int32, 2*len(c.table))
	c.mask = uint64(len(c.table) - 1)
	for id, h := range c.hashes {
		c.place(h, id)
	}
}

// newDiffEnv prepares a diff of a against b as xdl_prepare_env does. Only
// the lines left between the common ends take part in the cleanup and the
// Myers run, so only they get classes; every other line is hashed once to
// count, per class, how many lines of each file hold it (xdiff's len1 and
// len2, which the cleanup reads). A small change in a large file so costs
// a hash per line, not a table entry per line.
func newDiffEnv(a, b [][]byte) *diffEnv {
	e := &diffEnv{
		a: side{recs: a, rchg: make([]bool, len(a)+2), dstart: 0, dend: len(a) - 1},
		b: side{recs: b, rchg: make([]bool, len(b)+2), dstart: 0, dend: len(b) - 1},
	}
	e.trimEnds()
	mid1, mid2 := a[e.a.dstart:e.a.dend+1], b[e.b.dstart:e.b.dend+1]
	c := newClassifier(len(mid1) + len(mid2))
	e.a.ha, e.b.ha = make([]int, len(mid1)), make([]int, len(mid2))
	for i, r := range mid1 {
		e.a.ha[i] = c.class(r)
	}
	for i, r := range mid2 {
		e.b.ha[i] = c.class(r)
	}
	e.len1, e.len2 = make([]int, len(c.reps)), make([]int, len(c.reps))
	for _, id := range e.a.ha {
		e.len1[id]++
	}
	for _, id := range e.b.ha {
		e.len2[id]++
	}
	// The common ends hold the same lines in a and in b. A line whose
	// length no middle line has (modulo the set's size) is not looked up.
	var lens [16]uint64
	for _, r := range c.reps {
		n := len(r) % 1024
		lens[n/64] |= 1 << (n % 64)
	}
	count := func(lines [][]byte) {
		for _, r := range lines {
			if n := len(r) % 1024; lens[n/64]&(1<<(n%64)) == 0 {
				continue
			}
			if id, ok := c.lookup(r); ok {
				e.len1[id]++
				e.len2[id]++
			}
		}
	}
	if len(c.reps) > 0 {
		count(a[:e.a.dstart])
		count(a[e.a.dend+1:])
	}
	e.cleanupRecords()
	return e
}

// trimEnds is xdl_trim_ends: common first and last lines take no part in
// the Myers run.
func (e *diffEnv) trimEnds() {
	a, b := e.a.recs, e.b.recs
	lim := min(len(a), len(b))
	i := 0
	for ; i < lim; i++ {
		if !bytes.Equal(a[i], b[i]) {
			break
		}
	}
	e.a.dstart, e.b.dstart = i, i
	lim -= i
	j := 0
	for ; j < lim; j++ {
		if !bytes.Equal(a[len(a)-1-j], b[len(b)-1-j]) {
			break
		}
	}
	e.a.dend = len(a) - j - 1
	e.b.dend = len(b) - j - 1
}

// cleanupRecords is xdl_cleanup_records: lines with no match on the other
// side are changed outright, and lines with many matches are dropped when
// they sit in a run of such lines.
func (e *diffEnv) cleanupRecords() {
	mark := func(s *side, other []int) {
		mlim := min(bogosqrt(s.nrec()), maxEqLimit)
		dis := make([]byte, s.nrec()+1)
		s.rindex = make([]int, 0, s.dend-s.dstart+1)
		s.haeff = make([]int, 0, s.dend-s.dstart+1)
		for i := s.dstart; i <= s.dend; i++ {
			nm := other[s.ha[i-s.dstart]]
			switch {
			case nm == 0:
				dis[i] = 0
			case nm >= mlim:
				dis[i] = 2
			default:
				dis[i] = 1
			}
		}
		for i := s.dstart; i <= s.dend; i++ {
			if dis[i] == 1 || (dis[i] == 2 && !cleanMmatch(dis, i, s.dstart, s.dend)) {
				s.rindex = append(s.rindex, i)
				s.haeff = append(s.haeff, s.ha[i-s.dstart])
			} else {
				s.setChanged(i, true)
			}
		}
	}
	mark(&e.a, e.len2)
	mark(&e.b, e.len1)
}

// cleanMmatch is xdl_clean_mmatch: whether the multi-match line i sits in
// a run of unmatched lines and may be dropped.
func cleanMmatch(dis []byte, i, s, e int) bool {
	if i-s > simscanWidth {
		s = i - simscanWidth
	}
	if e-i > simscanWidth {
		e = i + simscanWidth
	}
	rdis0, rpdis0 := 0, 1
	for r := 1; i-r >= s; r++ {
		if dis[i-r] == 0 {
			rdis0++
		} else if dis[i-r] == 2 {
			rpdis0++
		} else {
			break
		}
	}
	if rdis0 == 0 {
		return false
	}
	rdis1, rpdis1 := 0, 1
	for r := 1; i+r <= e; r++ {
		if dis[i+r] == 0 {
			rdis1++
		} else if dis[i+r] == 2 {
			rpdis1++
		} else {
			break
		}
	}
	if rdis1 == 0 {
		return false
	}
	rdis1 += rdis0
	rpdis1 += rpdis0
	return rpdis1*kpdisRun < rpdis1+rdis1
}

// myers holds the state of one xdl_recs_cmp run.
type myers struct {
	ha1, ha2   []int
	kvdf, kvdb []int // indexed by diagonal + koff
	koff       int
	mxcost     int
	a, b       *side
}

type split struct {
	i1, i2       int
	minLo, minHi bool
}

// diff runs Myers over the records cleanup kept and marks the changed lines.
func (e *diffEnv) diff() {
	n1, n2 := len(e.a.haeff), len(e.b.haeff)
	ndiags := n1 + n2 + 3
	m := &myers{
		ha1: e.a.haeff, ha2: e.b.haeff,
		kvdf: make([]int, ndiags), kvdb: make([]int, ndiags),
		koff:   n2 + 1,
		mxcost: max(bogosqrt(ndiags), maxCostMin),
		a:      &e.a, b: &e.b,
	}
	m.recsCmp(0, n1, 0, n2, false)
}

// recsCmp is xdl_recs_cmp: divide at the middle snake and conquer.
func (m *myers) recsCmp(off1, lim1, off2, lim2 int, needMin bool) {
	ha1, ha2 := m.ha1, m.ha2
	for off1 < lim1 && off2 < lim2 && ha1[off1] == ha2[off2] {
		off1++
		off2++
	}
	for off1 < lim1 && off2 < lim2 && ha1[lim1-1] == ha2[lim2-1] {
		lim1--
		lim2--
	}
	switch {
	case off1 == lim1:
		for ; off2 < lim2; off2++ {
			m.b.setChanged(m.b.rindex[off2], true)
		}
	case off2 == lim2:
		for ; off1 < lim1; off1++ {
			m.a.setChanged(m.a.rindex[off1], true)
		}
	default:
		spl := m.split(off1, lim1, off2, lim2, needMin)
		m.recsCmp(off1, spl.i1, off2, spl.i2, spl.minLo)
		m.recsCmp(spl.i1, lim1, spl.i2, lim2, spl.minHi)
	}
}

// split is xdl_split: the furthest-reaching forward and backward paths
// until they meet, or a heuristic cut once the cost is too high.
func (m *myers) split(off1, lim1, off2, lim2 int, needMin bool) split {
	ha1, ha2, ko := m.ha1, m.ha2, m.koff
	kvdf, kvdb := m.kvdf, m.kvdb
	dmin, dmax := off1-lim2, lim1-off2
	fmid, bmid := off1-off2, lim1-lim2
	odd := (fmid-bmid)&1 != 0
	fmin, fmax := fmid, fmid
	bmin, bmax := bmid, bmid
	kvdf[fmid+ko] = off1
	kvdb[bmid+ko] = lim1

	for ec := 1; ; ec++ {
		gotSnake := false
		if fmin > dmin {
			fmin--
			kvdf[fmin-1+ko] = -1
		} else {
			fmin++
		}
		if fmax < dmax {
			fmax++
			kvdf[fmax+1+ko] = -1
		} else {
			fmax--
		}
		for d := fmax; d >= fmin; d -= 2 {
			var i1 int
			if kvdf[d-1+ko] >= kvdf[d+1+ko] {
				i1 = kvdf[d-1+ko] + 1
			} else {
				i1 = kvdf[d+1+ko]
			}
			prev1 := i1
			i2 := i1 - d
			for i1 < lim1 && i2 < lim2 && ha1[i1] == ha2[i2] {
				i1++
				i2++
			}
			if i1-prev1 > snakeCnt {
				gotSnake = true
			}
			kvdf[d+ko] = i1
			if odd && bmin <= d && d <= bmax && kvdb[d+ko] <= i1 {
				return split{i1, i2, true, true}
			}
		}

		if bmin > dmin {
			bmin--
			kvdb[bmin-1+ko] = math.MaxInt
		} else {
			bmin++
		}
		if bmax < dmax {
			bmax++
			kvdb[bmax+1+ko] = math.MaxInt
		} else {
			bmax--
		}
		for d := bmax; d >= bmin; d -= 2 {
			var i1 int
			if kvdb[d-1+ko] < kvdb[d+1+ko] {
				i1 = kvdb[d-1+ko]
			} else {
				i1 = kvdb[d+1+ko] - 1
			}
			prev1 := i1
			i2 := i1 - d
			for i1 > off1 && i2 > off2 && ha1[i1-1] == ha2[i2-1] {
				i1--
				i2--
			}
			if prev1-i1 > snakeCnt {
				gotSnake = true
			}
			kvdb[d+ko] = i1
			if !odd && fmin <= d && d <= fmax && i1 <= kvdf[d+ko] {
				return split{i1, i2, true, true}
			}
		}

		if needMin {
			continue
		}

		if gotSnake && ec > heurMinCost {
			if s, ok := m.forwardHeuristic(ec, fmin, fmax, fmid, off1, lim1, off2, lim2); ok {
				return s
			}
			if s, ok := m.backwardHeuristic(ec, bmin, bmax, bmid, off1, lim1, off2, lim2); ok {
				return s
			}
		}

		if ec >= m.mxcost {
			return m.furthest(fmin, fmax, bmin, bmax, off1, lim1, off2, lim2)
		}
	}
}

func (m *myers) forwardHeuristic(ec, fmin, fmax, fmid, off1, lim1, off2, lim2 int) (split, bool) {
	var spl split
	best := 0
	for d := fmax; d >= fmin; d -= 2 {
		dd := fmid - d
		if d > fmid {
			dd = d - fmid
		}
		i1 := m.kvdf[d+m.koff]
		i2 := i1 - d
		v := (i1 - off1) + (i2 - off2) - dd
		if v > kHeur*ec && v > best &&
			off1+snakeCnt <= i1 && i1 < lim1 &&
			off2+snakeCnt <= i2 && i2 < lim2 {
			for k := 1; m.ha1[i1-k] == m.ha2[i2-k]; k++ {
				if k == snakeCnt {
					best = v
					spl.i1, spl.i2 = i1, i2
					break
				}
			}
		}
	}
	spl.minLo, spl.minHi = true, false
	return spl, best > 0
}

func (m *myers) backwardHeuristic(ec, bmin, bmax, bmid, off1, lim1, off2, lim2 int) (split, bool) {
	var spl split
	best := 0
	for d := bmax; d >= bmin; d -= 2 {
		dd := bmid - d
		if d > bmid {
			dd = d - bmid
		}
		i1 := m.kvdb[d+m.koff]
		i2 := i1 - d
		v := (lim1 - i1) + (lim2 - i2) - dd
		if v > kHeur*ec && v > best &&
			off1 < i1 && i1 <= lim1-snakeCnt &&
			off2 < i2 && i2 <= lim2-snakeCnt {
			for k := 0; m.ha1[i1+k] == m.ha2[i2+k]; k++ {
				if k == snakeCnt-1 {
					best = v
					spl.i1, spl.i2 = i1, i2
					break
				}
			}
		}
	}
	spl.minLo, spl.minHi = false, true
	return spl, best > 0
}

// furthest is the "enough is enough" cut of xdl_split: the furthest
// reaching path by the i1+i2 measure.
func (m *myers) furthest(fmin, fmax, bmin, bmax, off1, lim1, off2, lim2 int) split {
	fbest, fbest1 := -1, -1
	for d := fmax; d >= fmin; d -= 2 {
		i1 := min(m.kvdf[d+m.koff], lim1)
		i2 := i1 - d
		if lim2 < i2 {
			i1, i2 = lim2+d, lim2
		}
		if fbest < i1+i2 {
			fbest, fbest1 = i1+i2, i1
		}
	}
	bbest, bbest1 := math.MaxInt, math.MaxInt
	for d := bmax; d >= bmin; d -= 2 {
		i1 := max(off1, m.kvdb[d+m.koff])
		i2 := i1 - d
		if i2 < off2 {
			i1, i2 = off2+d, off2
		}
		if i1+i2 < bbest {
			bbest, bbest1 = i1+i2, i1
		}
	}
	if (lim1+lim2)-bbest < fbest-(off1+off2) {
		return split{fbest1, fbest - fbest1, true, false}
	}
	return split{bbest1, bbest - bbest1, false, true}
}

// group is xdlgroup: a run of changed lines [start, end).
type group struct{ start, end int }

func groupInit(s *side) group {
	g := group{}
	for s.changed(g.end) {
		g.end++
	}
	return g
}

func groupNext(s *side, g *group) bool {
	if g.end == s.nrec() {
		return false
	}
	g.start = g.end + 1
	for g.end = g.start; s.changed(g.end); g.end++ {
	}
	return true
}

func groupPrevious(s *side, g *group) bool {
	if g.start == 0 {
		return false
	}
	g.end = g.start - 1
	for g.start = g.end; s.changed(g.start - 1); g.start-- {
	}
	return true
}

func groupSlideDown(s *side, g *group) bool {
	if g.end < s.nrec() && s.same(g.start, g.end) {
		s.setChanged(g.start, false)
		g.start++
		s.setChanged(g.end, true)
		g.end++
		for s.changed(g.end) {
			g.end++
		}
		return true
	}
	return false
}

func groupSlideUp(s *side, g *group) bool {
	if g.start > 0 && s.same(g.start-1, g.end-1) {
		g.start--
		s.setChanged(g.start, true)
		g.end--
		s.setChanged(g.end, false)
		for s.changed(g.start - 1) {
			g.start--
		}
		return true
	}
	return false
}

// compact is xdl_change_compact without the indent heuristic (merge-file
// does not ask for it): slide each group of changes down as far as it
// goes, then back up to line up with a change of the other file.
func compact(s, o *side) {
	g, gobj := groupInit(s), groupInit(o)
	for {
		if g.end != g.start {
			var earliestEnd int
			var groupsize int
			endMatchingOther := -1
			for {
				groupsize = g.end - g.start
				endMatchingOther = -1
				for groupSlideUp(s, &g) {
					groupPrevious(o, &gobj)
				}
				earliestEnd = g.end
				if gobj.end > gobj.start {
					endMatchingOther = g.end
				}
				for groupSlideDown(s, &g) {
					groupNext(o, &gobj)
					if gobj.end > gobj.start {
						endMatchingOther = g.end
					}
				}
				if groupsize == g.end-g.start {
					break
				}
			}
			if g.end != earliestEnd && endMatchingOther != -1 {
				for gobj.end == gobj.start {
					groupSlideUp(s, &g)
					groupPrevious(o, &gobj)
				}
			}
		}
		if !groupNext(s, &g) {
			break
		}
		groupNext(o, &gobj)
	}
}

// script is xdl_build_script: the changed runs of both sides as hunks, in
// order.
func (e *diffEnv) script() []change {
	var rev []change
	a, b := &e.a, &e.b
	for i1, i2 := a.nrec(), b.nrec(); i1 >= 0 || i2 >= 0; i1, i2 = i1-1, i2-1 {
		if a.changed(i1-1) || b.changed(i2-1) {
			l1, l2 := i1, i2
			for a.changed(i1 - 1) {
				i1--
			}
			for b.changed(i2 - 1) {
				i2--
			}
			rev = append(rev, change{i1: i1, i2: i2, chg1: l1 - i1, chg2: l2 - i2})
		}
	}
	out := make([]change, len(rev))
	for i, c := range rev {
		out[len(rev)-1-i] = c
	}
	return out
}

// diffLines returns git's edit script from a to b, as merge-file computes
// it: prepare, Myers, compact both ways, build the script.
func diffLines(a, b [][]byte) []change {
	e := newDiffEnv(a, b)
	e.diff()
	compact(&e.a, &e.b)
	compact(&e.b, &e.a)
	return e.script()
}
