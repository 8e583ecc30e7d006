package local

import (
	"context"
	"strings"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/eol"
	"github.com/dshmount/dshmount/patch"
)

// EditText atomically replaces the literal edit.OldString by edit.NewString
// in the LF-normalized text of t. The guard is checked before the match, so
// an edit of changed content is FS_STALE_VERSION rather than a failed match;
// a missing target is FS_STALE_VERSION guarded or not. No match is
// FS_EDIT_NOT_FOUND, several without ReplaceAll FS_AMBIGUOUS_EDIT.
func (fs *FS) EditText(ctx context.Context, t provider.Target, edit provider.EditRequest, expected *provider.VersionGuard) (provider.EditOutcome, error) {
	const op = "edit"
	if edit.OldString == "" {
		return provider.EditOutcome{}, provider.NewError(provider.CodeEditNotFound, op, t.DisplayPath, nil,
			"the text to replace is empty; pass the exact existing text to replace")
	}
	oldLF, newLF := eol.ToLF(edit.OldString), eol.ToLF(edit.NewString)
	return fs.rewrite(ctx, op, t, expected, func(lf string) (string, error) {
		n := strings.Count(lf, oldLF)
		switch {
		case n == 0:
			return "", provider.NewError(provider.CodeEditNotFound, op, t.DisplayPath, nil,
				"the text to replace was not found; read the file again and copy the exact text")
		case n > 1 && !edit.ReplaceAll:
			return "", provider.NewError(provider.CodeAmbiguousEdit, op, t.DisplayPath, nil,
				"the text to replace occurs %d times; add surrounding lines to make it unique, or replace all", n)
		case edit.ReplaceAll:
			return strings.ReplaceAll(lf, oldLF, newLF), nil
		}
		return strings.Replace(lf, oldLF, newLF, 1), nil
	})
}

// PatchText atomically applies hunks to the LF-normalized text of t, in the
// same critical section as EditText: guard first, then the hunks. A hunk
// that does not match is FS_PATCH_MISMATCH naming its patch line and stage.
func (fs *FS) PatchText(ctx context.Context, t provider.Target, hunks []patch.Hunk, expected *provider.VersionGuard) (provider.EditOutcome, error) {
	const op = "patch"
	return fs.rewrite(ctx, op, t, expected, func(lf string) (string, error) {
		return applyHunks(op, t.DisplayPath, lf, hunks)
	})
}

// applyHunks applies hunks to LF text, mapping a failure to FS_PATCH_MISMATCH.
func applyHunks(op, disp, lf string, hunks []patch.Hunk) (string, error) {
	after, failure := patch.ApplyHunks(lf, hunks)
	if failure != nil {
		return "", provider.NewError(provider.CodePatchMismatch, op, disp, failure,
			"the patch does not match the file: %s; read the file again and regenerate the patch", failure.Error())
	}
	return after, nil
}

// rewrite is the critical section of EditText and PatchText: lock, probe,
// guard, read and decode, transform the LF text, publish in the file's
// line-ending style and mode.
func (fs *FS) rewrite(ctx context.Context, op string, t provider.Target, expected *provider.VersionGuard, transform func(lf string) (string, error)) (provider.EditOutcome, error) {
	p, unlock, err := fs.lockAndProbe(ctx, op, t)
	if err != nil {
		return provider.EditOutcome{}, err
	}
	defer unlock()
	defer p.close()
	data, err := fs.readGuarded(ctx, p, expected)
	if err != nil {
		return provider.EditOutcome{}, err
	}
	if err := checkText(data, 0); err != nil {
		return provider.EditOutcome{}, notText(op, t.DisplayPath, err)
	}
	raw := ownedString(data)
	before := eol.ToLF(raw)
	after, err := transform(before)
	if err != nil {
		return provider.EditOutcome{}, err
	}
	pub, err := fs.publish(ctx, p, publishSpec{data: eol.Restore(after, eol.IsCRLF(data)), like: &p.st})
	if err != nil {
		return provider.EditOutcome{}, err
	}
	return provider.EditOutcome{Version: pub.version, Before: before, After: after}, nil
}

// readGuarded checks the source and its guard and reads its content; a
// readable guarded file is read once for both (readVersioned).
func (fs *FS) readGuarded(ctx context.Context, p *probe, expected *provider.VersionGuard) ([]byte, error) {
	if expected == nil || p.file == nil || !p.regular() {
		if err := fs.requireSource(p, expected); err != nil {
			return nil, err
		}
		return p.readAll(ctx)
	}
	data, now, err := fs.readVersioned(ctx, p)
	if err != nil {
		return nil, err
	}
	if now != expected.Version {
		return nil, staleChanged(p.op, p.disp, expected.Version, now)
	}
	return data, nil
}
