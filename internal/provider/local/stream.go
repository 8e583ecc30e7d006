package local

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"iter"
	"sync/atomic"
	"unicode/utf8"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/version"
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
		err := streamChunks(ctx, f, chunk, "stream", t.DisplayPath, func(b []byte) bool { return yield(string(b), nil) })
		if err != nil {
			yield("", err)
		}
	}, nil
}

// streamChunks reads r (for op) in reads of chunk bytes and hands each
// UTF-8-complete piece to each, which may keep it only until it returns; it
// stops early when each returns false. The text check is checkText's, over
// the whole file: a NUL byte or invalid UTF-8 anywhere is FS_NOT_TEXT.
func streamChunks(ctx context.Context, r io.Reader, chunk int, op, disp string, each func([]byte) bool) error {
	buf := make([]byte, chunk+utf8.UTFMax)
	carry := 0
	var offset int64 // file offset of buf[0]
	for {
		if err := ctx.Err(); err != nil {
			return aborted(op, disp, err)
		}
		n, rerr := r.Read(buf[carry : carry+chunk])
		eof := errors.Is(rerr, io.EOF)
		if rerr != nil && !eof {
			return ioFailure(op, disp, rerr)
		}
		data := buf[:carry+n]
		cut := len(data)
		if !eof {
			cut = completeRunes(data)
		}
		if err := checkText(data[:cut], offset); err != nil {
			return notText(op, disp, err)
		}
		if cut > 0 && !each(data[:cut]) {
			return nil
		}
		offset += int64(cut)
		carry = copy(buf, data[cut:])
		if eof {
			return nil
		}
	}
}

// ReadTextWindow implements provider.TextWindowReader: one pass over the
// file in reads of the stream's chunk size hashes every byte (the version),
// checks the text as ReadText does and keeps only window w, so memory is
// bounded by the window and the chunk whatever the file's size, and time
// grows with it.
func (fs *FS) ReadTextWindow(ctx context.Context, t provider.Target, w provider.TextWindow) (provider.WindowedText, provider.Info, error) {
	f, _, err := fs.openRegular(ctx, "read", t)
	if err != nil {
		return provider.WindowedText{}, provider.Info{}, err
	}
	defer f.Close()
	h := sha256.New()
	var size int64
	win := provider.NewWindower(w)
	err = streamChunks(ctx, f, fs.chunk, "read", t.DisplayPath, func(b []byte) bool {
		h.Write(b)
		size += int64(len(b))
		win.Write(b)
		return true
	})
	if err != nil {
		return provider.WindowedText{}, provider.Info{}, err
	}
	info := provider.Info{Version: version.OfSum(h.Sum(nil)), Type: provider.TypeFile, Size: size}
	return win.Result(), info, nil
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
