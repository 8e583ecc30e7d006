package merge

import (
	"bytes"
	"slices"
	"testing"
)

// FuzzMerge checks the laws every merge keeps: it never panics, a text
// split against its base has its own lines, merging
// with an unchanged side returns the other side, the same change on
// both sides merges to that change, and the shortcut for changes that lie
// apart, where taken, gives the diffed merge's clean result.
func FuzzMerge(f *testing.F) {
	for _, tc := range loadCorpus(f, "testdata/generated.json")[:40] {
		f.Add([]byte(tc.Base), []byte(tc.Ours), []byte(tc.Theirs))
	}
	f.Add([]byte(""), []byte("x"), []byte("\r\n"))
	f.Fuzz(func(t *testing.T, base, ours, theirs []byte) {
		if got, want := splitLike(ours, base, splitLines(base)), splitLines(ours); !slices.EqualFunc(got, want, bytes.Equal) {
			t.Fatalf("ours split against base: %q, want %q", got, want)
		}
		r := Merge(base, ours, theirs, Options{})
		if text, ok := apart(base, ours, theirs); ok {
			if d := mergeDiffed(base, ours, theirs, Options{}); !d.Clean() || !bytes.Equal(d.Text, text) {
				t.Fatalf("apart gave %q, the diffed merge clean=%v %q", text, d.Clean(), d.Text)
			}
		}
		if r.Clean() && bytes.Equal(ours, theirs) && !bytes.Equal(r.Text, ours) {
			t.Fatalf("identical sides merged to %q, want %q", r.Text, ours)
		}
		if got := Merge(base, base, theirs, Options{}); !got.Clean() || !bytes.Equal(got.Text, theirs) {
			t.Fatalf("unchanged ours: clean=%v %q, want %q", got.Clean(), got.Text, theirs)
		}
		if got := Merge(base, ours, base, Options{}); !got.Clean() || !bytes.Equal(got.Text, ours) {
			t.Fatalf("unchanged theirs: clean=%v %q, want %q", got.Clean(), got.Text, ours)
		}
		if got := Merge(base, ours, ours, Options{}); !got.Clean() || !bytes.Equal(got.Text, ours) {
			t.Fatalf("same change both sides: clean=%v %q, want %q", got.Clean(), got.Text, ours)
		}
	})
}
