package local

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/provider"
)

// VersionOf is the one version formula of the local backend, shared with the
// FUSE layer: a 64-bit FNV-1a hash of dev, ino, size, mtime ns, ctime ns and
// mode, plus the generation gen, rendered "v1-<16 hex digits>". Any change of
// those fields (an out-of-band write, a replacement inode) or of the
// generation (every provider mutation bumps it) gives another version.
func VersionOf(st *unix.Stat_t, gen uint64) provider.Version {
	var buf [8 * 8]byte
	fields := [...]uint64{
		uint64(st.Dev),
		st.Ino,
		uint64(st.Size),
		uint64(st.Mtim.Sec)*1e9 + uint64(st.Mtim.Nsec),
		uint64(st.Ctim.Sec)*1e9 + uint64(st.Ctim.Nsec),
		uint64(st.Mode),
		gen,
	}
	for i, f := range fields {
		binary.LittleEndian.PutUint64(buf[8*i:], f)
	}
	h := fnv.New64a()
	h.Write(buf[:8*len(fields)])
	return provider.Version(fmt.Sprintf("v1-%016x", h.Sum64()))
}

// FileIDOf returns the storage identity (device, inode) of st.
func FileIDOf(st *unix.Stat_t) provider.FileID {
	return provider.FileID{Dev: uint64(st.Dev), Ino: st.Ino}
}

// versionOf is VersionOf with the current generation of st's identity.
func (fs *FS) versionOf(st *unix.Stat_t) provider.Version {
	return VersionOf(st, fs.gens.Current(FileIDOf(st)))
}

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

// BumpIfLinked advances the generation of an identity that just lost one
// name, but only while other hard links keep it alive (they must get a new
// version). Once the last name is gone, its inode number may already belong
// to a file published meanwhile, whose fresh version a bump would make
// stale. The provider's delete and the FUSE layer's unlink and rename-over
// share this rule.
func BumpIfLinked(gens provider.Generations, st *unix.Stat_t) {
	if st.Nlink > 1 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		gens.Bump(FileIDOf(st))
	}
}
