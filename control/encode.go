package control

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dshmount/dshmount/internal/provider"
)

// jsonAppender is a result that encodes itself, skipping encoding/json's
// reflection and its re-validation of MarshalJSON output (a 1 MiB read has
// tens of thousands of lines).
type jsonAppender interface {
	appendJSON(dst []byte) []byte
	// sizeHint is about the number of bytes appendJSON appends.
	sizeHint() int
}

// readEncoded is a ReadResult that encodes itself (fs.read's result).
type readEncoded ReadResult

var _ jsonAppender = readEncoded{}

// sizeHint implements jsonAppender: the encoded size when no character
// needs an escape.
func (r readEncoded) sizeHint() int {
	n := 128 + len(r.DisplayPath) + len(r.Version)
	for _, l := range r.Lines {
		n += len(`{"number":,"text":""},`) + 20 + len(l.Text)
	}
	return n
}

// appendJSON implements jsonAppender with the encoding json.Marshal gives.
func (r readEncoded) appendJSON(b []byte) []byte {
	b = append(b, `{"displayPath":`...)
	b = appendJSONString(b, r.DisplayPath)
	b = append(b, `,"version":`...)
	b = appendJSONString(b, string(r.Version))
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, int64(r.Offset), 10)
	b = append(b, `,"lines":[`...)
	for i, l := range r.Lines {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"number":`...)
		b = strconv.AppendInt(b, int64(l.Number), 10)
		b = append(b, `,"text":`...)
		b = appendJSONString(b, l.Text)
		b = append(b, '}')
	}
	b = append(b, `],"totalLines":`...)
	b = strconv.AppendInt(b, int64(r.TotalLines), 10)
	if r.TruncatedByBytes {
		b = append(b, `,"truncatedByBytes":true`...)
	}
	b = append(b, `,"observed":`...)
	b = strconv.AppendBool(b, r.Observed)
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// htmlSafeByte reports whether encoding/json copies c into a string as it
// is: printable ASCII other than a quote, a backslash, <, > and &.
func htmlSafeByte(c byte) bool {
	return c-0x20 < 0x60 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}

// appendJSONString appends s as a JSON string, escaped as encoding/json
// does (control characters, quotes, backslashes, <, >, &, U+2028, U+2029;
// invalid UTF-8 becomes U+FFFD).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if i+8 <= len(s) {
			m := htmlSpecialMask8(load8(s, i))
			if m == 0 {
				i += 8
				continue
			}
			i += firstFlagged(m) // the bytes before it are plain
		}
		c := s[i]
		if htmlSafeByte(c) {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// editJSON and writeJSON encode fs.edit's and fs.write's results (whose
// texts are whole files) without reflection.
type (
	editJSON  EditResult
	writeJSON WriteResult
)

var (
	_ jsonAppender = editJSON{}
	_ jsonAppender = writeJSON{}
)

// appenderOf returns the appender of a result that has one.
func appenderOf(result any) (jsonAppender, bool) {
	switch r := result.(type) {
	case EditResult:
		return editJSON(r), true
	case WriteResult:
		return writeJSON(r), true
	}
	return nil, false
}

// sizeHint implements jsonAppender.
func (r editJSON) sizeHint() int {
	return 96 + len(r.Version) + textHint(r.Before) + textHint(r.After) + len(r.MergedOver)
}

// textHint is about the encoded size of a file's text: each newline takes
// two bytes, and a little room is left for other escapes, so that the
// buffer is not copied to grow near its end.
func textHint(s string) int {
	return len(s) + strings.Count(s, "\n") + len(s)/64 + 8
}

// appendJSON implements jsonAppender with the encoding json.Marshal gives:
// a 1 MiB file's edit carries its whole text twice.
func (r editJSON) appendJSON(b []byte) []byte {
	b = append(b, `{"version":`...)
	b = appendJSONString(b, string(r.Version))
	b = append(b, `,"before":`...)
	b = appendJSONString(b, r.Before)
	b = append(b, `,"after":`...)
	b = appendJSONString(b, r.After)
	return appendMerged(b, r.Merged, r.MergedOver)
}

// sizeHint implements jsonAppender.
func (r writeJSON) sizeHint() int {
	n := 112 + len(r.Operation) + len(r.Version) + textHint(r.After) + len(r.MergedOver)
	if r.Before != nil {
		n += textHint(*r.Before)
	}
	return n
}

// appendJSON implements jsonAppender with the encoding json.Marshal gives.
func (r writeJSON) appendJSON(b []byte) []byte {
	b = append(b, `{"operation":`...)
	b = appendJSONString(b, string(r.Operation))
	b = append(b, `,"version":`...)
	b = appendJSONString(b, string(r.Version))
	b = append(b, `,"before":`...)
	if r.Before == nil {
		b = append(b, "null"...)
	} else {
		b = appendJSONString(b, *r.Before)
	}
	b = append(b, `,"after":`...)
	b = appendJSONString(b, r.After)
	return appendMerged(b, r.Merged, r.MergedOver)
}

// appendMerged ends a change's result with its omitempty merge fields.
func appendMerged(b []byte, merged bool, over provider.Version) []byte {
	if merged {
		b = append(b, `,"merged":true`...)
	}
	if over != "" {
		b = append(b, `,"mergedOver":`...)
		b = appendJSONString(b, string(over))
	}
	return append(b, '}')
}
