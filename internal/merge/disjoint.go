package merge

import "bytes"

// apart merges without diffing when ours and theirs changed parts of base
// that lie apart: between the lines ours changed and the lines theirs
// changed (each found as the pair's shared ends, the region xdiff's Myers
// run and cleanup are confined to) sits a base line that none of the
// changed lines equals. git's result is then clean and is ours up to that
// line and theirs from it, so it is built by two copies; ok is false
// whenever that cannot be shown, and Merge diffs.
//
// Why git agrees: every change xdiff reports lies inside its pair's
// trimmed region, and compaction slides a group of changed lines by one
// only over a line equal to one of the group's (the group's lines rotate,
// they never change). A group so never covers, nor slides past, a line
// equal to none of the changed lines: the hunks of ours end before the
// separating line and those of theirs start after it, which xdl_merge
// takes as two hunks that do not touch. Each side's hunks rebuild that
// side, so the clean result is the same whichever split line is taken.
func apart(base, ours, theirs []byte) (text []byte, ok bool) {
	if bytes.Equal(ours, base) || bytes.Equal(theirs, base) || bytes.Equal(ours, theirs) {
		return nil, false // Merge's own shortcuts
	}
	hO, tO := sharedEnds(ours, base)
	hT, tT := sharedEnds(theirs, base)
	changed := [][]byte{base[hO : len(base)-tO], ours[hO : len(ours)-tO], base[hT : len(base)-tT], theirs[hT : len(theirs)-tT]}
	first, second := ours, theirs // the side whose change comes first
	gapStart, gapEnd := len(base)-tO, hT
	if gapStart > gapEnd {
		first, second = theirs, ours
		gapStart, gapEnd = len(base)-tT, hO
		if gapStart > gapEnd {
			return nil, false // the changed regions overlap or touch
		}
	}
	split, ok := separatingLine(base[gapStart:gapEnd], changed)
	if !ok {
		return nil, false
	}
	split += gapStart
	// first ends with base[split:], second starts with base[:split].
	keep := len(first) - (len(base) - split)
	out := make([]byte, 0, keep+len(second)-split)
	out = append(out, first[:keep]...)
	return append(out, second[split:]...), true
}

// separatingLine returns the offset in gap (whole lines) of the first line
// that equals no line of changed.
func separatingLine(gap []byte, changed [][]byte) (int, bool) {
	if len(gap) == 0 {
		return 0, false
	}
	lines := make(map[string]struct{})
	for _, c := range changed {
		for _, l := range splitLines(c) {
			lines[string(l)] = struct{}{}
		}
	}
	for off := 0; off < len(gap); {
		n := bytes.IndexByte(gap[off:], '\n') + 1
		if n == 0 {
			return 0, false // not a whole line (a gap ends at a line start)
		}
		if _, ok := lines[string(gap[off:off+n])]; !ok {
			return off, true
		}
		off += n
	}
	return 0, false
}
