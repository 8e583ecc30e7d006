package merge

import "bytes"

// This file writes the merge result as xdl_fill_merge_buffer does: lines
// of ours between hunks, the taken side of each clean hunk, and conflict
// markers in the end-of-line style of the surrounding lines.

// copyLines appends lines; with addNL, a last line without '\n' gets one
// ("\r\n" when needsCR).
func copyLines(dst []byte, lines [][]byte, needsCR, addNL bool) []byte {
	if len(lines) == 0 {
		return dst
	}
	for _, l := range lines {
		dst = append(dst, l...)
	}
	if addNL {
		last := lines[len(lines)-1]
		if len(last) == 0 || last[len(last)-1] != '\n' {
			if needsCR {
				dst = append(dst, '\r')
			}
			dst = append(dst, '\n')
		}
	}
	return dst
}

// size is the bytes of lines.
func size(lines [][]byte) int {
	n := 0
	for _, l := range lines {
		n += len(l)
	}
	return n
}

// eolCRLF is is_eol_crlf: 1 if line i ends in CRLF (for a last line
// without an end, the line before it), 0 for LF, -1 when unknown.
func eolCRLF(recs [][]byte, i int) int {
	crlf := func(r []byte) int {
		if len(r) > 1 && r[len(r)-2] == '\r' {
			return 1
		}
		return 0
	}
	n := len(recs)
	if i < n-1 {
		return crlf(recs[i])
	}
	if n == 0 {
		return -1
	}
	if r := recs[i]; len(r) > 0 && r[len(r)-1] == '\n' {
		return crlf(r)
	}
	if i == 0 {
		return -1
	}
	return crlf(recs[i-1])
}

// needsCR is is_cr_needed: markers use CRLF when the lines before the
// hunk on both sides, and base's first line, do.
func (m *merger) needsCR(h hunk) bool {
	at := func(i int) int {
		if i > 0 {
			return i - 1
		}
		return 0
	}
	cr := eolCRLF(m.ours, at(h.i1))
	if cr != 0 {
		cr = eolCRLF(m.theirs, at(h.i2))
	}
	if cr != 0 {
		cr = eolCRLF(m.base, 0)
	}
	return cr > 0
}

func marker(dst []byte, c byte, label string, needsCR bool) []byte {
	dst = append(dst, bytes.Repeat([]byte{c}, markerSize)...)
	if label != "" {
		dst = append(dst, ' ')
		dst = append(dst, label...)
	}
	if needsCR {
		dst = append(dst, '\r')
	}
	return append(dst, '\n')
}

// fill writes the merged text.
func (m *merger) fill(hs []hunk) []byte {
	return m.fillInto(make([]byte, 0, m.fillSize(hs)), hs)
}

// fillSize bounds the size of the merged text: all of ours, plus the
// lines each clean hunk of theirs or each conflict adds, and its markers.
func (m *merger) fillSize(hs []hunk) int {
	n := size(m.ours)
	for _, h := range hs {
		switch h.mode {
		case modeConflict:
			n += size(m.theirs[h.i2:h.i2+h.chg2]) + 3*(markerSize+3) + len(m.opts.OursLabel) + len(m.opts.TheirsLabel) + 4
		case modeTheirs:
			n += size(m.theirs[h.i2 : h.i2+h.chg2])
		}
	}
	return n
}

// fillInto is fill appending to out.
func (m *merger) fillInto(out []byte, hs []hunk) []byte {
	i := 0
	for _, h := range hs {
		switch h.mode {
		case modeConflict:
			cr := m.needsCR(h)
			out = copyLines(out, m.ours[i:h.i1], false, false)
			out = marker(out, '<', m.opts.OursLabel, cr)
			out = copyLines(out, m.ours[h.i1:h.i1+h.chg1], cr, true)
			out = marker(out, '=', "", cr)
			out = copyLines(out, m.theirs[h.i2:h.i2+h.chg2], cr, true)
			out = marker(out, '>', m.opts.TheirsLabel, cr)
		case modeOurs:
			out = copyLines(out, m.ours[i:h.i1], false, false)
			out = copyLines(out, m.ours[h.i1:h.i1+h.chg1], false, false)
		case modeTheirs:
			out = copyLines(out, m.ours[i:h.i1], false, false)
			out = copyLines(out, m.theirs[h.i2:h.i2+h.chg2], false, false)
		default:
			continue
		}
		i = h.i1 + h.chg1
	}
	return copyLines(out, m.ours[i:], false, false)
}
