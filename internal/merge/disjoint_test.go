package merge

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// apart takes a shortcut only where diffing gives the same result, and
// declines wherever a changed group could slide up to the other side's.
func TestApart_ShortcutOnlyWhereTheDiffedMergeAgrees(t *testing.T) {
	lines := func(ls ...string) string { return strings.Join(ls, "\n") + "\n" }
	cases := []struct {
		name                 string
		base, ours, theirs   string
		wantApart, wantClean bool
	}{
		{"far apart", lines("a", "b", "c", "d", "e"), lines("A", "b", "c", "d", "e"), lines("a", "b", "c", "d", "E"), true, true},
		{"theirs first", lines("a", "b", "c", "d", "e"), lines("a", "b", "c", "d", "E"), lines("A", "b", "c", "d", "e"), true, true},
		{"one line between", lines("a", "b", "c"), lines("A", "b", "c"), lines("a", "b", "C"), true, true},
		{"adjacent: no line between", lines("a", "b", "c"), lines("A", "b", "c"), lines("a", "B", "c"), false, false},
		{"the line between equals a changed line", lines("a", "x", "c"), lines("x", "x", "c"), lines("a", "x", "C"), false, true},
		{"insertions that may slide into each other", lines("a", "x", "x", "b"), lines("a", "x", "x", "x", "b"), lines("a", "x", "x", "b", "c"), false, true},
		{"a later line between separates", lines("a", "x", "y", "b"), lines("x", "x", "y", "b"), lines("a", "x", "y", "B"), true, true},
		{"no final newline", "a\nb\nc", "A\nb\nc", "a\nb\nC", true, true},
		{"append at the end", lines("a", "b", "c"), lines("A", "b", "c"), lines("a", "b", "c", "d"), true, true},
		{"same change both sides", lines("a", "b"), lines("A", "b"), lines("A", "b"), false, true},
		{"overlapping changes", lines("a", "b", "c"), lines("A", "B", "c"), lines("a", "X", "c"), false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := apart([]byte(tc.base), []byte(tc.ours), []byte(tc.theirs))
			want := mergeDiffed([]byte(tc.base), []byte(tc.ours), []byte(tc.theirs), Options{})
			assert.Equal(t, tc.wantApart, ok, "shortcut taken")
			assert.Equal(t, tc.wantClean, want.Clean(), "the diffed merge is clean")
			if ok {
				require.True(t, want.Clean(), "a shortcut where the diffed merge conflicts")
				assert.Equal(t, string(want.Text), string(got))
			}
		})
	}
}

// On every corpus triple the shortcut, where taken, gives the diffed
// merge's clean result byte for byte.
func TestApart_AgreesWithTheDiffedMergeOnTheCorpus(t *testing.T) {
	taken := 0
	for _, file := range []string{"testdata/generated.json", "testdata/history.json"} {
		for _, tc := range loadCorpus(t, file) {
			got, ok := apart([]byte(tc.Base), []byte(tc.Ours), []byte(tc.Theirs))
			if !ok {
				continue
			}
			taken++
			want := mergeDiffed([]byte(tc.Base), []byte(tc.Ours), []byte(tc.Theirs), Options{})
			require.True(t, want.Clean(), "%s: a shortcut where the diffed merge conflicts", tc.Name)
			require.Equal(t, string(want.Text), string(got), tc.Name)
		}
	}
	assert.Positive(t, taken, "the shortcut was never taken")
}

// Merge only reads its inputs (the service passes strings' bytes without
// a copy) and returns a Text of its own, on every corpus triple, whether
// it takes the shortcut, merges cleanly or conflicts.
func TestMerge_LeavesItsInputsAlone(t *testing.T) {
	for _, file := range []string{"testdata/generated.json", "testdata/history.json"} {
		for _, tc := range loadCorpus(t, file) {
			in := [3][]byte{[]byte(tc.Base), []byte(tc.Ours), []byte(tc.Theirs)}
			r := Merge(in[0], in[1], in[2], Options{OursLabel: "ours", TheirsLabel: "theirs"})
			for i := range r.Text {
				r.Text[i] = 0
			}
			require.Equal(t, tc.Base, string(in[0]), "%s: base", tc.Name)
			require.Equal(t, tc.Ours, string(in[1]), "%s: ours", tc.Name)
			require.Equal(t, tc.Theirs, string(in[2]), "%s: theirs", tc.Name)
		}
	}
}
