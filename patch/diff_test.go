package patch

import "strings"

// edit is one step of a line diff: kind ' ' keeps a[ai] (== b[bi]), '-'
// removes a[ai], '+' inserts b[bi].
type edit struct {
	kind   byte
	ai, bi int
}

// lineDiff returns a shortest edit script from a to b via a longest common
// subsequence table.
func lineDiff(a, b []string) []edit {
	n, m := len(a), len(b)
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []edit
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			out = append(out, edit{' ', i, j})
			i, j = i+1, j+1
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			out = append(out, edit{'+', i, j})
			j++
		default:
			out = append(out, edit{'-', i, j})
			i++
		}
	}
	return out
}

// diffHunks turns the diff of a and b into hunks with ctx lines of context
// (ctx ≥ 1), marking a hunk that reaches the end of a with IsEndOfFile. A
// hunk whose old lines would first match before its own position is given
// more leading context, up to the end of the previous hunk, so that applying
// the hunks to a gives b exactly.
func diffHunks(a, b []string, ctx int) []Hunk {
	edits := lineDiff(a, b)
	include := make([]bool, len(edits))
	for k, e := range edits {
		if e.kind == ' ' {
			continue
		}
		for d := max(k-ctx, 0); d <= min(k+ctx, len(edits)-1); d++ {
			include[d] = true
		}
	}
	var hunks []Hunk
	m := newMatcher(a)
	cursor := 0
	for k := 0; k < len(edits); {
		if !include[k] {
			k++
			continue
		}
		start := edits[k].ai
		var h Hunk
		for ; k < len(edits) && include[k]; k++ {
			e := edits[k]
			switch e.kind {
			case ' ':
				h.OldLines = append(h.OldLines, a[e.ai])
				h.NewLines = append(h.NewLines, a[e.ai])
			case '-':
				h.OldLines = append(h.OldLines, a[e.ai])
			case '+':
				h.NewLines = append(h.NewLines, b[e.bi])
			}
		}
		end := start + len(h.OldLines)
		h.IsEndOfFile = end == len(a) && len(h.OldLines) > 0
		if len(h.OldLines) > 0 && m.seek(h.OldLines, cursor, h.IsEndOfFile) != start {
			lead := a[cursor:start]
			h.OldLines = append(append([]string(nil), lead...), h.OldLines...)
			h.NewLines = append(append([]string(nil), lead...), h.NewLines...)
		}
		hunks = append(hunks, h)
		cursor = end
	}
	return hunks
}

// formatPatch renders one Update of path as patch text, every chunk with a
// plain @@ marker.
func formatPatch(path string, hunks []Hunk) string {
	var b strings.Builder
	b.WriteString("*** Begin Patch\n*** Update File: " + path + "\n")
	for _, h := range hunks {
		b.WriteString("@@\n")
		old, nw := h.OldLines, h.NewLines
		// Re-derive the chunk lines: common prefix and suffix are context.
		p := 0
		for p < len(old) && p < len(nw) && old[p] == nw[p] {
			p++
		}
		s := 0
		for s < len(old)-p && s < len(nw)-p && old[len(old)-1-s] == nw[len(nw)-1-s] {
			s++
		}
		for _, l := range old[:p] {
			b.WriteString(" " + l + "\n")
		}
		for _, l := range old[p : len(old)-s] {
			b.WriteString("-" + l + "\n")
		}
		for _, l := range nw[p : len(nw)-s] {
			b.WriteString("+" + l + "\n")
		}
		for _, l := range old[len(old)-s:] {
			b.WriteString(" " + l + "\n")
		}
		if h.IsEndOfFile {
			b.WriteString("*** End of File\n")
		}
	}
	b.WriteString("*** End Patch\n")
	return b.String()
}
