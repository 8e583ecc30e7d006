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
