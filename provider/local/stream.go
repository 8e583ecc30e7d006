package local

import (
	"context"
	"errors"
	"io"
	"iter"
	"os"
	"sync/atomic"
	"unicode/utf8"

	"github.com/dshmount/dshmount/provider"
)

// StreamText yields the text of the regular file t in decoded chunks, with
// the same checks as ReadText. A multibyte character split by a read is held
// back and yielded whole with the next chunk. The context is checked between
// chunks (FS_ABORTED). Open failures are returned at once; later failures
// are yielded as the error of a final pair. The sequence can be ranged over
// once; the file is closed when the range ends (or when the sequence is
// garbage collected unused).
func (fs *FS) StreamText(ctx context.Context, t provider.Target) (iter.Seq2[string, error], error) {
	f, _, err := fs.openRegular(ctx, "stream", t)
	if err != nil {
		return nil, err
	}
	var used atomic.Bool
	chunk := fs.chunk
	return func(yield func(string, error) bool) {
		if !used.CompareAndSwap(false, true) {
			yield("", provider.NewError(provider.CodeInvalidArgument, "stream", t.DisplayPath, nil,
				"this stream was already consumed; call StreamText again"))
			return
		}
		defer f.Close()
		streamChunks(ctx, f, chunk, t.DisplayPath, yield)
	}, nil
}

// streamChunks reads f in reads of chunk bytes and yields UTF-8-complete
// text chunks.
func streamChunks(ctx context.Context, f *os.File, chunk int, disp string, yield func(string, error) bool) {
	buf := make([]byte, chunk+utf8.UTFMax)
	carry := 0
	var offset int64 // file offset of buf[0]
	for {
		if err := ctx.Err(); err != nil {
			yield("", aborted("stream", disp, err))
			return
		}
		n, rerr := f.Read(buf[carry : carry+chunk])
		eof := errors.Is(rerr, io.EOF)
		if rerr != nil && !eof {
			yield("", ioFailure("stream", disp, rerr))
			return
		}
		data := buf[:carry+n]
		cut := len(data)
		if !eof {
			cut = completeRunes(data)
		}
		if err := checkText(data[:cut], offset); err != nil {
			yield("", notText("stream", disp, err))
			return
		}
		if cut > 0 && !yield(string(data[:cut]), nil) {
			return
		}
		offset += int64(cut)
		carry = copy(buf, data[cut:])
		if eof {
			return
		}
	}
}

// completeRunes returns the length of the longest prefix of data that does
// not end inside a multibyte character.
func completeRunes(data []byte) int {
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax; i-- {
		if utf8.RuneStart(data[i]) {
			if utf8.FullRune(data[i:]) {
				return len(data)
			}
			return i
		}
	}
	return len(data)
}
