package fuse

import (
	"os"
	"strconv"
	"testing"
)

// BenchmarkMount_WriteFile writes and closes a 1 MiB file through the mount
// (open, writes, flush/release with its version record), with and without
// passthrough.
func BenchmarkMount_WriteFile(b *testing.B) {
	data := make([]byte, 1<<20)
	for _, pt := range []bool{false, true} {
		b.Run("passthrough="+strconv.FormatBool(pt), func(b *testing.B) {
			e := newEnv(b, envOptions{passthrough: pt})
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := os.WriteFile(e.m("bench.bin"), data, 0o644); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMount_ReadFile reads a 1 MiB file through the mount.
func BenchmarkMount_ReadFile(b *testing.B) {
	data := make([]byte, 1<<20)
	for _, pt := range []bool{false, true} {
		b.Run("passthrough="+strconv.FormatBool(pt), func(b *testing.B) {
			e := newEnv(b, envOptions{passthrough: pt})
			e.put("bench.bin", string(data))
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := os.ReadFile(e.m("bench.bin")); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
