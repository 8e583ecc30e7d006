package fsx

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"unicode/utf8"
)

// fileModel is what a file must contain.
type fileModel struct {
	exists bool
	data   []byte
}

// isText reports whether the content can travel as socket text: valid
// UTF-8 without NUL bytes (holes read as NULs).
func (m *fileModel) isText() bool {
	return bytes.IndexByte(m.data, 0) < 0 && utf8.Valid(m.data)
}

// resize truncates or zero-extends the content to n bytes.
func (m *fileModel) resize(n int) {
	if n <= len(m.data) {
		m.data = m.data[:n]
		return
	}
	m.data = append(m.data, make([]byte, n-len(m.data))...)
}

// writeAt stores p at off, zero-filling a gap.
func (m *fileModel) writeAt(off int, p []byte) {
	if end := off + len(p); end > len(m.data) {
		m.resize(end)
	}
	copy(m.data[off:], p)
}

// alphabet is the byte set of written data: text without '\r', so that
// socket writes never convert line endings.
const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 \n"

// randomText returns n bytes from alphabet.
func randomText(r *rand.Rand, n int) []byte {
	p := make([]byte, n)
	var x uint64
	for i := range p {
		if i%8 == 0 {
			x = r.Uint64()
		}
		p[i] = alphabet[int(x&0xff)%len(alphabet)]
		x >>= 8
	}
	return p
}

// diff describes the first difference between got and want.
func diff(got, want []byte) string {
	n := min(len(got), len(want))
	i := 0
	for i < n && got[i] == want[i] {
		i++
	}
	if i == n && len(got) == len(want) {
		return "equal"
	}
	lo, hi := max(0, i-8), i+16
	return fmt.Sprintf("got %d bytes, want %d; first difference at byte %d: got %q, want %q",
		len(got), len(want), i, window(got, lo, hi), window(want, lo, hi))
}

func window(p []byte, lo, hi int) []byte {
	if lo > len(p) {
		return nil
	}
	return p[lo:min(hi, len(p))]
}

// opLog is a ring of the last operations of one worker.
type opLog struct {
	lines []string
	next  int
	full  bool
}

func newOpLog(n int) *opLog { return &opLog{lines: make([]string, n)} }

func (l *opLog) add(format string, args ...any) {
	l.lines[l.next] = fmt.Sprintf(format, args...)
	l.next++
	if l.next == len(l.lines) {
		l.next, l.full = 0, true
	}
}

// snapshot returns the kept operations, oldest first.
func (l *opLog) snapshot() []string {
	if !l.full {
		return append([]string(nil), l.lines[:l.next]...)
	}
	return append(append([]string(nil), l.lines[l.next:]...), l.lines[:l.next]...)
}
