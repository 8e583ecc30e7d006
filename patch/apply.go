package patch

import (
	"errors"
	"sort"
	"strings"
)

// ErrNoOperations reports a patch without any file operation. It parses, but
// applying it changes nothing; the applier of a whole patch returns it.
var ErrNoOperations = errors.New("no files were modified: the patch contains no file operation; add an '*** Add File:', '*** Delete File:' or '*** Update File:' section")

// replacement replaces count lines at index with lines.
type replacement struct {
	index, count int
	lines        []string
}

// splitLines splits LF text into lines; a final LF does not start a line.
func splitLines(text string) []string {
	lines := strings.Split(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// ApplyHunks applies hunks, in order, to the LF text original and returns the
// complete new text, which ends with exactly one LF unless it is empty. A
// hunk whose anchor or old lines cannot be found stops the application: the
// failure names it and no text is returned.
func ApplyHunks(original string, hunks []Hunk) (string, *HunkFailure) {
	lines := splitLines(original)
	m := newMatcher(lines)
	reps := make([]replacement, 0, len(hunks))
	cursor := 0
	for i := range hunks {
		h := &hunks[i]
		if h.HasContext {
			at := m.seek([]string{h.Context}, cursor, false)
			if at < 0 {
				return "", &HunkFailure{HunkLine: h.Line, Stage: StageContext,
					SearchStart: cursor, Pattern: []string{h.Context}}
			}
			cursor = at + 1
		}
		if len(h.OldLines) == 0 {
			at := len(lines)
			if at > 0 && lines[at-1] == "" {
				at--
			}
			reps = append(reps, replacement{index: at, lines: h.NewLines})
			continue
		}
		pattern, repl := h.OldLines, h.NewLines
		at := m.seek(pattern, cursor, h.IsEndOfFile)
		if at < 0 && pattern[len(pattern)-1] == "" {
			pattern = pattern[:len(pattern)-1]
			if len(repl) > 0 && repl[len(repl)-1] == "" {
				repl = repl[:len(repl)-1]
			}
			at = m.seek(pattern, cursor, h.IsEndOfFile)
		}
		if at < 0 {
			start := cursor
			if h.IsEndOfFile {
				start = max(len(lines)-len(h.OldLines), 0)
			}
			return "", &HunkFailure{HunkLine: h.Line, Stage: StageOldLines,
				SearchStart: start, Pattern: append([]string(nil), h.OldLines...)}
		}
		reps = append(reps, replacement{index: at, count: len(pattern), lines: repl})
		cursor = at + len(pattern)
	}
	return render(lines, reps), nil
}

// render applies the replacements and joins the lines with one final LF.
// Replacements take effect from the last position to the first, so earlier
// indices stay valid; when none overlap that equals one forward merge.
func render(lines []string, reps []replacement) string {
	sort.SliceStable(reps, func(a, b int) bool { return reps[a].index < reps[b].index })
	out := lines
	if len(reps) > 0 {
		if overlapping(reps) {
			out = append(make([]string, 0, len(lines)), lines...)
			for k := len(reps) - 1; k >= 0; k-- {
				out = spliceLines(out, reps[k].index, reps[k].count, reps[k].lines)
			}
		} else {
			out = merge(lines, reps)
		}
	}
	if len(out) == 0 {
		return ""
	}
	n := 0
	for _, l := range out {
		n += len(l) + 1
	}
	var b strings.Builder
	b.Grow(n)
	for i, l := range out {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(l)
	}
	if out[len(out)-1] != "" {
		b.WriteByte('\n')
	}
	return b.String()
}

// overlapping reports whether a sorted replacement starts inside the range
// of the one before it.
func overlapping(reps []replacement) bool {
	for k := 1; k < len(reps); k++ {
		if reps[k-1].index+reps[k-1].count > reps[k].index {
			return true
		}
	}
	return false
}

// merge builds the new lines in one forward pass over sorted, disjoint
// replacements.
func merge(lines []string, reps []replacement) []string {
	size := len(lines)
	for _, r := range reps {
		size += len(r.lines) - r.count
	}
	out := make([]string, 0, size)
	next := 0
	for _, r := range reps {
		out = append(out, lines[next:r.index]...)
		out = append(out, r.lines...)
		next = r.index + r.count
	}
	return append(out, lines[next:]...)
}

// spliceLines returns s with s[at:at+count] replaced by repl; the range is
// clipped to s.
func spliceLines(s []string, at, count int, repl []string) []string {
	at = min(at, len(s))
	count = min(count, len(s)-at)
	out := make([]string, 0, len(s)-count+len(repl))
	out = append(out, s[:at]...)
	out = append(out, repl...)
	return append(out, s[at+count:]...)
}

// ApplyUpdate applies the hunks of u to the LF text original; see ApplyHunks.
func ApplyUpdate(original string, u *Update) (string, *HunkFailure) {
	return ApplyHunks(original, u.Hunks)
}
