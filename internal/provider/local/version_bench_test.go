package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dshmount/dshmount/internal/provider"
)

// The cost of content versions (issue: "versions name bytes"): a guarded
// write and a guarded edit hash the file's bytes under the lock; stat and
// list read the digest cache, cold (a new FS: every file is hashed) or warm.
// Only the public API is used, so the same file measures an older tree.

// guardSizes are the file sizes of the guarded benchmarks.
var guardSizes = []struct {
	name string
	size int
}{
	{"4KiB", 4 << 10},
	{"1MiB", 1 << 20},
	{"64MiB", 64 << 20},
}

func BenchmarkGuardedWrite(b *testing.B) {
	for _, sz := range guardSizes {
		b.Run(sz.name, func(b *testing.B) {
			fs, _ := newTestFS(b, Options{Durability: DurabilityNone})
			tg := fs.TargetForRel("f.txt")
			ctx := context.Background()
			contents := [2]string{benchText(sz.size), strings.Replace(benchText(sz.size), "MARK", "MORK", 1)}
			out, err := fs.WriteText(ctx, tg, contents[0], nil)
			if err != nil {
				b.Fatal(err)
			}
			v := out.Version
			b.SetBytes(int64(sz.size))
			i := 1
			for b.Loop() {
				out, err := fs.WriteText(ctx, tg, contents[i%2], &provider.WriteIntent{Kind: provider.ReplaceIfVersion, Version: v})
				if err != nil {
					b.Fatal(err)
				}
				v = out.Version
				i++
			}
		})
	}
}

func BenchmarkGuardedEdit(b *testing.B) {
	for _, sz := range guardSizes {
		b.Run(sz.name, func(b *testing.B) {
			fs, root := newTestFS(b, Options{Durability: DurabilityNone})
			put(b, root, "f.txt", benchText(sz.size))
			tg := fs.TargetForRel("f.txt")
			ctx := context.Background()
			info, err := fs.Stat(ctx, tg)
			if err != nil {
				b.Fatal(err)
			}
			v := info.Version
			reqs := [2]provider.EditRequest{{OldString: "MARK", NewString: "MORK"}, {OldString: "MORK", NewString: "MARK"}}
			b.SetBytes(int64(sz.size))
			i := 0
			for b.Loop() {
				out, err := fs.EditText(ctx, tg, reqs[i%2], &provider.VersionGuard{Version: v})
				if err != nil {
					b.Fatal(err)
				}
				v = out.Version
				i++
			}
		})
	}
}

// tenThousand makes 10,000 files of 4 KiB in 100 directories and waits out
// the digest cache's racy window, so a warm run can trust what it hashed.
func tenThousand(b *testing.B, root string) []string {
	b.Helper()
	data := []byte(benchText(4 << 10))
	var rels []string
	for d := range 100 {
		dir := filepath.Join(root, fmt.Sprintf("d%02d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 100 {
			rel := fmt.Sprintf("d%02d/f%03d.txt", d, f)
			if err := os.WriteFile(filepath.Join(root, rel), data, 0o644); err != nil {
				b.Fatal(err)
			}
			rels = append(rels, rel)
		}
	}
	time.Sleep(2 * racyWindowForBench)
	return rels
}

// racyWindowForBench is longer than any racy window of the digest cache.
const racyWindowForBench = 200 * time.Millisecond

func BenchmarkStat10k(b *testing.B) {
	root := b.TempDir()
	rels := tenThousand(b, root)
	ctx := context.Background()
	statAll := func(fs *FS) {
		for _, rel := range rels {
			if info, err := fs.Stat(ctx, fs.TargetForRel(rel)); err != nil || info == nil || info.Version == "" {
				b.Fatalf("stat %s: %v %v", rel, info, err)
			}
		}
	}
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			fs, err := New(root, Options{})
			if err != nil {
				b.Fatal(err)
			}
			statAll(fs)
		}
	})
	b.Run("warm", func(b *testing.B) {
		fs, err := New(root, Options{})
		if err != nil {
			b.Fatal(err)
		}
		statAll(fs)
		for b.Loop() {
			statAll(fs)
		}
	})
}

func BenchmarkList10k(b *testing.B) {
	root := b.TempDir()
	tenThousand(b, root)
	ctx := context.Background()
	listAll := func(fs *FS) (versions int) {
		for d := range 100 {
			entries, err := fs.ListDir(ctx, fs.TargetForRel(fmt.Sprintf("d%02d", d)))
			if err != nil {
				b.Fatal(err)
			}
			for _, e := range entries {
				if e.Version != "" {
					versions++
				}
			}
		}
		return versions
	}
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			fs, err := New(root, Options{})
			if err != nil {
				b.Fatal(err)
			}
			listAll(fs)
		}
	})
	b.Run("warm", func(b *testing.B) {
		fs, err := New(root, Options{})
		if err != nil {
			b.Fatal(err)
		}
		listAll(fs)
		for b.Loop() {
			if n := listAll(fs); n != 10000 {
				b.Fatalf("warm listing reported %d versions of 10000", n)
			}
		}
	})
}
