package control

import (
	"bufio"
	"errors"
	"io"
)

// DefaultMaxRequestBytes bounds one request line.
const DefaultMaxRequestBytes int64 = 64 << 20

// readBufferSize is the lineReader's read buffer: one fragment of a line.
const readBufferSize = 64 << 10

// lineReader reads newline-delimited frames, each at most max bytes (the
// newline excluded). A line is gathered as a list of fragment copies and
// joined once it is complete, so a line of n bytes never holds more than
// about 2n (no doubling growth). A longer line is discarded as it streams
// in: its fragments are dropped the moment it passes the bound, so it holds
// at most max plus one read buffer, and it is reported as tooLong; the
// reader then continues with the next line.
type lineReader struct {
	r   *bufio.Reader
	max int64
}

func newLineReader(r io.Reader, max int64) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, readBufferSize), max: max}
}

// next returns the next line without its newline (a copy the caller owns).
// tooLong is set, with a nil line, when the line exceeded the bound. At the
// end of the stream a final unterminated line is returned first, then
// io.EOF.
func (lr *lineReader) next() (line []byte, tooLong bool, err error) {
	var frags [][]byte // copies of the fragments of a line that is still within the bound
	var n int64
	for {
		frag, err := lr.r.ReadSlice('\n')
		n += int64(len(frag))
		complete := err == nil
		if complete {
			n-- // the newline itself does not count
			frag = frag[:len(frag)-1]
		}
		if !tooLong && n > lr.max {
			tooLong = true
			clear(frags)
			frags = nil // give the fragments back now, not at the end of the line
		}
		switch {
		case complete:
			if tooLong {
				return nil, true, nil
			}
			return join(frags, frag, n), false, nil
		case errors.Is(err, bufio.ErrBufferFull):
			if !tooLong {
				frags = append(frags, append([]byte(nil), frag...))
			}
			continue
		case errors.Is(err, io.EOF):
			if tooLong {
				return nil, true, nil
			}
			if n > 0 {
				return join(frags, frag, n), false, nil
			}
			return nil, false, io.EOF
		default:
			return nil, false, err
		}
	}
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
