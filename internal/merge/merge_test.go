package merge

import (
	"strings"
	"testing"
)

func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

func TestMerge_FarApartChangesMergeClean(t *testing.T) {
	base := lines("a", "b", "c", "d", "e", "f", "g")
	ours := lines("a", "B", "c", "d", "e", "f", "g")
	theirs := lines("a", "b", "c", "d", "e", "F", "g")
	r := Merge([]byte(base), []byte(ours), []byte(theirs), Options{})
	if !r.Clean() {
		t.Fatalf("conflicts: %+v", r.Conflicts)
	}
	if want := lines("a", "B", "c", "d", "e", "F", "g"); string(r.Text) != want {
		t.Fatalf("got %q, want %q", r.Text, want)
	}
}

// Git conflicts on changes to adjacent lines even though no line is
// changed by both sides.
func TestMerge_AdjacentChangesConflict(t *testing.T) {
	base := lines("a", "b", "c", "d")
	r := Merge([]byte(base), []byte(lines("a", "B", "c", "d")), []byte(lines("a", "b", "C", "d")), Options{OursLabel: "mine", TheirsLabel: "yours"})
	if r.Clean() {
		t.Fatalf("adjacent changes merged clean: %q", r.Text)
	}
	want := Conflict{BaseStart: 2, Base: "b\nc\n", Ours: "B\nc\n", Theirs: "b\nC\n"}
	if len(r.Conflicts) != 1 || r.Conflicts[0] != want {
		t.Fatalf("conflicts %+v, want [%+v]", r.Conflicts, want)
	}
	if wantText := "a\n<<<<<<< mine\nB\nc\n=======\nb\nC\n>>>>>>> yours\nd\n"; string(r.Text) != wantText {
		t.Fatalf("text %q, want %q", r.Text, wantText)
	}
}

func TestMerge_IdenticalChangesMergeClean(t *testing.T) {
	base := lines("a", "b", "c")
	both := lines("a", "X", "c")
	r := Merge([]byte(base), []byte(both), []byte(both), Options{})
	if !r.Clean() || string(r.Text) != both {
		t.Fatalf("clean=%v text=%q, want %q", r.Clean(), r.Text, both)
	}
}

// Markers take the CRLF line ends of the file around them.
func TestMerge_CRLFConflictMarkers(t *testing.T) {
	base := "a\r\nb\r\nc\r\n"
	r := Merge([]byte(base), []byte("a\r\nX\r\nc\r\n"), []byte("a\r\nY\r\nc\r\n"), Options{})
	if want := "a\r\n<<<<<<<\r\nX\r\n=======\r\nY\r\n>>>>>>>\r\nc\r\n"; string(r.Text) != want {
		t.Fatalf("text %q, want %q", r.Text, want)
	}
}

func TestMerge_UnchangedSideReturnsOther(t *testing.T) {
	base := []byte("a\nb\n")
	other := []byte("a\nb\nc")
	if r := Merge(base, base, other, Options{}); !r.Clean() || string(r.Text) != string(other) {
		t.Fatalf("ours unchanged: %q", r.Text)
	}
	if r := Merge(base, other, base, Options{}); !r.Clean() || string(r.Text) != string(other) {
		t.Fatalf("theirs unchanged: %q", r.Text)
	}
}
