package branch

import (
	"context"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/provider"
)

// This file holds the byte-level operations a FUSE mount of the branch
// needs: it reads and changes the files of UpperDir itself (with the same
// no-link resolution as for the workspace) and reports each change of a
// path's state here, so the records stay the one truth the commit reads.
// A mount never writes below a path the branch does not own: it calls
// CopyUp (or CreateFile, Mkdir, Symlink) first.
//
// Limits: a hard link inside a branch is refused (a record describes one
// path, not an inode shared by two), and so is renaming a directory the
// workspace has (the records are keyed by path: every file below would
// have to be copied up) or renaming a directory over an existing one; a
// mount answers EXDEV, on which mv falls back to a copy and a removal. A
// directory the branch made moves to a free name. The permission bits
// and times of a workspace directory cannot change in a branch, and no
// special file (FIFO, socket, device) can be made in one.

// Where tells a mount where a path of the branch lives.
type Where int

const (
	// InWorkspace: the workspace decides (the path may be absent there).
	InWorkspace Where = iota
	// InBranch: the branch's own file, directory or symbolic link, at
	// the same relative path below UpperDir.
	InBranch
	// Absent: deleted in the branch, or below a path the branch deleted
	// or replaced.
	Absent
)

// Errors of the mount operations; a mount maps them to errnos.
var (
	// ErrExists: the path exists in the branch.
	ErrExists = errors.New("already exists in the branch")
	// ErrCrossRename: a directory cannot be renamed in a branch.
	ErrCrossRename = errors.New("a directory cannot be renamed in a branch; copy it, then remove the old one")
	// ErrNotSupported: the change has no record in a branch (the mode or
	// times of a workspace directory, a special file).
	ErrNotSupported = errors.New("not supported in a branch")
)

// UpperDir returns the host directory of the branch's own entries: a path
// Locate reports InBranch lives at the same relative path below it.
func (b *Branch) UpperDir() string { return filepath.Join(b.dir, "upper") }

// TargetForRel returns the branch target of a clean workspace-relative
// path (key "branch/NAME/rel", display path rel).
func (b *Branch) TargetForRel(rel string) provider.Target { return b.target(rel) }

