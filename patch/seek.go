package patch

import (
	"strings"
	"unicode"
)

// matchPass is one rung of the fuzz ladder: a way of comparing a file line
// with a pattern line.
type matchPass int

const (
	passExact       matchPass = iota // lines equal exactly
	passTrimEnd                      // equal after removing trailing white space
	passTrim                         // equal after trimming both ends
	passPunctuation                  // trimmed, typographic punctuation mapped to ASCII
	passCount
)

// normalize returns the form of s compared in pass p.
func (p matchPass) normalize(s string) string {
	switch p {
	case passTrimEnd:
		return strings.TrimRightFunc(s, unicode.IsSpace)
	case passTrim:
		return strings.TrimSpace(s)
	case passPunctuation:
		return normalizePunctuation(strings.TrimSpace(s))
	default:
		return s
	}
}

// asciiFor maps a typographic punctuation or space rune to its ASCII
// counterpart; ok is false for every other rune.
func asciiFor(r rune) (byte, bool) {
	switch {
	case r >= 0x2010 && r <= 0x2015, r == 0x2212:
		return '-', true
	case r >= 0x2018 && r <= 0x201B:
		return '\'', true
	case r >= 0x201C && r <= 0x201F:
		return '"', true
	case r == 0xA0, r >= 0x2002 && r <= 0x200A, r == 0x202F, r == 0x205F, r == 0x3000:
		return ' ', true
	}
	return 0, false
}

// normalizePunctuation maps typographic dashes, quotes and spaces to ASCII.
// It allocates only when s holds such a rune.
func normalizePunctuation(s string) string {
	first := -1
	for i, r := range s {
		if _, ok := asciiFor(r); ok {
			first = i
			break
		}
	}
	if first < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:first])
	for _, r := range s[first:] {
		if c, ok := asciiFor(r); ok {
			b.WriteByte(c)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// matcher finds sequences of lines in one file. It caches each pass's
// normalized file lines, so repeated searches of one ApplyHunks call
// normalize every file line at most once per pass.
type matcher struct {
	lines []string
	norm  [passCount][]string
}

func newMatcher(lines []string) *matcher {
	m := &matcher{lines: lines}
	m.norm[passExact] = lines
	return m
}

// normalized returns the file lines as compared in pass p.
func (m *matcher) normalized(p matchPass) []string {
	if m.norm[p] == nil {
		n := make([]string, len(m.lines))
		for i, l := range m.lines {
			n[i] = p.normalize(l)
		}
		m.norm[p] = n
	}
	return m.norm[p]
}

// seek returns the first position of pattern in the file at or after start,
// or -1. With eof the only candidate is the tail position
// len(lines)-len(pattern). The passes of the fuzz ladder run one after the
// other over every candidate, so an exact match anywhere beats a fuzzy match
// earlier in the file. An empty pattern matches at start.
func (m *matcher) seek(pattern []string, start int, eof bool) int {
	if len(pattern) == 0 {
		return start
	}
	if len(pattern) > len(m.lines) {
		return -1
	}
	last := len(m.lines) - len(pattern)
	first := start
	if eof {
		first = last
	}
	if first < 0 {
		first = 0
	}
	if first > last {
		return -1
	}
	want := make([]string, len(pattern))
	for p := passExact; p < passCount; p++ {
		for i, l := range pattern {
			want[i] = p.normalize(l)
		}
		if i := scan(m.normalized(p), want, first, last); i >= 0 {
			return i
		}
	}
	return -1
}

// scan returns the first i in [first, last] where lines[i:] starts with want.
func scan(lines, want []string, first, last int) int {
	head := want[0]
candidates:
	for i := first; i <= last; i++ {
		if lines[i] != head {
			continue
		}
		for j := 1; j < len(want); j++ {
			if lines[i+j] != want[j] {
				continue candidates
			}
		}
		return i
	}
	return -1
}

// Seek returns the first position of pattern in lines at or after start, per
// the fuzz ladder of docs/patch-format.md, or -1 when it is not found. With eof
// the only candidate position is len(lines)-len(pattern).
func Seek(lines, pattern []string, start int, eof bool) int {
	return newMatcher(lines).seek(pattern, start, eof)
}
