package local

import (
	"context"
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/beneath"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/eol"
)

// probe is the state of a mutation target, taken under its lock. The parent
// directory stays open so that every later step is relative to it.
type probe struct {
	op, disp     string
	rel          string
	dirRel, name string
	dir          *os.File // nil while the parent directory does not exist
	exists       bool
	st           unix.Stat_t // when exists
	file         *os.File    // open for reading when exists, regular and readable
}

// probeTarget opens the parent of t and looks at t without following a final
// symbolic link. An existing regular file is opened for reading, so the
// version checked and the content read belong to the same inode.
func (fs *FS) probeTarget(op string, t provider.Target) (*probe, error) {
	rel, err := fs.relOf(op, t)
	if err != nil {
		return nil, err
	}
	if rel == "." {
		return nil, notRegular(op, t.DisplayPath, "directory (the workspace root)")
	}
	p := &probe{op: op, disp: t.DisplayPath, rel: rel}
	p.dirRel, p.name = beneath.Split(rel)
	p.dir, err = fs.fence.OpenFile(p.dirRel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if errors.Is(err, unix.ENOENT) {
		return p, nil
	}
	if err != nil {
		return nil, ioFailure(op, t.DisplayPath, err)
	}
	if err := p.look(); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// look reads the state of the target entry.
func (p *probe) look() error {
	dirFD := int(p.dir.Fd())
	err := retryEINTR0(func() error { return unix.Fstatat(dirFD, p.name, &p.st, unix.AT_SYMLINK_NOFOLLOW) })
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return ioFailure(p.op, p.disp, pathErr("fstatat", p.rel, err))
	}
	p.exists = true
	if p.st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil
	}
	fd, err := retryEINTR(func() (int, error) {
		return unix.Openat(dirFD, p.name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	})
	switch {
	case errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM):
		return nil // writable but unreadable: metadata only
	case errors.Is(err, unix.ENOENT):
		p.exists = false
		return nil
	case err != nil:
		return ioFailure(p.op, p.disp, pathErr("openat", p.rel, err))
	}
	if err := retryEINTR0(func() error { return unix.Fstat(fd, &p.st) }); err != nil {
		unix.Close(fd)
		return ioFailure(p.op, p.disp, pathErr("fstat", p.rel, err))
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return ioFailure(p.op, p.disp, pathErr("fcntl", p.rel, err))
	}
	p.file = os.NewFile(uintptr(fd), p.rel)
	return nil
}

// close releases the descriptors of p.
func (p *probe) close() {
	if p.file != nil {
		p.file.Close()
	}
	if p.dir != nil {
		p.dir.Close()
	}
}

// regular reports whether the target exists as a regular file.
func (p *probe) regular() bool { return p.exists && p.st.Mode&unix.S_IFMT == unix.S_IFREG }

// requireRegular refuses an existing target that is not a regular file.
func (p *probe) requireRegular() error {
	if p.exists && !p.regular() {
		return notRegular(p.op, p.disp, kindOf(p.st.Mode))
	}
	return nil
}

// requireSource is the check of edit, patch, delete and move sources: the
// target must exist (else FS_STALE_VERSION, guarded or not), be a regular
// file, and match the guard.
func (fs *FS) requireSource(p *probe, guard *provider.VersionGuard) error {
	if !p.exists {
		return staleMissing(p.op, p.disp)
	}
	if err := p.requireRegular(); err != nil {
		return err
	}
	if guard != nil {
		now, err := fs.probeVersion(p)
		if err != nil {
			return err
		}
		if now != guard.Version {
			return staleChanged(p.op, p.disp, guard.Version, now)
		}
	}
	return nil
}

// checkWriteIntent applies a WriteText-style guard to a probed destination.
func (fs *FS) checkWriteIntent(p *probe, intent *provider.WriteIntent) error {
	if err := p.requireRegular(); err != nil {
		return err
	}
	if intent == nil {
		return nil
	}
	switch intent.Kind {
	case provider.CreateIfAbsent:
		if p.exists {
			return existsRefusal(p.op, p.disp, nil)
		}
	case provider.ReplaceIfVersion:
		if !p.exists {
			return staleMissing(p.op, p.disp)
		}
		now, err := fs.probeVersion(p)
		if err != nil {
			return err
		}
		if now != intent.Version {
			return staleChanged(p.op, p.disp, intent.Version, now)
		}
	default:
		return provider.NewError(provider.CodeInvalidArgument, p.op, p.disp, nil,
			"unknown write intent %q; use %q or %q", intent.Kind, provider.CreateIfAbsent, provider.ReplaceIfVersion)
	}
	return nil
}

// existsRefusal refuses a create-if-absent write of an existing file.
func existsRefusal(op, disp string, cause error) *provider.Error {
	return provider.NewError(provider.CodeNotObserved, op, disp, cause,
		"the file already exists and you have not read it; read it first, then write with its version")
}

// readAll reads the whole content of the probed file.
func (p *probe) readAll(ctx context.Context) ([]byte, error) {
	if p.file == nil {
		return nil, provider.NewError(provider.CodePermissionDenied, p.op, p.disp, unix.EACCES,
			"the file cannot be read; check its permissions")
	}
	if _, err := p.file.Seek(0, io.SeekStart); err != nil {
		return nil, ioFailure(p.op, p.disp, err)
	}
	data, err := readAll(ctx, p.file, p.st.Size, -1)
	if err != nil {
		return nil, ioFailure(p.op, p.disp, err)
	}
	return data, nil
}

// readBasis reads the content when it is within maxBytes and reports the
// file's line-ending style either way. data is nil for an unreadable or
// larger file.
func (p *probe) readBasis(ctx context.Context, maxBytes int64) (data []byte, crlf bool, err error) {
	if p.file == nil {
		return nil, false, nil
	}
	if p.st.Size <= maxBytes {
		data, err := p.readAll(ctx)
		if err != nil {
			return nil, false, err
		}
		if int64(len(data)) > maxBytes {
			return nil, eol.IsCRLF(data), nil
		}
		return data, eol.IsCRLF(data), nil
	}
	crlf, err = scanCRLF(ctx, p.file)
	if err != nil {
		return nil, false, ioFailure(p.op, p.disp, err)
	}
	return nil, crlf, nil
}

// scanCRLF reports whether f holds a CRLF, reading it in chunks.
func scanCRLF(ctx context.Context, f *os.File) (bool, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return false, err
	}
	buf := make([]byte, 64<<10)
	prevCR := false
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if (prevCR && buf[0] == '\n') || eol.IsCRLF(buf[:n]) {
				return true, nil
			}
			prevCR = buf[n-1] == '\r'
		}
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
	}
}
