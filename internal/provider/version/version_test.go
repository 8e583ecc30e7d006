package version

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dshmount/dshmount/internal/provider"
)

func TestVersioner_CacheTrustsOnlyStatsThatCannotLie(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(p, []byte("alpha"), 0o644))
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	fd := int(f.Fd())

	cache := provider.NewMemoryDigests()
	v := NewVersioner(cache)
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(fd, &st))

	// Hashed right after the change: racy, so not trusted.
	clock := time.Unix(0, max(st.Mtim.Nano(), st.Ctim.Nano()))
	v.now = func() time.Time { return clock }
	ver, _, err := v.Fresh(fd)
	require.NoError(t, err)
	assert.Equal(t, OfBytes([]byte("alpha")), ver)
	_, ok := v.Cached(&st)
	assert.False(t, ok, "a digest taken within the racy window is not trusted")

	// Hashed well after the change: trusted while the stat is the same.
	clock = clock.Add(time.Second)
	_, _, err = v.Fresh(fd)
	require.NoError(t, err)
	cached, ok := v.Cached(&st)
	require.True(t, ok)
	assert.Equal(t, ver, cached)

	// A store that keeps the stat (as a second store into a dirty mmap'd
	// page does): the cache lies, Fresh does not. Guards use Fresh only.
	_, err = f.WriteAt([]byte("ALPHA"), 0)
	require.NoError(t, err)
	require.NoError(t, unix.UtimesNano(p, []unix.Timespec{st.Atim, st.Mtim}))
	var now unix.Stat_t
	require.NoError(t, unix.Fstat(fd, &now))
	lie := now
	lie.Ctim = st.Ctim // utimes moved ctime; pretend it did not, as mmap can
	stale, ok := v.Cached(&lie)
	if ok {
		assert.Equal(t, ver, stale, "the cache can only answer what it hashed")
	}
	v.now = time.Now
	fresh, _, err := v.Fresh(fd)
	require.NoError(t, err)
	assert.Equal(t, OfBytes([]byte("ALPHA")), fresh)
	_, ok = v.Cached(&now)
	assert.False(t, ok, "a hash taken right after the change is racy again")
}

func TestVersioner_NonRegularFilesGetMetadataVersions(t *testing.T) {
	dir := t.TempDir()
	v := NewVersioner(nil)
	var st unix.Stat_t
	require.NoError(t, unix.Stat(dir, &st))
	ver, ok := v.Cached(&st)
	require.True(t, ok)
	assert.Regexp(t, `^m1-[0-9a-f]{16}$`, string(ver))
	require.NoError(t, os.Chmod(dir, 0o700))
	require.NoError(t, unix.Stat(dir, &st))
	ver2, _ := v.Cached(&st)
	assert.Equal(t, ver, ver2, "a chmod does not change a directory's version")
	require.NoError(t, os.Symlink("a", filepath.Join(dir, "l")))
	var lst unix.Stat_t
	require.NoError(t, unix.Lstat(filepath.Join(dir, "l"), &lst))
	lv, _ := v.Cached(&lst)
	require.NoError(t, os.Remove(filepath.Join(dir, "l")))
	require.NoError(t, os.Symlink("b", filepath.Join(dir, "l")))
	require.NoError(t, unix.Lstat(filepath.Join(dir, "l"), &lst))
	lv2, _ := v.Cached(&lst)
	assert.NotEqual(t, lv, lv2, "a replaced symbolic link has another version")
	assert.Equal(t, provider.FileID{Dev: uint64(st.Dev), Ino: st.Ino}, FileIDOf(&st))
}
