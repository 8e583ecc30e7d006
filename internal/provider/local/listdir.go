package local

import (
	"context"
	"errors"
	"os"
	"path"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/provider"
)

// ListDir lists the direct children of the directory t in name order, with
// metadata only. A symbolic link child is reported as its resolved target;
// a broken, escaping or vanished child is TypeOther without metadata.
func (fs *FS) ListDir(ctx context.Context, t provider.Target) ([]provider.DirEntry, error) {
	const op = "list"
	if err := checkCtx(ctx, op, t.DisplayPath); err != nil {
		return nil, err
	}
	rel, err := fs.relOf(op, t)
	if err != nil {
		return nil, err
	}
	dir, err := fs.fence.OpenFile(rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, unix.ENOTDIR) {
			return nil, provider.NewError(provider.CodeNotDirectory, op, t.DisplayPath, err,
				"the target is not a directory; read it as a file instead")
		}
		if errors.Is(err, unix.ENOENT) {
			return nil, provider.NewError(provider.CodeNotFound, op, t.DisplayPath, err,
				"the directory does not exist; check the path")
		}
		return nil, ioFailure(op, t.DisplayPath, err)
	}
	defer dir.Close()
	children, err := dir.ReadDir(-1)
	if err != nil {
		return nil, ioFailure(op, t.DisplayPath, err)
	}
	sort.Slice(children, func(i, j int) bool { return children[i].Name() < children[j].Name() })
	out := make([]provider.DirEntry, 0, len(children))
	for _, c := range children {
		if err := checkCtx(ctx, op, t.DisplayPath); err != nil {
			return nil, err
		}
		e, err := fs.dirEntry(int(dir.Fd()), rel, c)
		if err != nil {
			return nil, ioFailure(op, t.DisplayPath, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// dirEntry describes one child of the directory dirRel (open as dirFD).
func (fs *FS) dirEntry(dirFD int, dirRel string, c os.DirEntry) (provider.DirEntry, error) {
	name := c.Name()
	childRel := path.Join(dirRel, name)
	e := provider.DirEntry{Name: name, Type: provider.TypeOther, Target: fs.TargetForRel(childRel)}
	var st unix.Stat_t
	err := retryEINTR0(func() error { return unix.Fstatat(dirFD, name, &st, unix.AT_SYMLINK_NOFOLLOW) })
	if errors.Is(err, unix.ENOENT) {
		return e, nil // vanished since the listing
	}
	if err != nil {
		return e, pathErr("fstatat", childRel, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		resolved, err := fs.walk("list", childRel, components(childRel), true)
		if err != nil {
			if provider.CodeOf(err) == provider.CodePermissionDenied {
				return e, err
			}
			return e, nil // escaping, looping or dangling link: listed, never followed
		}
		lst, ok, err := fs.fence.StatTarget(resolved)
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			return e, err
		}
		if err != nil || !ok {
			return e, nil // broken link
		}
		e.Target, st = fs.TargetForRel(resolved), lst
	}
	e.Type = typeOf(st.Mode)
	e.Version = fs.listedVersion(dirFD, name, &st)
	e.Size = sizeOf(&st)
	return e, nil
}
