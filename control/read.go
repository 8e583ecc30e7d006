package control

import (
	"strings"
	"unicode/utf8"
)

// Read window defaults.
const (
	DefaultReadLimit    = 2000      // lines per read
	DefaultReadMaxBytes = 256 << 10 // bytes of returned text per read
)

// window selects lines [offset, offset+limit) of text (1-based), numbered,
// retaining at most maxBytes of line text (each line counts its bytes plus
// one for the newline). Once the cap is hit no further lines are retained,
// but totalLines stays exact. A first selected line longer than the cap is
// cut at a UTF-8 boundary so a read always shows something. Lines lose a
// trailing carriage return.
func window(text string, offset, limit int, maxBytes int64) (lines []Line, totalLines int, truncated bool) {
	totalLines = strings.Count(text, "\n")
	if text != "" && !strings.HasSuffix(text, "\n") {
		totalLines++
	}
	if offset > totalLines {
		return []Line{}, totalLines, false
	}
	// Every retained line costs at least one byte of maxBytes.
	lines = make([]Line, 0, min(int64(limit), int64(totalLines-offset+1), maxBytes))
	rest := text
	var used int64
	for n := 1; n < offset+limit && rest != ""; n++ {
		line := rest
		if i := strings.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		if n < offset {
			continue
		}
		line = strings.TrimSuffix(line, "\r")
		cost := int64(len(line)) + 1
		if used+cost > maxBytes {
			truncated = true
			if len(lines) == 0 {
				lines = append(lines, Line{Number: n, Text: cutUTF8(line, maxBytes)})
			}
			break
		}
		used += cost
		lines = append(lines, Line{Number: n, Text: line})
	}
	return lines, totalLines, truncated
}

// cutUTF8 returns the longest prefix of s of at most n bytes that ends on a
// rune boundary.
func cutUTF8(s string, n int64) string {
	if int64(len(s)) <= n {
		return s
	}
	cut := int(n)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
