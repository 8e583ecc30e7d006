package local

import (
	"context"
	"strings"
	"testing"

	"github.com/dshmount/dshmount/internal/provider"
)

// benchSizes are the file sizes of the write and edit benchmarks.
var benchSizes = []struct {
	name string
	size int
}{
	{"small", 1 << 10},
	{"1MiB", 1 << 20},
}

// benchText returns n bytes of line-structured text ending with a marker.
func benchText(n int) string {
	line := strings.Repeat("x", 63) + "\n"
	s := strings.Repeat(line, n/len(line))
	return s[:len(s)-len("MARK\n")] + "MARK\n"
}

func BenchmarkWriteText(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			fs, _ := newTestFS(b, Options{})
			tg := fs.TargetForRel("f.txt")
			content := benchText(sz.size)
			ctx := context.Background()
			b.SetBytes(int64(len(content)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := fs.WriteText(ctx, tg, content, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkEditText(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			fs, root := newTestFS(b, Options{})
			put(b, root, "f.txt", benchText(sz.size))
			tg := fs.TargetForRel("f.txt")
			ctx := context.Background()
			reqs := [2]provider.EditRequest{{OldString: "MARK", NewString: "MORK"}, {OldString: "MORK", NewString: "MARK"}}
			b.SetBytes(int64(sz.size))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := fs.EditText(ctx, tg, reqs[i%2], nil); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

func BenchmarkReadText(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			fs, root := newTestFS(b, Options{})
			put(b, root, "f.txt", benchText(sz.size))
			tg := fs.TargetForRel("f.txt")
			ctx := context.Background()
			b.SetBytes(int64(sz.size))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := fs.ReadText(ctx, tg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
