// Package eol owns the line-ending round trip of text files: text is
// handled LF-normalized and stored back in the style of the file it
// replaces (CRLF when the file held any CRLF).
package eol

import (
	"bytes"
	"strings"
)

// IsCRLF reports whether a file's bytes are in the CRLF style: they hold
// at least one CRLF.
func IsCRLF(data []byte) bool { return bytes.Contains(data, []byte("\r\n")) }

// IsCRLFText is IsCRLF for text already in a string.
func IsCRLFText(s string) bool { return strings.Contains(s, "\r\n") }

// ToLF replaces every CRLF by LF; text without CRLF is returned as it is,
// without a copy.
func ToLF(s string) string {
	if !IsCRLFText(s) {
		return s
	}
	return strings.ReplaceAll(s, "\r\n", "\n")
}

// ToCRLF turns LF-normalized text into CRLF text.
func ToCRLF(lf string) string { return strings.ReplaceAll(lf, "\n", "\r\n") }

// Restore renders LF-normalized text in a file's style: CRLF when crlf,
// else as it is.
func Restore(lf string, crlf bool) string {
	if crlf {
		return ToCRLF(lf)
	}
	return lf
}
