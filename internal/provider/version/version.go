// Package version owns the version tokens of files on a POSIX file system:
// "c1-" content versions (SHA-256 of the bytes), "m1-" metadata versions
// for what has no bytes to hash, the storage identity of a stat, and the
// Versioner with its stat-keyed digest cache. The local backend, the mount
// and the branches all name versions through it.
package version

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/provider"
)

// Version tokens.
//
// A regular file's version names its bytes: "c1-" followed by the hex
// SHA-256 of the content. Equal bytes give an equal token wherever and
// whenever they were written; any byte difference gives another one, also
// within one clock tick and for changes made outside the daemon. Times,
// mode, owner, extended attributes and the inode number do not enter it.
//
// Everything that is not a readable regular file (a directory, a symbolic
// link, a device, a file the daemon may not read) has no bytes to hash and
// gets a metadata version, "m1-" and 16 hex digits (OfMetadata).
const (
	contentPrefix  = "c1-"
	metadataPrefix = "m1-"
)

// hashBufferSize is the read size used while hashing a file.
const hashBufferSize = 256 << 10

// OfBytes is the content version of data.
func OfBytes(data []byte) provider.Version {
	sum := sha256.Sum256(data)
	return OfSum(sum[:])
}

// OfSum is the content version of bytes whose SHA-256 is sum.
func OfSum(sum []byte) provider.Version {
	return provider.Version(contentPrefix + hex.EncodeToString(sum))
}

// OfMetadata is the version of a stat without bytes the daemon can
// hash. A regular file it may not read gets a 64-bit FNV-1a of dev, ino,
// size, mtime and ctime (any write moves them); anything else (a directory,
// a symbolic link, a device, a pipe) gets one of dev, ino, type, rdev and
// size (and a symbolic link's ctime): its identity, which a chmod, chown or
// touch does not change.
func OfMetadata(st *unix.Stat_t) provider.Version {
	fields := []uint64{uint64(st.Dev), st.Ino, uint64(st.Size)}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		fields = append(fields, uint64(st.Mtim.Nano()), uint64(st.Ctim.Nano()))
	case unix.S_IFLNK:
		// A link is replaced, never changed: its ctime tells a new link
		// from an old one that got the same inode number back.
		fields = append(fields, uint64(st.Mode&unix.S_IFMT), uint64(st.Ctim.Nano()))
	default:
		fields = append(fields, uint64(st.Mode&unix.S_IFMT), uint64(st.Rdev))
	}
	buf := make([]byte, 0, 8*len(fields))
	for _, f := range fields {
		buf = binary.LittleEndian.AppendUint64(buf, f)
	}
	h := fnv.New64a()
	h.Write(buf)
	return provider.Version(fmt.Sprintf("%s%016x", metadataPrefix, h.Sum64()))
}

// FileIDOf returns the storage identity (device, inode) of st.
func FileIDOf(st *unix.Stat_t) provider.FileID {
	return provider.FileID{Dev: uint64(st.Dev), Ino: st.Ino}
}

// StatKeyOf returns the digest-cache key of st.
func StatKeyOf(st *unix.Stat_t) provider.StatKey {
	return provider.StatKey{
		Dev: uint64(st.Dev), Ino: st.Ino, Size: st.Size,
		MtimeNs: st.Mtim.Nano(), CtimeNs: st.Ctim.Nano(),
	}
}

// isRegular reports whether st is a regular file.
func isRegular(st *unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFREG }

// Racy windows of the digest cache (git's "racy clean" rule). A digest
// computed less than a window after the file's last change may have read
// bytes that a write in the same timestamp tick changed afterwards without
// moving the stat, so it is not trusted; the next call hashes again, and
// the entry becomes trusted once the hash was taken a window after the
// last change. Timestamps with whole seconds only (a file system with
// coarse times) get the wide window.
const (
	racyWindow       = 100 * time.Millisecond
	racyWindowCoarse = 2 * time.Second
)

// HashAttempts bounds the rehashes of a file that keeps changing while it
// is read.
const HashAttempts = 3

// Versioner computes content versions and keeps the stat-keyed digest
// cache. The decision path of a guard always calls Fresh (the bytes on disk
// now); Cached and Of serve stat, listings and the version attribute, where
// the stat cannot lie. It is safe for concurrent use.
type Versioner struct {
	cache provider.DigestCache
	now   func() time.Time
	bufs  sync.Pool
}

// NewVersioner returns a Versioner over cache (nil: an in-memory cache).
func NewVersioner(cache provider.DigestCache) *Versioner {
	if cache == nil {
		cache = provider.NewMemoryDigests()
	}
	v := &Versioner{cache: cache, now: time.Now}
	v.bufs.New = func() any { b := make([]byte, hashBufferSize); return &b }
	return v
}

