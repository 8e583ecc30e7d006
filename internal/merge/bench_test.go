package merge

import (
	"bytes"
	"fmt"
	"testing"
)

// BenchmarkMerge1MiB merges one-line changes at both ends of a 1 MiB file,
// the merge a `merge: true` edit of such a file runs.
func BenchmarkMerge1MiB(b *testing.B) {
	var base bytes.Buffer
	for i := 0; base.Len() < 1<<20; i++ {
		fmt.Fprintf(&base, "line %07d of a one mebibyte text file to merge\n", i)
	}
	ours := bytes.Replace(base.Bytes(), []byte("line 0000010 "), []byte("LINE 0000010 "), 1)
	theirs := bytes.Replace(base.Bytes(), []byte("line 0020000 "), []byte("LINE 0020000 "), 1)
	b.SetBytes(int64(base.Len()))
	b.ResetTimer()
	for range b.N {
		if r := Merge(base.Bytes(), ours, theirs, Options{}); !r.Clean() {
			b.Fatal("conflict")
		}
	}
}

// BenchmarkMerge_OneMiBFarApartEdits merges a 1 MiB file of short lines
// ("line N", about 100,000 of them, the shape of the socket benchmark)
// where ours changes line 10 and theirs line 80,000: the per-line costs
// (splitting, classing, the edit scripts, the output) dominate.
func BenchmarkMerge_OneMiBFarApartEdits(b *testing.B) {
	var base bytes.Buffer
	for i := 1; base.Len() < 1<<20-64; i++ {
		fmt.Fprintf(&base, "line %d\n", i)
	}
	ours := bytes.Replace(base.Bytes(), []byte("\nline 10\n"), []byte("\nline 10 by ours\n"), 1)
	theirs := bytes.Replace(base.Bytes(), []byte("\nline 80000\n"), []byte("\nline 80000 by theirs\n"), 1)
	b.SetBytes(int64(base.Len()))
	b.ReportAllocs()
	for b.Loop() {
		if r := Merge(base.Bytes(), ours, theirs, Options{}); !r.Clean() {
			b.Fatal("conflict")
		}
	}
}