// Locate tells where rel lives now ("." is the workspace root).
func (b *Branch) Locate(rel string) Where {
	if rel == "" || rel == "." {
		return InWorkspace
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	switch b.locate(rel) {
	case inLower:
		return InWorkspace
	case inUpper, inDir, inLink:
		return InBranch
	}
	return Absent
}

// DirChanges is what the branch changed among a directory's children.
type DirChanges struct {
	// Opaque: the workspace's children do not show (a directory the
	// branch made, over nothing or over a deleted one).
	Opaque bool
	// Names maps each child the branch changed to whether it exists in
	// the branch (its own entry below UpperDir) or was deleted.
	Names map[string]bool
}

// DirChanges returns what the branch changed among the children of the
// directory rel, for a listing merged with the workspace's.
func (b *Branch) DirChanges(rel string) (DirChanges, error) {
	rel = path.Clean(rel)
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.usable("list", rel); err != nil {
		return DirChanges{}, err
	}
	out := DirChanges{Names: map[string]bool{}}
	if rel != "." {
		switch b.locate(rel) {
		case inNowhere:
			return DirChanges{}, b.notFound("list", rel)
		case inUpper, inLink:
			return DirChanges{}, provider.NewError(provider.CodeNotDirectory, "list", rel, nil, "%s is not a directory", rel)
		case inDir:
			out.Opaque = true
		}
	}
	for p, e := range b.entries {
		if p == rel || path.Dir(p) != rel {
			continue
		}
		out.Names[path.Base(p)] = e.Kind != kindDeleted
	}
	return out, nil
}

// CopyUp makes the regular file rel the branch's own, so a mount can
// change it in place below UpperDir: the workspace's bytes are copied
// (streamed, not read into memory) with its mode, owner and times, unless
// withContent is false (an open that truncates), and its copy-up base is
// recorded. A file the branch owns already is left alone; a path the
// branch does not have is FS_NOT_FOUND.
func (b *Branch) CopyUp(ctx context.Context, rel string, withContent bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable("copy-up", rel); err != nil {
		return err
	}
	return b.copyUpLocked(ctx, rel, withContent)
}

// copyUpLocked is CopyUp; b.mu is held for writing.
func (b *Branch) copyUpLocked(ctx context.Context, rel string, withContent bool) error {
	switch b.locate(rel) {
	case inUpper:
		b.setVersion(rel, "") // the mount changes it from now on
		return nil
	case inLower:
	case inDir, inLink:
		return provider.NewError(provider.CodeNotRegularFile, "copy-up", rel, nil, "%s is not a regular file", rel)
	default:
		return b.notFound("copy-up", rel)
	}
	parents, err := b.parentRecords(ctx, "copy-up", rel)
	if err != nil {
		return err
	}
	host := b.lower.ProcessPath(b.lower.TargetForRel(rel))
	src, err := os.OpenFile(host, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return b.notFound("copy-up", rel)
		}
		return provider.NewError(provider.CodeIOError, "copy-up", rel, err, "open %s to copy it into branch %s: %v", rel, b.name, err)
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return provider.NewError(provider.CodeIOError, "copy-up", rel, err, "stat %s: %v", rel, err)
	}
	if !st.Mode().IsRegular() {
		return provider.NewError(provider.CodeNotRegularFile, "copy-up", rel, nil, "%s is a %s, not a regular file", rel, st.Mode().Type())
	}
	up := b.upperPath(rel)
	if err := os.MkdirAll(filepath.Dir(up), 0o755); err != nil {
		return provider.NewError(provider.CodeIOError, "copy-up", rel, err, "copy %s into branch %s: %v", rel, b.name, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(up), ".tmp-")
	if err != nil {
		return provider.NewError(provider.CodeIOError, "copy-up", rel, err, "copy %s into branch %s: %v", rel, b.name, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	defer tmp.Close()
	if withContent {
		if _, err := io.Copy(tmp, src); err != nil {
			return provider.NewError(provider.CodeIOError, "copy-up", rel, err, "copy %s into branch %s: %v", rel, b.name, err)
		}
	}
	// The base is the version of the bytes the branch starts from: those
	// just copied, hashed from the copy; without content, the workspace's
	// (its digest cache knows it, or it is hashed now).
	var base provider.Version
	if withContent {
		if base, _, err = b.upper.Versioner().Fresh(int(tmp.Fd())); err != nil {
			return provider.NewError(provider.CodeIOError, "copy-up", rel, err, "hash the copy of %s: %v", rel, err)
		}
	} else {
		info, err := b.lower.Stat(ctx, b.lower.TargetForRel(rel))
		if err != nil {
			return err
		}
		if info == nil {
			return b.notFound("copy-up", rel)
		}
		base = info.Version
	}
	if sys, ok := st.Sys().(*unix.Stat_t); ok {
		_ = tmp.Chown(int(sys.Uid), int(sys.Gid)) // refused unless the daemon runs as root
		ts := []unix.Timespec{sys.Atim, sys.Mtim}
		_ = unix.UtimesNanoAt(unix.AT_FDCWD, tmp.Name(), ts, 0)
	}
	if err := tmp.Chmod(modeBits(st.Mode())); err != nil { // set-id bits too: the mount's writes drop them as the disk would
		return provider.NewError(provider.CodeIOError, "copy-up", rel, err, "copy %s into branch %s: %v", rel, b.name, err)
	}
	// The base copy, for branch.diff: the bytes just copied, or (an open
	// that truncates) the workspace's, kept only if still its base.
	baseSrc, baseSize, want := tmp, st.Size(), provider.Version("")
	if !withContent {
		baseSrc, want = src, base
	}
	undoBase, err := b.keepBaseFile("copy-up", rel, baseSrc, baseSize, st.Mode(), want)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), up); err != nil {
		undoBase()
		return provider.NewError(provider.CodeIOError, "copy-up", rel, err, "copy %s into branch %s: %v", rel, b.name, err)
	}
	if err := b.record(append(parents, &entry{Path: rel, Kind: kindFile, Base: base})...); err != nil {
		_ = os.Remove(up)
		undoBase()
		return err
	}
	b.setVersion(rel, "")
	return nil
}

// CreateFile makes the new regular file rel in the branch: the branch's
// parent directories of rel are made below UpperDir, then create makes the
// file there (the mount's exclusive open), then the file is recorded. A
// path the branch has is ErrExists.
func (b *Branch) CreateFile(ctx context.Context, rel string, create func() error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable("create", rel); err != nil {
		return err
	}
	parents, base, err := b.newPath(ctx, "create", rel)
	if provider.CodeOf(err) == provider.CodeNotObserved {
		return ErrExists
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(b.upperPath(rel)), 0o755); err != nil {
		return provider.NewError(provider.CodeIOError, "create", rel, err, "make the directories of %s in branch %s: %v", rel, b.name, err)
	}
	if err := create(); err != nil {
		return err
	}
	if err := b.record(append(parents, &entry{Path: rel, Kind: kindFile, Base: base})...); err != nil {
		_ = os.Remove(b.upperPath(rel))
		return err
	}
	b.setVersion(rel, "")
	return nil
}

// Prepare makes sure the parent directories of a path the branch is about
// to make exist below UpperDir (a mount's lookup of an absent name needs a
// directory to look in); it records nothing.
func (b *Branch) Prepare(rel string) error {
	if err := os.MkdirAll(filepath.Dir(b.upperPath(rel)), 0o755); err != nil {
		return provider.NewError(provider.CodeIOError, "prepare", rel, err, "make the directories of %s in branch %s: %v", rel, b.name, err)
	}
	return nil
}

// Touched forgets the cached version of rel's own file: a mount changed
// its bytes (the commit hashes it again).
func (b *Branch) Touched(rel string) { b.setVersion(rel, "") }

// Remove deletes the non-directory rel (a file, a symbolic link, anything
// the workspace holds there) from the branch: a whiteout.
func (b *Branch) Remove(ctx context.Context, rel string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable("unlink", rel); err != nil {
		return err
	}
	base, err := b.removeLocked(ctx, rel)
	if err != nil {
		return err
	}
	return b.record(&entry{Path: rel, Kind: kindDeleted, Base: base})
}

// removeLocked removes rel's own entry from UpperDir and returns the base
// its whiteout keeps; b.mu is held for writing.
func (b *Branch) removeLocked(ctx context.Context, rel string) (provider.Version, error) {
	switch b.locate(rel) {
	case inUpper, inLink:
		if err := os.Remove(b.upperPath(rel)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", provider.NewError(provider.CodeIOError, "unlink", rel, err, "remove %s from branch %s: %v", rel, b.name, err)
		}
		b.setVersion(rel, "")
		return b.entries[rel].Base, nil
	case inLower:
		base, err := b.lowerState(ctx, rel)
		if err != nil {
			return "", err
		}
		switch base {
		case BaseAbsent:
			return "", b.notFound("unlink", rel)
		case BaseDir:
			return "", provider.NewError(provider.CodeNotRegularFile, "unlink", rel, nil, "%s is a directory", rel)
		}
		if _, err := b.keepBaseFromWorkspace("unlink", rel, base); err != nil {
			return "", err
		}
		return base, nil
	case inDir:
		return "", provider.NewError(provider.CodeNotRegularFile, "unlink", rel, nil, "%s is a directory", rel)
	}
	return "", b.notFound("unlink", rel)
}

// Rename moves the file or symbolic link src to dst in the branch,
// replacing what dst holds unless it is a directory; with noReplace an
// existing dst is ErrExists. A workspace file is copied up first (so the
// bytes move with their identity). A directory the branch made moves to a
// name that holds nothing (renameDirLocked); any other directory is
// ErrCrossRename. The destination remembers its source for branch.diff
// when the source is a workspace file.
func (b *Branch) Rename(ctx context.Context, src, dst string, noReplace bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable("rename", src); err != nil {
		return err
	}
	if src == dst {
		return nil
	}
	// What moves: an own file (copied up first), or a link.
	link, isLink := "", false
	switch b.locate(src) {
	case inUpper:
	case inLink:
		link, isLink = b.entries[src].Link, true
	case inDir:
		return b.renameDirLocked(ctx, src, dst)
	case inLower:
		host := b.lower.ProcessPath(b.lower.TargetForRel(src))
		st, err := os.Lstat(host)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return b.notFound("rename", src)
		case err != nil:
			return provider.NewError(provider.CodeIOError, "rename", src, err, "stat %s: %v", src, err)
		case st.IsDir():
			return ErrCrossRename
		case st.Mode()&os.ModeSymlink != 0:
			if link, err = os.Readlink(host); err != nil {
				return provider.NewError(provider.CodeIOError, "rename", src, err, "read the link %s: %v", src, err)
			}
			isLink = true
		case !st.Mode().IsRegular():
			return ErrNotSupported
		default:
			if err := b.copyUpLocked(ctx, src, true); err != nil {
				return err
			}
		}
	default:
		return b.notFound("rename", src)
	}
	// What dst was: its base (kept by an own entry's record anyway).
	var dstBase provider.Version
	e, own := lookup(b.entries, dst)
	switch {
	case own && e.Kind == kindDir:
		return provider.NewError(provider.CodeNotRegularFile, "rename", dst, nil, "%s is a directory", dst)
	case own && e.Kind == kindDeleted:
		dstBase = e.Base
	case own:
		if noReplace {
			return ErrExists
		}
		dstBase = e.Base
	case e != nil:
		dstBase = BaseAbsent
		if v, ok := e.Manifest[dst]; ok {
			dstBase = v
		}
	default:
		v, err := b.lowerState(ctx, dst)
		if err != nil {
			return err
		}
		switch {
		case v == BaseDir:
			return provider.NewError(provider.CodeNotRegularFile, "rename", dst, nil, "%s is a directory", dst)
		case v != BaseAbsent && noReplace:
			return ErrExists
		}
		dstBase = v
		// The workspace file replaced (an editor's save): its bytes are
		// the base copy branch.diff shows the change against.
		if _, err := b.keepBaseFromWorkspace("rename", dst, v); err != nil {
			return err
		}
	}
	parents, err := b.parentRecords(ctx, "rename", dst)
	if err != nil {
		return err
	}
	srcBase := BaseAbsent
	if se, ok := b.entries[src]; ok {
		srcBase = se.Base
	} else if isLink {
		srcBase = linkVersion(link)
	}
	up := b.upperPath(dst)
	if err := os.MkdirAll(filepath.Dir(up), 0o755); err != nil {
		return provider.NewError(provider.CodeIOError, "rename", dst, err, "make the directories of %s in branch %s: %v", dst, b.name, err)
	}
	moved := &entry{Path: dst, Kind: kindFile, Base: dstBase}
	if isLink {
		moved = &entry{Path: dst, Kind: kindSymlink, Base: dstBase, Link: link}
		_ = os.Remove(up)
		if _, own := b.entries[src]; own {
			err = os.Rename(b.upperPath(src), up)
		} else {
			err = os.Symlink(link, up)
		}
	} else {
		err = os.Rename(b.upperPath(src), up)
		if srcBase != BaseAbsent && srcBase != BaseDir {
			moved.From = src
		}
	}
	if err != nil {
		return provider.NewError(provider.CodeIOError, "rename", src, err, "rename %s to %s in branch %s: %v", src, dst, b.name, err)
	}
	b.setVersion(src, "")
	b.setVersion(dst, "")
	records := append(parents, moved, &entry{Path: src, Kind: kindDeleted, Base: srcBase})
	return b.record(records...)
}

