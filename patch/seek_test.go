package patch

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSeek_Ladder(t *testing.T) {
	tests := []struct {
		name    string
		lines   []string
		pattern []string
		start   int
		eof     bool
		want    int
	}{
		{"empty pattern matches at start", []string{"a"}, nil, 1, false, 1},
		{"pattern longer than file", []string{"a"}, []string{"a", "a"}, 0, false, -1},
		{"exact", []string{"a", "b", "c"}, []string{"b", "c"}, 0, false, 1},
		{"search starts at start", []string{"a", "b", "a"}, []string{"a"}, 1, false, 2},
		{"start past the last candidate", []string{"a", "b"}, []string{"a"}, 2, false, -1},
		{"trailing whitespace", []string{"x", "b \t"}, []string{"b"}, 0, false, 1},
		{"trailing whitespace in pattern", []string{"b"}, []string{"b  "}, 0, false, 0},
		{"leading whitespace", []string{"x", "\t  b"}, []string{"  b "}, 0, false, 1},
		{"unicode white space trimmed", []string{"\u2003b\u00a0"}, []string{"b"}, 0, false, 0},
		{"hyphens and dashes", []string{"\u2010\u2011\u2012\u2013\u2014\u2015\u2212"}, []string{"-------"}, 0, false, 0},
		{"single quotes", []string{"\u2018\u2019\u201a\u201b"}, []string{"''''"}, 0, false, 0},
		{"double quotes", []string{"\u201c\u201d\u201e\u201f"}, []string{`""""`}, 0, false, 0},
		{"spaces", []string{"a\u00a0b\u2002c\u200ad\u202fe\u205ff\u3000g"}, []string{"a b c d e f g"}, 0, false, 0},
		{"punctuation in pattern maps too", []string{"a-b"}, []string{"a\u2013b"}, 0, false, 0},
		{"other runes are not mapped", []string{"a\u2016b"}, []string{"a-b"}, 0, false, -1},
		{"inner whitespace is not collapsed", []string{"a  b"}, []string{"a b"}, 0, false, -1},
		{"exact beats earlier trailing-space match", []string{"a ", "a"}, []string{"a"}, 0, false, 1},
		{"trim-end beats earlier trim match", []string{" a", "a "}, []string{"a"}, 0, false, 1},
		{"trim beats earlier punctuation match", []string{"\u2013", " - "}, []string{"-"}, 0, false, 1},
		{"all lines of one pass", []string{"a ", " b", "a", "b "}, []string{"a", "b"}, 0, false, 2},
		{"eof only tail", []string{"a", "b", "a"}, []string{"a"}, 0, true, 2},
		{"eof ignores earlier match", []string{"a", "b"}, []string{"a"}, 0, true, -1},
		{"eof fuzzy tail", []string{"a", "b  "}, []string{"b"}, 0, true, 1},
		{"eof empty pattern at start", []string{"a", "b"}, nil, 1, true, 1},
		{"empty file", nil, []string{""}, 0, false, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Seek(tt.lines, tt.pattern, tt.start, tt.eof))
		})
	}
}

func TestNormalizePunctuation_NoAllocWithoutTypography(t *testing.T) {
	s := "plain ascii line"
	assert.Equal(t, s, normalizePunctuation(s))
	assert.Equal(t, 0.0, testing.AllocsPerRun(10, func() { _ = normalizePunctuation(s) }))
	assert.Equal(t, "x - 'y' \"z\"", normalizePunctuation("x \u2014 \u2018y\u2019 \u201cz\u201d"))
}

func TestMatcher_CachesNormalizedLines(t *testing.T) {
	m := newMatcher([]string{" a ", "b"})
	assert.Equal(t, 0, m.seek([]string{"a"}, 0, false))
	first := m.normalized(passTrim)
	assert.Equal(t, []string{"a", "b"}, first)
	assert.Equal(t, 1, m.seek([]string{"b "}, 0, false))
	assert.Same(t, &first[0], &m.normalized(passTrim)[0])
}
