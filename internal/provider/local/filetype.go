package local

import (
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/provider"
)

// isRegular reports whether st is a regular file.
func isRegular(st *unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFREG }

// typeOf classifies a mode for Info and DirEntry.
func typeOf(mode uint32) provider.FileType {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return provider.TypeFile
	case unix.S_IFDIR:
		return provider.TypeDirectory
	}
	return provider.TypeOther
}

// pathTypeOf classifies a mode for PathInfo, which also knows symlinks.
func pathTypeOf(mode uint32) provider.FileType {
	if mode&unix.S_IFMT == unix.S_IFLNK {
		return provider.TypeSymlink
	}
	return typeOf(mode)
}

// kindOf names a mode for messages.
func kindOf(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFLNK:
		return "symbolic link"
	case unix.S_IFIFO:
		return "named pipe"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "device"
	}
	return "regular file"
}

// sizeOf is the size reported for st: the byte size of regular files only.
func sizeOf(st *unix.Stat_t) int64 {
	if st.Mode&unix.S_IFMT == unix.S_IFREG {
		return st.Size
	}
	return 0
}
