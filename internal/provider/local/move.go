package local

import (
	"context"
	"errors"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/eol"
)

// MoveFile publishes the text of src, patched by opts.Hunks when given, at
// dst, then removes src. Both targets are locked in canonical order; one
// identity is FS_SAME_TARGET. The source guard follows PatchText (missing or
// stale: FS_STALE_VERSION), the destination guard follows WriteText. The
// source's line endings and mode carry over. Cancellation is checked before
// the destination is staged; after that both effects complete. A source that
// cannot be removed is reported in the outcome (SourceDeleted false), not as
// an error: the destination is published either way.
func (fs *FS) MoveFile(ctx context.Context, src, dst provider.Target, opts provider.MoveOptions) (provider.MoveOutcome, error) {
	const op = "move"
	var out provider.MoveOutcome
	if err := checkCtx(ctx, op, src.DisplayPath); err != nil {
		return out, err
	}
	if _, err := fs.relOf(op, src); err != nil {
		return out, err
	}
	if _, err := fs.relOf(op, dst); err != nil {
		return out, err
	}
	if src.Key == dst.Key {
		return out, provider.NewError(provider.CodeSameTarget, op, src.DisplayPath, nil,
			"the source and the destination are the same file (%s); choose another destination", dst.DisplayPath)
	}
	unlock, err := fs.locks.lock(ctx, src.Key, dst.Key)
	if err != nil {
		return out, aborted(op, src.DisplayPath, err)
	}
	defer unlock()

	sp, err := fs.probeTarget(op, src)
	if err != nil {
		return out, err
	}
	defer sp.close()
	if err := fs.requireSource(sp, opts.ExpectedSource); err != nil {
		return out, err
	}
	if err := requireRemovable(sp); err != nil {
		return out, err
	}
	dp, err := fs.probeTarget(op, dst)
	if err != nil {
		return out, err
	}
	defer dp.close()
	if err := fs.checkWriteIntent(dp, opts.ExpectedDestination); err != nil {
		return out, err
	}

	data, err := sp.readAll(ctx)
	if err != nil {
		return out, err
	}
	if err := checkText(data, 0); err != nil {
		return out, notText(op, src.DisplayPath, err)
	}
	raw := ownedString(data)
	lf := eol.ToLF(raw)
	if int64(len(raw)) <= fs.maxBasis {
		out.SourceBefore = &lf
	}
	stored, after := raw, lf
	if len(opts.Hunks) > 0 {
		if after, err = applyHunks(op, src.DisplayPath, lf, opts.Hunks); err != nil {
			return out, err
		}
		stored = eol.Restore(after, eol.IsCRLF(data))
	}

	dest := provider.WriteOutcome{Operation: provider.OpCreate, After: after}
	if dp.exists {
		dest.Operation = provider.OpUpdate
		data, _, err := dp.readBasis(ctx, fs.maxBasis)
		if err != nil {
			return out, err
		}
		if int64(len(stored)) <= fs.maxBasis {
			dest.Before = basis(data, fs.maxBasis)
		}
	}
	if err := checkCtx(ctx, op, src.DisplayPath); err != nil {
		return out, err
	}
	pub, err := fs.publish(ctx, dp, publishSpec{
		data:      stored,
		like:      &sp.st,
		noReplace: opts.ExpectedDestination != nil && opts.ExpectedDestination.Kind == provider.CreateIfAbsent,
		ignoreCtx: true,
	})
	if err != nil {
		return out, err
	}
	dest.Version = pub.version
	out.Destination = dest

	remove := fs.unlink
	if fs.hooks.removeSource != nil {
		remove = func(p *probe) (bool, error) { return false, fs.hooks.removeSource(p.dir, p.name) }
	}
	if removed, err := remove(sp); !removed {
		e := ioFailure(op, src.DisplayPath, err)
		out.SourceFailure = &provider.SourceFailure{
			Code: e.Code,
			Message: "the destination " + dst.DisplayPath + " was written but the source " + src.DisplayPath +
				" could not be removed (" + err.Error() + "); remove it yourself",
		}
		return out, nil
	}
	out.SourceDeleted = true
	return out, nil
}

// requireRemovable refuses a move whose source the caller could not remove
// (no write and search permission on its directory, checked against the
// calling thread's filesystem credentials), before anything is published:
// the outcome a rename would have.
func requireRemovable(sp *probe) error {
	if sp.dir == nil {
		return nil
	}
	err := unix.Faccessat2(int(sp.dir.Fd()), "", unix.W_OK|unix.X_OK, unix.AT_EACCESS|unix.AT_EMPTY_PATH)
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EROFS) {
		return ioFailure(sp.op, sp.disp, pathErr("faccessat2", sp.dirRel, err))
	}
	return nil // ENOSYS and the like: the removal itself decides
}
