package local

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/beneath"
	"github.com/dshmount/dshmount/internal/provider"
)

// newFileMode is the mode of a created file, before the process umask.
const newFileMode = 0o644

// publishSpec describes one atomic publication.
type publishSpec struct {
	data string
	// like is the stat of the file whose mode and ownership the new file
	// takes; nil for a brand-new file (newFileMode, owner of the directory).
	like *unix.Stat_t
	// noReplace refuses (FS_NOT_OBSERVED) when the name exists at rename
	// time, however it got there.
	noReplace bool
	// ignoreCtx publishes even when the context ended after staging (a move
	// checks cancellation before staging only).
	ignoreCtx bool
}

// published is the result of a publication.
type published struct {
	st      unix.Stat_t
	version provider.Version
}

// publish stages spec.data in a temp file in the target's directory, fsyncs
// it, renames it over the target
// and fsyncs the directory. On any failure the temp file is removed and the
// old content is left intact.
func (fs *FS) publish(ctx context.Context, p *probe, spec publishSpec) (published, error) {
	var out published
	if err := checkCtx(ctx, p.op, p.disp); err != nil {
		return out, err
	}
	if p.dir == nil {
		dir, err := fs.fence.OpenDirAll(p.dirRel)
		if err != nil {
			return out, ioFailure(p.op, p.disp, err)
		}
		p.dir = dir
	}
	dirFD := int(p.dir.Fd())
	tmp, f, err := createTemp(dirFD, p.name, spec.like)
	if err != nil {
		return out, ioFailure(p.op, p.disp, pathErr("openat", tmpPath(p.dirRel, p.name), err))
	}
	staged := true
	defer func() {
		f.Close()
		if staged {
			_ = retryEINTR0(func() error { return unix.Unlinkat(dirFD, tmp, 0) })
		}
	}()
	if err := stageContent(f, spec, !fs.noSync); err != nil {
		return out, ioFailure(p.op, p.disp, err)
	}
	if fs.hooks.beforePublish != nil {
		fs.hooks.beforePublish(p.dir, p.name)
	}
	if !spec.ignoreCtx {
		if err := checkCtx(ctx, p.op, p.disp); err != nil {
			return out, err
		}
	}
	if err := renameInto(dirFD, tmp, p.name, spec.noReplace); err != nil {
		switch {
		case errors.Is(err, unix.EEXIST) || (spec.noReplace && errors.Is(err, unix.ENOTEMPTY)):
			return out, existsRefusal(p.op, p.disp, pathErr("renameat2", p.rel, err))
		case errors.Is(err, unix.EISDIR) || errors.Is(err, unix.ENOTEMPTY):
			return out, notRegular(p.op, p.disp, "directory")
		}
		return out, ioFailure(p.op, p.disp, pathErr("renameat", p.rel, err))
	}
	staged = false
	if err := fs.syncDir(p.dir); err != nil {
		return out, ioFailure(p.op, p.disp, pathErr("fsync", p.dirRel, err))
	}
	if out.st, err = fstat(f); err != nil {
		return out, ioFailure(p.op, p.disp, err)
	}
	out.version = fs.vers.Remember(&out.st, []byte(spec.data), time.Now())
	return out, nil
}

// tmpPath names a temp file for messages.
func tmpPath(dirRel, name string) string { return dirRel + "/." + name + ".tmp" }

// createTemp creates a fresh hidden temp file next to name in dirFD, with
// the mode and ownership of like (or the defaults of a new file).
func createTemp(dirFD int, name string, like *unix.Stat_t) (string, *os.File, error) {
	prefix := name
	if len(prefix) > 100 {
		prefix = prefix[:100]
	}
	prefix = strings.TrimLeft(prefix, ".")
	for tries := 0; ; tries++ {
		tmp := fmt.Sprintf(".%s.dsh-%016x.tmp", prefix, rand.Uint64())
		fd, err := retryEINTR(func() (int, error) {
			return unix.Openat(dirFD, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, newFileMode)
		})
		if errors.Is(err, unix.EEXIST) && tries < 16 {
			continue
		}
		if err != nil {
			return "", nil, err
		}
		f := os.NewFile(uintptr(fd), tmp)
		if err := adoptAttrs(fd, dirFD, like); err != nil {
			f.Close()
			_ = unix.Unlinkat(dirFD, tmp, 0)
			return "", nil, pathErr("fchmod", tmp, err)
		}
		return tmp, f, nil
	}
}

// adoptAttrs gives the temp file the permission bits of like (without
// set-user-ID and set-group-ID, which a write clears anyway) and, when the
// process may, the owner of like or, for a new file, of its directory.
func adoptAttrs(fd, dirFD int, like *unix.Stat_t) error {
	if like == nil {
		beneath.InheritOwner(fd, dirFD)
		return nil
	}
	if err := retryEINTR0(func() error { return unix.Fchmod(fd, like.Mode&0o1777) }); err != nil {
		return err
	}
	if int(like.Uid) != unix.Geteuid() || int(like.Gid) != unix.Getegid() {
		// Best effort: only a privileged daemon can give files away.
		_ = unix.Fchown(fd, int(like.Uid), int(like.Gid))
	}
	return nil
}

// stageContent writes the temp file and, with sync, fsyncs it.
func stageContent(f *os.File, spec publishSpec, sync bool) error {
	if _, err := f.WriteString(spec.data); err != nil {
		return err
	}
	if !sync {
		return nil
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return nil
}

// syncDir fsyncs a directory after a rename or unlink in it, unless
// Options.Durability says not to.
func (fs *FS) syncDir(dir *os.File) error {
	if fs.noSync {
		return nil
	}
	return retryEINTR0(dir.Sync)
}

// renameInto moves tmp over name inside one directory. With noReplace it
// fails with EEXIST when name exists: renameat2(RENAME_NOREPLACE), or
// link+unlink on file systems without it.
func renameInto(dirFD int, tmp, name string, noReplace bool) error {
	if !noReplace {
		return retryEINTR0(func() error { return unix.Renameat(dirFD, tmp, dirFD, name) })
	}
	err := retryEINTR0(func() error { return unix.Renameat2(dirFD, tmp, dirFD, name, unix.RENAME_NOREPLACE) })
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) {
		return err
	}
	return linkNoReplace(dirFD, tmp, name)
}

// linkNoReplace publishes tmp as name with link+unlink, which fails with
// EEXIST when name exists: the no-replace fallback.
func linkNoReplace(dirFD int, tmp, name string) error {
	if err := retryEINTR0(func() error { return unix.Linkat(dirFD, tmp, dirFD, name, 0) }); err != nil {
		return err
	}
	return retryEINTR0(func() error { return unix.Unlinkat(dirFD, tmp, 0) })
}
