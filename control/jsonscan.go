package control

import (
	"encoding/binary"
	"math/bits"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// A strict JSON reader over a string, for the client's hot path: it checks
// the grammar as it goes (as encoding/json's checkValid does), and its
// strings decode to exactly what encoding/json gives (escapes, surrogate
// pairs, invalid UTF-8 replaced by U+FFFD). A string without escapes is
// returned as a substring of the input, not copied. Every function takes
// the input and a position and returns the position after what it read;
// ok false means the input is not what was asked for (the caller falls
// back to encoding/json, which gives the error).

// maxScanDepth bounds nesting, as encoding/json does.
const maxScanDepth = 10000

// skipSpace returns the position of the first non-space byte at or after i.
func skipSpace(s string, i int) int {
	for i < len(s) {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipValue checks the JSON value at i (no leading space) and returns the
// position after it.
func skipValue(s string, i int) (int, bool) {
	return skipValueDepth(s, i, 0)
}

func skipValueDepth(s string, i, depth int) (int, bool) {
	if i >= len(s) || depth > maxScanDepth {
		return i, false
	}
	switch c := s[i]; {
	case c == '"':
		end, _, ok := scanString(s, i)
		return end, ok
	case c == '{':
		return skipContainer(s, i, depth, '}', true)
	case c == '[':
		return skipContainer(s, i, depth, ']', false)
	case c == 't':
		return skipLiteral(s, i, "true")
	case c == 'f':
		return skipLiteral(s, i, "false")
	case c == 'n':
		return skipLiteral(s, i, "null")
	case c == '-' || c >= '0' && c <= '9':
		return scanNumber(s, i)
	}
	return i, false
}

// skipContainer checks an object (keyed) or array at i.
func skipContainer(s string, i, depth int, closer byte, keyed bool) (int, bool) {
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == closer {
		return i + 1, true
	}
	for {
		var ok bool
		if keyed {
			if i >= len(s) || s[i] != '"' {
				return i, false
			}
			if i, _, ok = scanString(s, i); !ok {
				return i, false
			}
			if i = skipSpace(s, i); i >= len(s) || s[i] != ':' {
				return i, false
			}
			i = skipSpace(s, i+1)
		}
		if i, ok = skipValueDepth(s, i, depth+1); !ok {
			return i, false
		}
		i = skipSpace(s, i)
		if i >= len(s) {
			return i, false
		}
		switch s[i] {
		case ',':
			i = skipSpace(s, i+1)
		case closer:
			return i + 1, true
		default:
			return i, false
		}
	}
}

// skipLiteral checks the literal lit at i.
func skipLiteral(s string, i int, lit string) (int, bool) {
	if strings.HasPrefix(s[i:], lit) {
		return i + len(lit), true
	}
	return i, false
}

// scanNumber checks a JSON number at i.
func scanNumber(s string, i int) (int, bool) {
	digits := func(i int) int {
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		i = digits(i + 1)
	default:
		return i, false
	}
	if i < len(s) && s[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

// scanInt reads a JSON number at i that fits an int, as encoding/json
// decodes into an int field (a fraction or exponent is not ok).
func scanInt(s string, i int) (int, int, bool) {
	end, ok := scanNumber(s, i)
	if !ok {
		return 0, end, false
	}
	if d := s[i:end]; len(d) <= 18 {
		n := 0
		for _, c := range []byte(d) {
			if c < '0' || c > '9' {
				n = -1 // a sign, fraction or exponent: strconv's call
				break
			}
			n = n*10 + int(c-'0')
		}
		if n >= 0 {
			return n, end, true
		}
	}
	n, err := strconv.ParseInt(s[i:end], 10, strconv.IntSize)
	if err != nil {
		return 0, end, false
	}
	return int(n), end, true
}

// plainByte reports whether a JSON string holds c as it is: printable
// ASCII other than a quote or a backslash.
func plainByte(c byte) bool { return c-0x20 < 0x60 && c != '"' && c != '\\' }

// Eight bytes at a time: a word with no byte that needs a look of its own
// is skipped whole.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// load8 reads s[i:i+8] as a little-endian word.
func load8(s string, i int) uint64 {
	return binary.LittleEndian.Uint64([]byte(s[i : i+8]))
}

// hasByte reports whether a byte of x equals c, when no byte of x has its
// high bit set (the callers check that first).
func hasByte(x uint64, c byte) bool { return byteMask(x, c) != 0 }

// byteMask flags (high bit) the bytes of x that equal c. A flag can be
// false only above a true one (a borrow carries upwards), so the lowest
// flag is always a byte equal to c.
func byteMask(x uint64, c byte) uint64 {
	y := x ^ (ones * uint64(c))
	return (y - ones) &^ y & highs
}

// ctlOrHigh reports whether a byte of x is a control character or not
// ASCII.
func ctlOrHigh(x uint64) bool { return ctlOrHighMask(x) != 0 }

// ctlOrHighMask flags the control characters and non-ASCII bytes of x;
// the lowest flag is exact, as byteMask's.
func ctlOrHighMask(x uint64) uint64 { return ((x-ones*0x20)&^x | x) & highs }

// specialIn8 reports whether a byte of x ends a run of plain string bytes
// (a control character, ", \\ or a byte that is not ASCII).
func specialIn8(x uint64) bool { return specialMask8(x) != 0 }

// specialMask8 flags specialIn8's bytes; the lowest flag is exact.
func specialMask8(x uint64) uint64 { return ctlOrHighMask(x) | byteMask(x, '"') | byteMask(x, '\\') }

// htmlSpecialIn8 reports whether a byte of x is one encoding/json escapes
// in a string (control characters, ", \\, <, >, &) or is not ASCII.
func htmlSpecialIn8(x uint64) bool { return htmlSpecialMask8(x) != 0 }

// htmlSpecialMask8 flags htmlSpecialIn8's bytes; the lowest flag is exact.
// Setting bit 2 of every byte maps '"' and '&' (only) onto '&'; setting
// bit 1 maps '<' and '>' (only) onto '>'.
func htmlSpecialMask8(x uint64) uint64 {
	return ctlOrHighMask(x) | byteMask(x|ones*4, '&') | byteMask(x|ones*2, '>') | byteMask(x, '\\')
}

// firstFlagged is the index of the lowest flagged byte of a non-zero mask.
func firstFlagged(m uint64) int { return bits.TrailingZeros64(m) >> 3 }

// scanString checks the string at i (s[i] is the opening quote) and returns
// the position after its closing quote; plain is true when its content is
// valid UTF-8 without escapes (the content is then s[i+1:end-1] as it is).
func scanString(s string, i int) (end int, plain, ok bool) {
	// Fast path: up to the next quote, no backslash and no control
	// character.
	if q := strings.IndexByte(s[i+1:], '"'); q >= 0 {
		body := s[i+1 : i+1+q]
		if strings.IndexByte(body, '\\') < 0 {
			switch scanBody(body) {
			case bodyASCII:
				return i + q + 2, true, true
			case bodyHigh:
				return i + q + 2, utf8.ValidString(body), true
			}
		}
	}
	return scanStringSlow(s, i)
}

// What scanBody found in a string body without backslashes.
const (
	bodyASCII = iota // printable ASCII only
	bodyHigh         // non-ASCII bytes, no control characters
	bodyCtl          // a control character
)

// scanBody classifies a string body without backslashes.
func scanBody(b string) int {
	high := false
	j := 0
	for ; j+8 <= len(b); j += 8 {
		if ctlOrHigh(load8(b, j)) {
			break
		}
	}
	for ; j < len(b); j++ {
		switch c := b[j]; {
		case c < 0x20:
			return bodyCtl
		case c >= utf8.RuneSelf:
			high = true
		}
	}
	if high {
		return bodyHigh
	}
	return bodyASCII
}

// scanStringSlow is scanString byte by byte, escapes included.
func scanStringSlow(s string, i int) (end int, plain, ok bool) {
	plain = true
	high := false
	j := i + 1
	for j < len(s) {
		if j+8 <= len(s) {
			m := specialMask8(load8(s, j))
			if m == 0 {
				j += 8
				continue
			}
			j += firstFlagged(m)
		}
		c := s[j]
		if plainByte(c) {
			j++
			continue
		}
		switch {
		case c == '"':
			if high && !utf8.ValidString(s[i+1:j]) {
				plain = false
			}
			return j + 1, plain, true
		case c == '\\':
			plain = false
			if j+1 >= len(s) {
				return j, false, false
			}
			switch s[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if hexRune(s, j+2) < 0 {
					return j, false, false
				}
				j += 6
			default:
				return j, false, false
			}
		case c < 0x20:
			return j, false, false
		default: // non-ASCII
			high = true
			j++
		}
	}
	return j, false, false
}

// hexRune decodes the four hex digits at s[i:], or -1.
func hexRune(s string, i int) rune {
	if i+4 > len(s) {
		return -1
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// readString reads the string at i and returns its decoded value: a
// string without escapes is a slice of s; any other is checked and decoded
// in one pass (unquoteAt).
func readString(s string, i int) (string, int, bool) {
	if i >= len(s) || s[i] != '"' {
		return "", i, false
	}
	q := strings.IndexByte(s[i+1:], '"')
	if q >= 0 {
		body := s[i+1 : i+1+q]
		if strings.IndexByte(body, '\\') < 0 {
			switch scanBody(body) {
			case bodyASCII:
				return body, i + q + 2, true
			case bodyHigh:
				if utf8.ValidString(body) {
					return body, i + q + 2, true
				}
			}
		}
	}
	return unquoteAt(s, i, max(q, 0))
}

// unquoteAt checks the string at i (s[i] is its opening quote) and decodes
// it as encoding/json does, in one pass: escapes, surrogate pairs (a lone
// surrogate is U+FFFD) and invalid UTF-8 (each bad byte is U+FFFD). It
// accepts exactly what scanString accepts. hint is about the decoded size.
func unquoteAt(s string, i, hint int) (string, int, bool) {
	var b strings.Builder
	b.Grow(hint)
	start := i + 1 // the plain bytes not yet copied begin here
	for j := i + 1; j < len(s); {
		if j+8 <= len(s) {
			m := specialMask8(load8(s, j))
			if m == 0 {
				j += 8
				continue
			}
			j += firstFlagged(m)
		}
		c := s[j]
		if plainByte(c) {
			j++
			continue
		}
		switch {
		case c == '"':
			b.WriteString(s[start:j])
			return b.String(), j + 1, true
		case c == '\\':
			b.WriteString(s[start:j])
			n, ok := unescape(&b, s, j)
			if !ok {
				return "", j, false
			}
			j += n
			start = j
		case c < 0x20:
			return "", j, false
		default: // non-ASCII
			r, size := utf8.DecodeRuneInString(s[j:])
			if r == utf8.RuneError && size == 1 {
				b.WriteString(s[start:j])
				b.WriteRune(unicode.ReplacementChar)
				start = j + 1
			}
			j += size
		}
	}
	return "", len(s), false
}

// unescape writes the escape at s[j] (a backslash) to b and returns its
// length, or false when it is not a valid escape. A \u escape of a high
// surrogate followed by one of a low surrogate is one rune; a lone
// surrogate is U+FFFD.
func unescape(b *strings.Builder, s string, j int) (int, bool) {
	if j+1 >= len(s) {
		return 0, false
	}
	switch e := s[j+1]; e {
	case '"', '\\', '/':
		b.WriteByte(e)
	case 'b':
		b.WriteByte('\b')
	case 'f':
		b.WriteByte('\f')
	case 'n':
		b.WriteByte('\n')
	case 'r':
		b.WriteByte('\r')
	case 't':
		b.WriteByte('\t')
	case 'u':
		r := hexRune(s, j+2)
		if r < 0 {
			return 0, false
		}
		if utf16.IsSurrogate(r) {
			if k := j + 6; k+1 < len(s) && s[k] == '\\' && s[k+1] == 'u' {
				if dec := utf16.DecodeRune(r, hexRune(s, k+2)); dec != unicode.ReplacementChar {
					b.WriteRune(dec)
					return 12, true
				}
			}
			r = unicode.ReplacementChar
		}
		b.WriteRune(r)
		return 6, true
	default:
		return 0, false
	}
	return 2, true
}

// objectFields calls field for every key of the object at i, with the
// position of its value (after the colon and spaces); field returns the
// position after the value. Keys must be plain strings.
func objectFields(s string, i int, field func(key string, at int) (int, bool)) (int, bool) {
	if i >= len(s) || s[i] != '{' {
		return i, false
	}
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(s) || s[i] != '"' {
			return i, false
		}
		end, plain, ok := scanString(s, i)
		if !ok || !plain {
			return end, false
		}
		key := s[i+1 : end-1]
		if i = skipSpace(s, end); i >= len(s) || s[i] != ':' {
			return i, false
		}
		if i, ok = field(key, skipSpace(s, i+1)); !ok {
			return i, false
		}
		if i = skipSpace(s, i); i >= len(s) {
			return i, false
		}
		switch s[i] {
		case ',':
			i = skipSpace(s, i+1)
		case '}':
			return i + 1, true
		default:
			return i, false
		}
	}
}

// isNull reports whether the literal null is at i.
func isNull(s string, i int) bool { return strings.HasPrefix(s[i:], "null") }
