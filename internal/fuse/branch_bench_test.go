package fuse

import (
	"os"
	"strconv"
	"testing"
)

// BenchmarkBranchMount_CopyUp opens a 1 MiB workspace file for writing
// through a branch mount (the copy-up: streamed copy, hash of the copy,
// record) and closes it.
func BenchmarkBranchMount_CopyUp(b *testing.B) {
	data := string(make([]byte, 1<<20))
	e := newBranchEnv(b, envOptions{})
	for i := 0; i < b.N; i++ {
		e.put("f"+strconv.Itoa(i), data)
	}
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f, err := os.OpenFile(e.bm("f"+strconv.Itoa(i)), os.O_RDWR, 0)
		if err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBranchMount_ReadFile reads a 1 MiB file through a branch mount:
// from the workspace, and from the branch's own copy.
func BenchmarkBranchMount_ReadFile(b *testing.B) {
	data := make([]byte, 1<<20)
	for _, own := range []bool{false, true} {
		b.Run("copied="+strconv.FormatBool(own), func(b *testing.B) {
			e := newBranchEnv(b, envOptions{})
			e.put("bench.bin", string(data))
			if own {
				if err := os.WriteFile(e.bm("bench.bin"), data, 0o644); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := os.ReadFile(e.bm("bench.bin")); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
