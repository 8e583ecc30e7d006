package branch

import (
	"fmt"
	"strings"
)

// splitLines splits text into lines that keep their "\n"; a last line
// without one carries git's "\ No newline at end of file" marker, so that
// it differs from the same line with a newline, as git apply expects.
func splitLines(text string) []string {
	if text == "" {
		return nil
	}
	lines := strings.SplitAfter(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	} else {
		lines[len(lines)-1] += "\n\\ No newline at end of file\n"
	}
	return lines
}

// editKind is one line of an edit script.
type editKind byte

const (
	editEqual editKind = ' '
	editDel   editKind = '-'
	editIns   editKind = '+'
)

// edit is one line of an edit script.
type edit struct {
	kind editKind
	line string
}

// diffLines returns a shortest edit script from a to b (Myers' O(ND)
// algorithm, with the trace kept for the walk back).
func diffLines(a, b []string) []edit {
	// Trim the common prefix and suffix: most changes are small.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var out []edit
	for _, l := range a[:pre] {
		out = append(out, edit{editEqual, l})
	}
	out = append(out, myers(a[pre:len(a)-suf], b[pre:len(b)-suf])...)
	for _, l := range a[len(a)-suf:] {
		out = append(out, edit{editEqual, l})
	}
	return out
}

// myers is the core of diffLines.
func myers(a, b []string) []edit {
	n, m := len(a), len(b)
	if n == 0 || m == 0 {
		out := make([]edit, 0, n+m)
		for _, l := range a {
			out = append(out, edit{editDel, l})
		}
		for _, l := range b {
			out = append(out, edit{editIns, l})
		}
		return out
	}
	maxD := n + m
	off := maxD
	v := make([]int, 2*maxD+2)
	var trace [][]int
	for d := 0; d <= maxD; d++ {
		trace = append(trace, append([]int(nil), v...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = x
			if x >= n && y >= m {
				return backtrack(a, b, trace, v, d, off)
			}
		}
	}
	return nil
}

// backtrack walks the trace back into an edit script.
func backtrack(a, b []string, trace [][]int, last []int, d, off int) []edit {
	x, y := len(a), len(b)
	var rev []edit
	v := last
	for ; d > 0; d-- {
		prev := trace[d]
		k := x - y
		var pk int
		if k == -d || (k != d && prev[off+k-1] < prev[off+k+1]) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := prev[off+pk]
		py := px - pk
		for x > px && y > py {
			x--
			y--
			rev = append(rev, edit{editEqual, a[x]})
		}
		if x == px {
			y--
			rev = append(rev, edit{editIns, b[y]})
		} else {
			x--
			rev = append(rev, edit{editDel, a[x]})
		}
		v = prev
	}
	_ = v
	for x > 0 && y > 0 {
		x--
		y--
		rev = append(rev, edit{editEqual, a[x]})
	}
	out := make([]edit, len(rev))
	for i, e := range rev {
		out[len(rev)-1-i] = e
	}
	return out
}

// unifiedHunks renders an edit script as unified-diff hunks with ctx lines
// of context.
func unifiedHunks(edits []edit, ctx int) string {
	var sb strings.Builder
	i := 0
	aLine, bLine := 1, 1
	// Positions of each edit in a and b.
	type pos struct{ a, b int }
	at := make([]pos, len(edits)+1)
	for j, e := range edits {
		at[j] = pos{aLine, bLine}
		if e.kind != editIns {
			aLine++
		}
		if e.kind != editDel {
			bLine++
		}
	}
	at[len(edits)] = pos{aLine, bLine}
	for i < len(edits) {
		// Find the next change.
		for i < len(edits) && edits[i].kind == editEqual {
			i++
		}
		if i >= len(edits) {
			break
		}
		start := max(i-ctx, 0)
		end := i
		// Extend while changes are within 2*ctx of each other.
		for {
			for end < len(edits) && edits[end].kind != editEqual {
				end++
			}
			next := end
			for next < len(edits) && edits[next].kind == editEqual {
				next++
			}
			if next < len(edits) && next-end <= 2*ctx {
				end = next
				continue
			}
			break
		}
		stop := min(end+ctx, len(edits))
		aStart, bStart := at[start].a, at[start].b
		aCount, bCount := 0, 0
		for _, e := range edits[start:stop] {
			if e.kind != editIns {
				aCount++
			}
			if e.kind != editDel {
				bCount++
			}
		}
		if aCount == 0 {
			aStart--
		}
		if bCount == 0 {
			bStart--
		}
		fmt.Fprintf(&sb, "@@ -%s +%s @@\n", hunkRange(aStart, aCount), hunkRange(bStart, bCount))
		for _, e := range edits[start:stop] {
			sb.WriteByte(byte(e.kind))
			sb.WriteString(e.line)
		}
		i = stop
	}
	return sb.String()
}

// hunkRange renders "start,count" (just "start" for one line).
func hunkRange(start, count int) string {
	if count == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, count)
}
