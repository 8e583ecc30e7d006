package local

import (
	"context"
	"unicode/utf8"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/eol"
)

// WriteText atomically creates or replaces t with content. expected nil is
// an unconditional create-or-overwrite; CreateIfAbsent refuses an existing
// file with FS_NOT_OBSERVED, even one that appears after the first probe;
// ReplaceIfVersion refuses a missing or changed file with FS_STALE_VERSION.
// A file stored with CRLF line endings keeps them, and a replaced file keeps
// its mode. Missing parent directories are created.
func (fs *FS) WriteText(ctx context.Context, t provider.Target, content string, expected *provider.WriteIntent) (provider.WriteOutcome, error) {
	const op = "write"
	var out provider.WriteOutcome
	if !utf8.ValidString(content) {
		return out, provider.NewError(provider.CodeInvalidArgument, op, t.DisplayPath, nil,
			"the content is not valid UTF-8; only text can be written")
	}
	p, unlock, err := fs.lockAndProbe(ctx, op, t)
	if err != nil {
		return out, err
	}
	defer unlock()
	defer p.close()
	if err := fs.checkWriteIntent(p, expected); err != nil {
		return out, err
	}
	spec := publishSpec{noReplace: expected != nil && expected.Kind == provider.CreateIfAbsent}
	lf := eol.ToLF(content)
	out.Operation, out.After = provider.OpCreate, lf
	stored := content
	if p.exists {
		out.Operation = provider.OpUpdate
		spec.like = &p.st
		data, crlf, err := p.readBasis(ctx, fs.maxBasis)
		if err != nil {
			return provider.WriteOutcome{}, err
		}
		if int64(len(content)) <= fs.maxBasis {
			out.Before = basis(data, fs.maxBasis)
		}
		if crlf {
			stored = eol.ToCRLF(lf)
		}
	}
	spec.data = stored
	pub, err := fs.publish(ctx, p, spec)
	if err != nil {
		return provider.WriteOutcome{}, err
	}
	out.Version = pub.version
	return out, nil
}

// lockAndProbe checks ctx, takes the lock of t and probes it. The caller
// must call unlock and p.close.
func (fs *FS) lockAndProbe(ctx context.Context, op string, t provider.Target) (*probe, func(), error) {
	if err := checkCtx(ctx, op, t.DisplayPath); err != nil {
		return nil, nil, err
	}
	if _, err := fs.relOf(op, t); err != nil {
		return nil, nil, err
	}
	unlock, err := fs.locks.lock(ctx, t.Key)
	if err != nil {
		return nil, nil, aborted(op, t.DisplayPath, err)
	}
	p, err := fs.probeTarget(op, t)
	if err != nil {
		unlock()
		return nil, nil, err
	}
	return p, unlock, nil
}
