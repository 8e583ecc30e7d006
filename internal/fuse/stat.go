package fuse

import (
	"errors"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// statMask is what every backing stat asks for: the basic fields plus the
// birth time, which tells a recycled inode number from the old file.
const statMask = unix.STATX_BASIC_STATS | unix.STATX_BTIME

// backingStat is one stat of a backing file.
type backingStat struct {
	st    unix.Stat_t
	btime uint64 // birth time in ns since the epoch, 0 when unknown
	ident uint64 // non-zero: the inode number the mount shows instead (backend.carried)
}

// statAt stats path relative to dirfd (AT_FDCWD for absolute paths) without
// following a final symbolic link unless follow is set.
func statAt(dirfd int, path string, follow bool) (backingStat, error) {
	flags := unix.AT_SYMLINK_NOFOLLOW
	if follow {
		flags = 0
	}
	return statx(dirfd, path, flags)
}

// fstat stats an open file descriptor.
func fstat(fd int) (backingStat, error) {
	return statx(fd, "", unix.AT_EMPTY_PATH)
}

// statx runs statx(2), falling back to fstatat(2) where statx is refused.
func statx(dirfd int, path string, flags int) (backingStat, error) {
	var x unix.Statx_t
	err := unix.Statx(dirfd, path, flags, statMask, &x)
	if errors.Is(err, unix.ENOSYS) {
		var bs backingStat
		return bs, unix.Fstatat(dirfd, path, &bs.st, flags)
	}
	if err != nil {
		return backingStat{}, err
	}
	return statxBacking(&x), nil
}

// statxBacking converts a statx(2) answer (a value: a stat per request
// allocates nothing).
func statxBacking(x *unix.Statx_t) backingStat {
	var bs backingStat
	st := &bs.st
	st.Dev = unix.Mkdev(x.Dev_major, x.Dev_minor)
	st.Ino = x.Ino
	st.Nlink = uint64(x.Nlink)
	st.Mode = uint32(x.Mode)
	st.Uid = x.Uid
	st.Gid = x.Gid
	st.Rdev = unix.Mkdev(x.Rdev_major, x.Rdev_minor)
	st.Size = int64(x.Size)
	st.Blksize = int64(x.Blksize)
	st.Blocks = int64(x.Blocks)
	st.Atim = unix.Timespec{Sec: x.Atime.Sec, Nsec: int64(x.Atime.Nsec)}
	st.Mtim = unix.Timespec{Sec: x.Mtime.Sec, Nsec: int64(x.Mtime.Nsec)}
	st.Ctim = unix.Timespec{Sec: x.Ctime.Sec, Nsec: int64(x.Ctime.Nsec)}
	if x.Mask&unix.STATX_BTIME != 0 {
		bs.btime = uint64(x.Btime.Sec)*1e9 + uint64(x.Btime.Nsec)
	}
	return bs
}

// sameData reports whether two stats of one file show no change of its
// data: same identity, size and modification time.
func sameData(a, b *unix.Stat_t) bool {
	return a.Dev == b.Dev && a.Ino == b.Ino && a.Size == b.Size && a.Mtim == b.Mtim
}

// fillAttr copies a backing stat into a FUSE attribute block.
func fillAttr(out *gofuse.Attr, st *unix.Stat_t) {
	out.Ino = st.Ino
	out.Size = uint64(st.Size)
	out.Blocks = uint64(st.Blocks)
	out.Blksize = uint32(st.Blksize)
	out.Atime = uint64(st.Atim.Sec)
	out.Atimensec = uint32(st.Atim.Nsec)
	out.Mtime = uint64(st.Mtim.Sec)
	out.Mtimensec = uint32(st.Mtim.Nsec)
	out.Ctime = uint64(st.Ctim.Sec)
	out.Ctimensec = uint32(st.Ctim.Nsec)
	out.Mode = st.Mode
	out.Nlink = uint32(st.Nlink)
	out.Uid = st.Uid
	out.Gid = st.Gid
	out.Rdev = uint32(st.Rdev)
}
