package control

import (
	"bufio"
	"errors"
	"io"
)

// DefaultMaxRequestBytes bounds one request line.
const DefaultMaxRequestBytes int64 = 64 << 20

// lineReader reads newline-delimited frames, each at most max bytes (the
// newline excluded). A longer line is discarded as it streams in, never
// buffered whole, and reported as tooLong; the reader then continues with
// the next line.
type lineReader struct {
	r   *bufio.Reader
	max int64
}

func newLineReader(r io.Reader, max int64) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next line without its newline (a copy the caller owns).
// tooLong is set, with a nil line, when the line exceeded the bound. At the
// end of the stream a final unterminated line is returned first, then
// io.EOF.
func (lr *lineReader) next() (line []byte, tooLong bool, err error) {
	var buf []byte
	var n int64
	for {
		frag, err := lr.r.ReadSlice('\n')
		n += int64(len(frag))
		complete := err == nil
		if complete {
			n-- // the newline itself does not count
		}
		if !tooLong && n > lr.max {
			tooLong = true
			buf = nil
		}
		if !tooLong {
			if complete {
				frag = frag[:len(frag)-1]
			}
			buf = append(buf, frag...)
		}
		switch {
		case complete:
			if tooLong {
				return nil, true, nil
			}
			if buf == nil {
				buf = []byte{}
			}
			return buf, false, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if tooLong {
				return nil, true, nil
			}
			if len(buf) > 0 {
				return buf, false, nil
			}
			return nil, false, io.EOF
		default:
			return nil, false, err
		}
	}
}
