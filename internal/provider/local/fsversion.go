package local

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/internal/provider/version"
)

// listHashLimit is the largest file fs.list hashes when its cached digest
// is not trusted; a larger one is listed without a version (fs.stat of it
// reads its bytes).
const listHashLimit = 64 << 10

// probeVersion is the version of a probed target as a guard must see it:
// the digest of its bytes on disk now (never the cache), or the metadata
// version of a target that cannot be read.
func (fs *FS) probeVersion(p *probe) (provider.Version, error) {
	if p.file == nil {
		return version.OfMetadata(&p.st), nil
	}
	ver, _, err := fs.vers.Fresh(int(p.file.Fd()))
	if err != nil {
		return "", ioFailure(p.op, p.disp, pathErr("read", p.rel, err))
	}
	return ver, nil
}

// versionAtRel is the version of rel, whose stat is st, for stat calls: the
// trusted cached digest, else a fresh hash of its bytes. follow says whether
// a final symbolic link was followed to get st. A file that cannot be read
// gets its metadata version.
func (fs *FS) versionAtRel(rel string, st *unix.Stat_t, follow bool) (provider.Version, error) {
	if ver, ok := fs.vers.Cached(st); ok {
		return ver, nil
	}
	flags := unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY
	if !follow {
		flags |= unix.O_NOFOLLOW
	}
	fd, err := fs.fence.Open(rel, flags, 0)
	if err != nil {
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOENT) ||
			errors.Is(err, unix.ELOOP) {
			return version.OfMetadata(st), nil
		}
		return "", err
	}
	defer unix.Close(fd)
	ver, _, err := fs.vers.Fresh(fd)
	return ver, err
}

// listedVersion is the version fs.list reports for the entry name of dirFD
// (st: its stat, of the link's target for a symbolic link): the trusted
// cached digest, a fresh one for a small file, else empty (unknown).
func (fs *FS) listedVersion(dirFD int, name string, st *unix.Stat_t) provider.Version {
	if ver, ok := fs.vers.Cached(st); ok {
		return ver
	}
	if st.Size > listHashLimit {
		return ""
	}
	fd, err := retryEINTR(func() (int, error) {
		return unix.Openat(dirFD, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return ""
	}
	defer unix.Close(fd)
	ver, got, err := fs.vers.Fresh(fd)
	if err != nil || version.FileIDOf(&got) != version.FileIDOf(st) {
		return ""
	}
	return ver
}