// Cached returns the trusted cached version of st, if any. Files without
// bytes to hash always have one (their metadata version).
func (v *Versioner) Cached(st *unix.Stat_t) (provider.Version, bool) {
	if !isRegular(st) {
		return OfMetadata(st), true
	}
	d, ok := v.cache.Digest(FileIDOf(st))
	if !ok || d.Key != StatKeyOf(st) || !trusted(d, st) {
		return "", false
	}
	return d.Version, true
}

// trusted applies the racy-clean rule to a cache entry whose key matches st.
func trusted(d provider.CachedDigest, st *unix.Stat_t) bool {
	window := racyWindow
	if st.Mtim.Nsec == 0 && st.Ctim.Nsec == 0 {
		window = racyWindowCoarse
	}
	last := max(st.Mtim.Nano(), st.Ctim.Nano())
	return d.HashedAtNs-last > window.Nanoseconds()
}

// Of returns the version of the open file fd whose stat is st: the trusted
// cached one, else a fresh hash.
func (v *Versioner) Of(fd int, st *unix.Stat_t) (provider.Version, error) {
	if ver, ok := v.Cached(st); ok {
		return ver, nil
	}
	ver, _, err := v.Fresh(fd)
	return ver, err
}

// Fresh hashes the bytes of the open file fd now, whatever the cache says,
// and remembers the result. It also returns the stat the version belongs
// to. A file whose stat moved while it was read is read again (at most
// HashAttempts times); the last result is returned without being cached.
// A descriptor that is not a regular file gets its metadata version.
func (v *Versioner) Fresh(fd int) (provider.Version, unix.Stat_t, error) {
	var before, after unix.Stat_t
	if err := retryEINTR0(func() error { return unix.Fstat(fd, &before) }); err != nil {
		return "", before, fmt.Errorf("fstat: %w", err)
	}
	if !isRegular(&before) {
		return OfMetadata(&before), before, nil
	}
	for attempt := 1; ; attempt++ {
		start := v.now()
		ver, err := v.hash(fd)
		if err != nil {
			return "", before, err
		}
		if err := retryEINTR0(func() error { return unix.Fstat(fd, &after) }); err != nil {
			return "", before, fmt.Errorf("fstat: %w", err)
		}
		if StatKeyOf(&after) == StatKeyOf(&before) {
			v.remember(&after, provider.CachedDigest{Key: StatKeyOf(&after), Version: ver, HashedAtNs: start.UnixNano()})
			return ver, after, nil
		}
		if attempt == HashAttempts {
			return ver, after, nil
		}
		before = after
	}
}

// Remember records that the file with stat st holds data's bytes, as a
// publication knows without reading them back. It returns their version.
func (v *Versioner) Remember(st *unix.Stat_t, data []byte, at time.Time) provider.Version {
	ver := OfBytes(data)
	v.remember(st, provider.CachedDigest{Key: StatKeyOf(st), Version: ver, HashedAtNs: at.UnixNano()})
	return ver
}

// Now is the Versioner's clock: a hash taken at Now and remembered with
// RememberVersion is trusted once the racy window has passed.
func (v *Versioner) Now() time.Time { return v.now() }

// RememberVersion records that the file with stat st held the bytes of
// version ver when they were read at at (a read that hashed them itself).
func (v *Versioner) RememberVersion(st *unix.Stat_t, ver provider.Version, at time.Time) {
	v.remember(st, provider.CachedDigest{Key: StatKeyOf(st), Version: ver, HashedAtNs: at.UnixNano()})
}

// remember stores d for the file with stat st, unless the racy-clean rule
// would never trust it (hashed too soon after the file's last change): such
// an entry could only cost a write to the persistent cache.
func (v *Versioner) remember(st *unix.Stat_t, d provider.CachedDigest) {
	if trusted(d, st) {
		v.cache.RememberDigest(FileIDOf(st), d)
	}
}

// hash reads fd from offset 0 to its end and returns the content version.
func (v *Versioner) hash(fd int) (provider.Version, error) {
	bp := v.bufs.Get().(*[]byte)
	defer v.bufs.Put(bp)
	buf := *bp
	h := sha256.New()
	var off int64
	for {
		n, err := retryEINTR(func() (int, error) { return unix.Pread(fd, buf, off) })
		if err != nil {
			return "", fmt.Errorf("read for digest: %w", err)
		}
		if n == 0 {
			break
		}
		h.Write(buf[:n])
		off += int64(n)
	}
	return provider.Version(contentPrefix + hex.EncodeToString(h.Sum(nil))), nil
}

// retryEINTR0 runs call until it fails with something other than EINTR.
func retryEINTR0(call func() error) error {
	for {
		if err := call(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// retryEINTR is retryEINTR0 for calls with a result.
func retryEINTR[T any](call func() (T, error)) (T, error) {
	for {
		v, err := call()
		if !errors.Is(err, unix.EINTR) {
			return v, err
		}
	}
}