// renameDirLocked moves the directory src, which the branch made (so every
// path below it is one of its own entries), to dst, which must hold
// nothing: absent, or deleted in the branch (a directory there is
// ErrCrossRename, a file FS_NOT_DIRECTORY). The upper
// directory is renamed; the entries below src move below dst, each with
// the base its new path has (what the workspace holds there: absent, or
// the version a deleted directory's manifest remembers); src becomes a
// whiteout that keeps what the commit must still find or delete below it,
// as RemoveDir does. b.mu is held for writing.
func (b *Branch) renameDirLocked(ctx context.Context, src, dst string) error {
	if isBelow(dst, src) {
		return provider.NewError(provider.CodeInvalidArgument, "rename", dst, nil, "%s cannot move below itself", src)
	}
	// What dst holds now: nothing, or a whiteout (whose base and manifest
	// the new directory takes over, as Mkdir does).
	var dstBase provider.Version = BaseAbsent
	var dstManifest map[string]provider.Version
	e, own := lookup(b.entries, dst)
	switch {
	case own && e.Kind == kindDeleted:
		dstBase, dstManifest = e.Base, e.Manifest
	case own && e.Kind == kindDir:
		return ErrCrossRename
	case own:
		return provider.NewError(provider.CodeNotDirectory, "rename", dst, nil, "%s is not a directory", dst)
	case e != nil:
		if v, ok := e.Manifest[dst]; ok {
			dstBase = v
		}
	default:
		v, err := b.lowerState(ctx, dst)
		if err != nil {
			return err
		}
		switch v {
		case BaseAbsent:
		case BaseDir:
			return ErrCrossRename
		default:
			return provider.NewError(provider.CodeNotDirectory, "rename", dst, nil, "%s is not a directory", dst)
		}
	}
	parents, err := b.parentRecords(ctx, "rename", dst)
	if err != nil {
		return err
	}
	// The subtree, parents first.
	var moving []string
	for p := range b.entries {
		if p == src || isBelow(p, src) {
			moving = append(moving, p)
		}
	}
	sort.Strings(moving)
	// src's whiteout keeps every base below it (RemoveDir's manifest).
	srcEntry := b.entries[src]
	manifest := map[string]provider.Version{}
	for k, v := range srcEntry.Manifest {
		manifest[k] = v
	}
	for _, p := range moving[1:] {
		me := b.entries[p]
		if me.Kind != kindDir && me.Base != BaseAbsent && me.Base != BaseDir {
			manifest[p] = me.Base
		}
		for k, v := range me.Manifest {
			manifest[k] = v
		}
	}
	if srcEntry.Base == BaseAbsent {
		if err := b.walkLower(ctx, src, manifest); err != nil {
			return err
		}
	}
	up := b.upperPath(dst)
	if err := os.MkdirAll(filepath.Dir(up), 0o755); err != nil {
		return provider.NewError(provider.CodeIOError, "rename", dst, err, "make the directories of %s in branch %s: %v", dst, b.name, err)
	}
	if err := os.Rename(b.upperPath(src), up); err != nil {
		return provider.NewError(provider.CodeIOError, "rename", src, err, "rename %s to %s in branch %s: %v", src, dst, b.name, err)
	}
	records := append(parents, &entry{Path: dst, Kind: kindDir, Base: dstBase, Mode: srcEntry.Mode, Manifest: dstManifest})
	for _, p := range moving[1:] {
		me := b.entries[p]
		if me.Kind == kindDeleted {
			continue // below an opaque directory a whiteout hides nothing
		}
		np := dst + strings.TrimPrefix(p, src)
		base := BaseAbsent
		if v, ok := dstManifest[np]; ok {
			base = v
		}
		moved := &entry{Path: np, Kind: me.Kind, Base: base, Link: me.Link, Mode: me.Mode, From: me.From}
		if me.Kind == kindFile && me.Base != BaseAbsent && me.Base != BaseDir {
			moved.From = p
		}
		records = append(records, moved)
	}
	for _, p := range moving[1:] {
		records = append(records, &entry{Path: p})
	}
	records = append(records, &entry{Path: src, Kind: kindDeleted, Base: srcEntry.Base, Manifest: manifest})
	for _, p := range moving {
		b.setVersion(p, "")
	}
	return b.record(records...)
}
