package local

import (
	"context"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/provider"
)

// DeleteFile removes the regular file t. A missing target is
// FS_STALE_VERSION, guarded or not; a directory or other non-file is
// FS_NOT_REGULAR_FILE. The outcome carries the bounded LF-normalized removed
// text, or nil.
func (fs *FS) DeleteFile(ctx context.Context, t provider.Target, expected *provider.VersionGuard) (provider.DeleteOutcome, error) {
	const op = "delete"
	p, unlock, err := fs.lockAndProbe(ctx, op, t)
	if err != nil {
		return provider.DeleteOutcome{}, err
	}
	defer unlock()
	defer p.close()
	if err := fs.requireSource(p, expected); err != nil {
		return provider.DeleteOutcome{}, err
	}
	data, _, err := p.readBasis(ctx, fs.maxBasis)
	if err != nil {
		return provider.DeleteOutcome{}, err
	}
	if err := checkCtx(ctx, op, t.DisplayPath); err != nil {
		return provider.DeleteOutcome{}, err
	}
	if _, err := fs.unlink(p); err != nil {
		return provider.DeleteOutcome{}, ioFailure(op, t.DisplayPath, err)
	}
	return provider.DeleteOutcome{Before: basis(data, fs.maxBasis)}, nil
}

// unlink removes the probed file and fsyncs the directory (a surviving
// hard link keeps its version: its bytes did not change). removed
// tells whether the name is gone, even when the fsync then failed.
func (fs *FS) unlink(p *probe) (removed bool, err error) {
	dirFD := int(p.dir.Fd())
	if err := retryEINTR0(func() error { return unix.Unlinkat(dirFD, p.name, 0) }); err != nil {
		return false, pathErr("unlinkat", p.rel, err)
	}
	if err := fs.syncDir(p.dir); err != nil {
		return true, pathErr("fsync", p.dirRel, err)
	}
	return true, nil
}
