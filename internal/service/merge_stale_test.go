package service

import (
	"testing"

	"github.com/dshmount/dshmount/internal/merge"
	"github.com/stretchr/testify/assert"
)

func TestMerge_TrimmedEndsGiveTheWholeMerge(t *testing.T) {
	cases := []struct{ name, base, ours, theirs string }{
		{"far apart", "a\nb\nc\nd\ne\nf\n", "A\nb\nc\nd\ne\nf\n", "a\nb\nc\nd\ne\nF\n"},
		{"conflict in the middle", "a\nb\nc\nd\ne\n", "a\nb\nX\nd\ne\n", "a\nb\nY\nd\ne\n"},
		{"no final newline", "a\nb\nc", "A\nb\nc", "a\nb\nC"},
		{"same last line without newline", "a\nb\nz", "A\nb\nz", "a\nB\nz"},
		{"insertion at the end", "a\nb\n", "a\nb\nc\n", "a\nB\n"},
		{"empty base", "", "a\n", "b\n"},
		{"identical", "a\nb\n", "a\nb\n", "a\nb\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := merge.Merge([]byte(tc.base), []byte(tc.ours), []byte(tc.theirs), merge.Options{OursLabel: "ours", TheirsLabel: "theirs"})
			got, conflicts := mergeTrimmed(tc.base, tc.ours, tc.theirs)
			if want.Clean() {
				assert.Empty(t, conflicts)
				assert.Equal(t, string(want.Text), got)
				return
			}
			assert.Equal(t, want.Conflicts, conflicts)
		})
	}
}
