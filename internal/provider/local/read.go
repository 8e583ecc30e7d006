package local

import (
	"context"
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/version"
)

// Stat returns metadata of t, a resolved target (Resolve expanded its
// links); nil with a nil error when t is absent. A symbolic link found on
// its path now was swapped in since and is FS_SANDBOX_DENIED, never
// followed.
func (fs *FS) Stat(ctx context.Context, t provider.Target) (*provider.Info, error) {
	if err := checkCtx(ctx, "stat", t.DisplayPath); err != nil {
		return nil, err
	}
	rel, err := fs.relOf("stat", t)
	if err != nil {
		return nil, err
	}
	st, ok, err := fs.fence.StatTarget(rel)
	if err != nil {
		return nil, ioFailure("stat", t.DisplayPath, err)
	}
	if !ok {
		return nil, nil
	}
	ver, err := fs.versionAtRel(rel, &st, true)
	if err != nil {
		return nil, ioFailure("stat", t.DisplayPath, err)
	}
	return &provider.Info{Version: ver, Type: typeOf(st.Mode), Size: sizeOf(&st)}, nil
}

// openRegular opens t for reading and checks that it is a regular file.
// Opening is non-blocking so a named pipe cannot hang the call.
func (fs *FS) openRegular(ctx context.Context, op string, t provider.Target) (*os.File, unix.Stat_t, error) {
	var st unix.Stat_t
	if err := checkCtx(ctx, op, t.DisplayPath); err != nil {
		return nil, st, err
	}
	rel, err := fs.relOf(op, t)
	if err != nil {
		return nil, st, err
	}
	fd, err := fs.fence.Open(rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, st, provider.NewError(provider.CodeNotFound, op, t.DisplayPath, err,
				"the file does not exist; check the path or list the directory")
		}
		return nil, st, ioFailure(op, t.DisplayPath, err)
	}
	if err := retryEINTR0(func() error { return unix.Fstat(fd, &st) }); err != nil {
		unix.Close(fd)
		return nil, st, ioFailure(op, t.DisplayPath, pathErr("fstat", rel, err))
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, st, notRegular(op, t.DisplayPath, kindOf(st.Mode))
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, st, ioFailure(op, t.DisplayPath, pathErr("fcntl", rel, err))
	}
	return os.NewFile(uintptr(fd), rel), st, nil
}

// ReadText reads the whole regular file t as UTF-8 text. A NUL byte or
// invalid UTF-8 is FS_NOT_TEXT; directories and devices are
// FS_NOT_REGULAR_FILE; a missing file is FS_NOT_FOUND.
func (fs *FS) ReadText(ctx context.Context, t provider.Target) (string, error) {
	data, err := fs.readTextBytes(ctx, t)
	if err != nil {
		return "", err
	}
	return ownedString(data), nil
}

// ReadTextVersion implements provider.TextVersionReader: the version is the
// digest of the very bytes returned.
func (fs *FS) ReadTextVersion(ctx context.Context, t provider.Target) (string, provider.Info, error) {
	data, err := fs.readTextBytes(ctx, t)
	if err != nil {
		return "", provider.Info{}, err
	}
	info := provider.Info{Version: version.OfBytes(data), Type: provider.TypeFile, Size: int64(len(data))}
	return ownedString(data), info, nil
}

// readTextBytes reads the whole regular file t and checks it is text.
func (fs *FS) readTextBytes(ctx context.Context, t provider.Target) ([]byte, error) {
	f, st, err := fs.openRegular(ctx, "read", t)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := readAll(ctx, f, st.Size, -1)
	if err != nil {
		return nil, ioFailure("read", t.DisplayPath, err)
	}
	if err := checkText(data, 0); err != nil {
		return nil, notText("read", t.DisplayPath, err)
	}
	return data, nil
}

// ReadBytes reads the whole regular file t, which must hold at most maxBytes
// bytes, else FS_TOO_LARGE. It never reads more than maxBytes+1 bytes.
func (fs *FS) ReadBytes(ctx context.Context, t provider.Target, maxBytes int64) ([]byte, error) {
	if maxBytes < 0 {
		return nil, provider.NewError(provider.CodeInvalidArgument, "readBytes", t.DisplayPath, nil,
			"maxBytes is negative (%d); pass the largest size you accept", maxBytes)
	}
	f, st, err := fs.openRegular(ctx, "readBytes", t)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st.Size > maxBytes {
		return nil, tooLarge(t.DisplayPath, st.Size, maxBytes)
	}
	data, err := readAll(ctx, f, st.Size, maxBytes+1)
	if err != nil {
		return nil, ioFailure("readBytes", t.DisplayPath, err)
	}
	if int64(len(data)) > maxBytes {
		return nil, tooLarge(t.DisplayPath, int64(len(data)), maxBytes)
	}
	return data, nil
}

// tooLarge refuses a file over the caller's cap.
func tooLarge(disp string, size, maxBytes int64) *provider.Error {
	return provider.NewError(provider.CodeTooLarge, "readBytes", disp, nil,
		"the file holds at least %d bytes, over the limit of %d; read a byte range instead", size, maxBytes)
}

// ReadByteRange reads at most r.Length bytes of the regular file t from
// r.Offset; the result is shorter when the file ends inside the window.
func (fs *FS) ReadByteRange(ctx context.Context, t provider.Target, r provider.ByteRange) ([]byte, error) {
	if r.Offset < 0 || r.Length < 0 {
		return nil, provider.NewError(provider.CodeInvalidArgument, "readByteRange", t.DisplayPath, nil,
			"offset (%d) and length (%d) must not be negative", r.Offset, r.Length)
	}
	f, st, err := fs.openRegular(ctx, "readByteRange", t)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n := r.Length
	if avail := st.Size - r.Offset; avail < n {
		n = max(avail, 0)
	}
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, r.Offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, ioFailure("readByteRange", t.DisplayPath, err)
	}
	return buf[:got], nil
}

// readAll reads f to its end, expecting about size bytes; limit >= 0 stops
// after limit bytes. The context is checked between reads.
func readAll(ctx context.Context, f *os.File, size, limit int64) ([]byte, error) {
	capacity := size + 1 // one spare byte so a file that grew is noticed without regrowing
	if limit >= 0 && capacity > limit {
		capacity = limit
	}
	buf := make([]byte, 0, max(capacity, 512))
	for {
		if limit >= 0 && int64(len(buf)) >= limit {
			return buf, nil
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		window := buf[len(buf):cap(buf)]
		if limit >= 0 && int64(len(window)) > limit-int64(len(buf)) {
			window = window[:limit-int64(len(buf))]
		}
		n, err := f.Read(window)
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}
