package fuse

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// BenchmarkStatRel stats a file one and four directories deep with the
// directory resolved from the root (uncached) and from a cached descriptor.
func BenchmarkStatRel(b *testing.B) {
	root := b.TempDir()
	for _, rel := range []string{"d/f", "a/b/c/d/f"} {
		require.NoError(b, os.MkdirAll(filepath.Dir(filepath.Join(root, rel)), 0o755))
		require.NoError(b, os.WriteFile(filepath.Join(root, rel), nil, 0o644))
	}
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(b, err)
	b.Cleanup(func() { _ = unix.Close(fd) })
	for _, cached := range []bool{false, true} {
		m := &mountState{rootFd: fd}
		name := "uncached"
		if cached {
			m.dirs = newDirFds(fd, DefaultDirFDs, watchedOn)
			b.Cleanup(m.dirs.close)
			name = "cached"
		}
		for _, rel := range []string{"d/f", "a/b/c/d/f"} {
			b.Run(name+"/"+rel, func(b *testing.B) {
				for b.Loop() {
					if _, err := m.statRel(rel); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkStatRel_Parallel is BenchmarkStatRel from every core at once
// (the cache's lock is shared).
func BenchmarkStatRel_Parallel(b *testing.B) {
	root := b.TempDir()
	require.NoError(b, os.MkdirAll(filepath.Join(root, "a/b"), 0o755))
	require.NoError(b, os.WriteFile(filepath.Join(root, "a/b/f"), nil, 0o644))
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(b, err)
	b.Cleanup(func() { _ = unix.Close(fd) })
	for _, cached := range []bool{false, true} {
		m := &mountState{rootFd: fd}
		name := "uncached"
		if cached {
			m.dirs = newDirFds(fd, DefaultDirFDs, watchedOn)
			b.Cleanup(m.dirs.close)
			name = "cached"
		}
		b.Run(name, func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := m.statRel("a/b/f"); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkMount_LookupDeep stats a file five names deep through the mount
// with no kernel caching, so each name is a LOOKUP the daemon serves, with
// and without cached directory descriptors.
func BenchmarkMount_LookupDeep(b *testing.B) {
	for _, cached := range []bool{false, true} {
		o := envOptions{noTimeouts: true}
		name := "uncached"
		if cached {
			o.watched, name = watchedOn, "cached"
		}
		b.Run(name, func(b *testing.B) {
			e := newEnv(b, o)
			e.put("a/b/c/d/f", "x")
			for b.Loop() {
				if _, err := os.Lstat(e.m("a/b/c/d/f")); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMount_CreateDeep creates, writes, closes and unlinks a file four
// directories deep through the mount, with and without cached directory
// descriptors.
func BenchmarkMount_CreateDeep(b *testing.B) {
	for _, cached := range []bool{false, true} {
		o := envOptions{}
		name := "uncached"
		if cached {
			o.watched, name = watchedOn, "cached"
		}
		b.Run(name, func(b *testing.B) {
			e := newEnv(b, o)
			require.NoError(b, os.MkdirAll(e.b("a/b/c/d"), 0o755))
			p := e.m("a/b/c/d/f")
			for b.Loop() {
				if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
					b.Fatal(err)
				}
				if err := os.Remove(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
