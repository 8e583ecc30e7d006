package branch

import (
	"context"
	"os"
	"path"

	"github.com/dshmount/dshmount/internal/provider"
)

// The operations below have no socket method; they are the branch's side
// of what a mount of it needs (directories, modes, symbolic links).

// lowerState is what the workspace holds at rel for a new entry's base:
// a version, a link's target, BaseDir or BaseAbsent; b.mu is held.
func (b *Branch) lowerState(ctx context.Context, rel string) (provider.Version, error) {
	host := b.lower.ProcessPath(b.lower.TargetForRel(rel))
	if st, err := os.Lstat(host); err == nil && st.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(host)
		if err != nil {
			return "", provider.NewError(provider.CodeIOError, "readlink", rel, err, "read the link %s: %v", rel, err)
		}
		return linkVersion(target), nil
	}
	info, err := b.lower.Stat(ctx, b.lower.TargetForRel(rel))
	switch {
	case err != nil:
		return "", err
	case info == nil:
		return BaseAbsent, nil
	case info.Type == provider.TypeDirectory:
		return BaseDir, nil
	}
	return info.Version, nil
}

// newPath checks that rel does not exist in the branch and returns the
// records of its parents and the base it starts from; b.mu is held.
func (b *Branch) newPath(ctx context.Context, op, rel string) ([]*entry, provider.Version, error) {
	if rel == "." || rel == "" || path.Clean(rel) != rel {
		return nil, "", provider.NewError(provider.CodeInvalidArgument, op, rel, nil, "%q is not a clean path below the workspace root", rel)
	}
	parents, err := b.parentRecords(ctx, op, rel)
	if err != nil {
		return nil, "", err
	}
	e, own := lookup(b.entries, rel)
	switch {
	case own && e.Kind == kindDeleted:
		return parents, e.Base, nil
	case own:
		return nil, "", provider.NewError(provider.CodeNotObserved, op, rel, nil, "%s already exists in branch %s", rel, b.name)
	case e != nil: // below a deleted or replaced path
		if v, ok := e.Manifest[rel]; ok {
			return parents, v, nil
		}
		return parents, BaseAbsent, nil
	}
	base, err := b.lowerState(ctx, rel)
	if err != nil {
		return nil, "", err
	}
	if base != BaseAbsent {
		return nil, "", provider.NewError(provider.CodeNotObserved, op, rel, nil, "%s already exists", rel)
	}
	return parents, base, nil
}

// Mkdir makes the directory rel in the branch with the permission bits
// mode (0: 0755). An existing path is FS_NOT_OBSERVED.
func (b *Branch) Mkdir(ctx context.Context, rel string, mode os.FileMode) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable("mkdir", rel); err != nil {
		return err
	}
	parents, base, err := b.newPath(ctx, "mkdir", rel)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(b.upperPath(rel), 0o755); err != nil {
		return provider.NewError(provider.CodeIOError, "mkdir", rel, err, "make %s in branch %s: %v", rel, b.name, err)
	}
	var manifest map[string]provider.Version
	if e, own := b.entries[rel]; own {
		manifest = e.Manifest
	}
	return b.record(append(parents, &entry{Path: rel, Kind: kindDir, Base: base, Mode: uint32(mode.Perm()), Manifest: manifest})...)
}

// Symlink makes rel a symbolic link to target in the branch. An existing
// path is FS_NOT_OBSERVED.
func (b *Branch) Symlink(ctx context.Context, target, rel string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable("symlink", rel); err != nil {
		return err
	}
	if target == "" {
		return provider.NewError(provider.CodeInvalidArgument, "symlink", rel, nil, "a symbolic link needs a target")
	}
	parents, base, err := b.newPath(ctx, "symlink", rel)
	if err != nil {
		return err
	}
	up := b.upperPath(rel)
	if err := os.MkdirAll(path.Dir(up), 0o755); err == nil {
		_ = os.Remove(up)
		err = os.Symlink(target, up)
		if err != nil {
			return provider.NewError(provider.CodeIOError, "symlink", rel, err, "make the link %s in branch %s: %v", rel, b.name, err)
		}
	}
	return b.record(append(parents, &entry{Path: rel, Kind: kindSymlink, Base: base, Link: target})...)
}

// Readlink returns the target of the symbolic link rel as the branch sees
// it.
func (b *Branch) Readlink(_ context.Context, rel string) (string, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.usable("readlink", rel); err != nil {
		return "", err
	}
	switch b.locate(rel) {
	case inLink:
		return b.entries[rel].Link, nil
	case inLower:
		target, err := os.Readlink(b.lower.ProcessPath(b.lower.TargetForRel(rel)))
		if err == nil {
			return target, nil
		}
	}
	return "", provider.NewError(provider.CodeInvalidArgument, "readlink", rel, nil, "%s is not a symbolic link in branch %s", rel, b.name)
}

// Chmod sets the permission bits of the file or branch-made directory
// rel; a workspace file is copied up first (its content stays, so the
// commit applies only the mode).
func (b *Branch) Chmod(ctx context.Context, rel string, mode os.FileMode) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable("chmod", rel); err != nil {
		return err
	}
	if b.locate(rel) == inDir {
		e := *b.entries[rel]
		e.Mode = uint32(mode.Perm())
		if err := os.Chmod(b.upperPath(rel), mode.Perm()); err != nil {
			return provider.NewError(provider.CodeIOError, "chmod", rel, err, "chmod %s in branch %s: %v", rel, b.name, err)
		}
		return b.record(&e)
	}
	if b.locate(rel) == inLower {
		if info, err := b.lower.Stat(ctx, b.lower.TargetForRel(rel)); err == nil && info != nil && info.Type == provider.TypeDirectory {
			return provider.NewError(provider.CodeInvalidArgument, "chmod", rel, nil,
				"changing the mode of a workspace directory in a branch is not supported yet")
		}
	}
	pending, undo, err := b.copyUp(ctx, "chmod", rel)
	if err != nil {
		return err
	}
	if b.locate(rel) == inLower && len(pending) > 0 && pending[len(pending)-1].Base == BaseAbsent {
		undo()
		return b.notFound("chmod", rel)
	}
	if err := os.Chmod(b.upperPath(rel), mode.Perm()); err != nil {
		undo()
		if os.IsNotExist(err) {
			return b.notFound("chmod", rel)
		}
		return provider.NewError(provider.CodeIOError, "chmod", rel, err, "chmod %s in branch %s: %v", rel, b.name, err)
	}
	return b.record(pending...)
}
