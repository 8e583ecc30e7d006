package control

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"sync/atomic"
)

// DefaultMaxRequestBytes bounds one request line.
const DefaultMaxRequestBytes int64 = 64 << 20

// DefaultMaxPendingBytes bounds the bytes of request lines held by the
// daemon across all connections: lines still arriving, and complete lines
// until their request is answered.
const DefaultMaxPendingBytes int64 = 64 << 20

// readBufferSize is the lineReader's read buffer: one fragment of a line.
const readBufferSize = 64 << 10

// lineStatus says how a frame ended.
type lineStatus int

const (
	lineOK         lineStatus = iota // a complete line within the bounds
	lineTooLong                      // longer than the per-line bound; discarded
	lineOverBudget                   // the shared budget ran out; discarded
)

// frame is one line read by a lineReader.
type frame struct {
	line   []byte     // the line without its newline; nil unless lineOK (or asText)
	text   string     // the line, with lineReader.asText
	held   int64      // bytes reserved from the budget for line; release them when done
	status lineStatus // how the line ended
}

// byteBudget is a bound on bytes held by request lines, shared by every
// connection of a server.
type byteBudget struct {
	max  int64
	used atomic.Int64
}

// reserve takes n bytes from the budget, or nothing and false.
func (b *byteBudget) reserve(n int64) bool {
	if b == nil {
		return true
	}
	if b.used.Add(n) > b.max {
		b.used.Add(-n)
		return false
	}
	return true
}

// release gives n reserved bytes back.
func (b *byteBudget) release(n int64) {
	if b != nil && n != 0 {
		b.used.Add(-n)
	}
}

// inUse returns the bytes reserved now.
func (b *byteBudget) inUse() int64 { return b.used.Load() }

// lineReader reads newline-delimited frames, each at most max bytes (the
// newline excluded). A line is gathered as a list of fragment copies and
// joined once it is complete, so a line of n bytes never holds more than
// about 2n (no doubling growth). A longer line is discarded as it streams
// in: its fragments are dropped the moment it passes the bound, so it holds
// at most max plus one read buffer, and it is reported as tooLong; the
// reader then continues with the next line. With a budget, every fragment
// kept is reserved from it first; a fragment the budget refuses drops the
// line the same way (lineOverBudget).
type lineReader struct {
	r      *bufio.Reader
	max    int64
	budget *byteBudget // nil: only the per-line bound
	// began, when set, runs once the first byte of a line has arrived.
	began func()
	// overBudget, when set, runs the moment a line is dropped for the
	// budget, before the rest of the line has arrived (a peer that never
	// ends its line still hears why).
	overBudget func()
	// asText joins a complete line into frame.text instead of frame.line
	// (one copy fewer for a reader that wants a string).
	asText bool
}

func newLineReader(r io.Reader, max int64) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, readBufferSize), max: max}
}

// next returns the next line without its newline (a copy the caller owns).
// tooLong is set, with a nil line, when the line exceeded the bound. At the
// end of the stream a final unterminated line is returned first, then
// io.EOF.
func (lr *lineReader) next() (line []byte, tooLong bool, err error) {
	f, err := lr.nextFrame()
	lr.budget.release(f.held)
	return f.line, f.status != lineOK, err
}

// nextFrame returns the next frame. The caller releases f.held once it is
// done with f.line. On an error nothing is held.
func (lr *lineReader) nextFrame() (f frame, err error) {
	if _, err := lr.r.Peek(1); err != nil {
		return frame{}, err
	}
	if lr.began != nil {
		lr.began()
	}
	var frags [][]byte // copies of the fragments of a line that is still within the bounds
	var n, held int64
	drop := func(st lineStatus) {
		f.status = st
		clear(frags)
		frags = nil // give the fragments back now, not at the end of the line
		lr.budget.release(held)
		held = 0
	}
	defer func() {
		if err != nil {
			lr.budget.release(held)
		}
	}()
	for {
		frag, err := lr.r.ReadSlice('\n')
		n += int64(len(frag))
		complete := err == nil
		if complete {
			n-- // the newline itself does not count
			frag = frag[:len(frag)-1]
		}
		if f.status == lineOK && n > lr.max {
			drop(lineTooLong)
		}
		keep := f.status == lineOK && (errors.Is(err, bufio.ErrBufferFull) || complete || errors.Is(err, io.EOF))
		if keep && len(frag) > 0 {
			if !lr.budget.reserve(int64(len(frag))) {
				drop(lineOverBudget)
				if lr.overBudget != nil {
					lr.overBudget()
				}
			} else {
				held += int64(len(frag))
			}
		}
		switch {
		case complete:
			if f.status != lineOK {
				return f, nil
			}
			return lr.complete(frags, frag, n, held), nil
		case errors.Is(err, bufio.ErrBufferFull):
			if f.status == lineOK {
				frags = append(frags, append([]byte(nil), frag...))
			}
			continue
		case errors.Is(err, io.EOF):
			if f.status != lineOK {
				return f, nil
			}
			if n > 0 {
				return lr.complete(frags, frag, n, held), nil
			}
			return frame{}, io.EOF
		default:
			return frame{}, err
		}
	}
}

// complete is the frame of a whole line made of frags and last (n bytes).
func (lr *lineReader) complete(frags [][]byte, last []byte, n, held int64) frame {
	if lr.asText {
		return frame{text: joinText(frags, last, n), held: held}
	}
	return frame{line: join(frags, last, n), held: held}
}

// joinText concatenates frags and last (n bytes in all) into a string.
func joinText(frags [][]byte, last []byte, n int64) string {
	var b strings.Builder
	b.Grow(int(n))
	for _, f := range frags {
		b.Write(f)
	}
	b.Write(last)
	return b.String()
}

// join concatenates frags and last (n bytes in all) into one new slice.
func join(frags [][]byte, last []byte, n int64) []byte {
	if len(frags) == 0 {
		return append(make([]byte, 0, len(last)), last...)
	}
	out := make([]byte, 0, n)
	for _, f := range frags {
		out = append(out, f...)
	}
	return append(out, last...)
}
