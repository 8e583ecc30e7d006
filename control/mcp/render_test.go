package mcp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestChangeSnippet_ShowsTheChangedLinesWithContext(t *testing.T) {
	tests := []struct {
		name, before, after, want string
	}{
		{"one line changed in the middle",
			"1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\n3\n4\nFIVE\n6\n7\n8\n9\n",
			"     2\t2\n     3\t3\n     4\t4\n     5\tFIVE\n     6\t6\n     7\t7\n     8\t8\n"},
		{"lines inserted at the start", "a\nb\n", "x\ny\na\nb\n",
			"     1\tx\n     2\ty\n     3\ta\n     4\tb\n"},
		{"a line deleted shows its neighbours", "a\nb\nc\n", "a\nc\n",
			"     1\ta\n     2\tc\n"},
		{"no change shows nothing", "a\n", "a\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, changeSnippet(tt.before, tt.after))
		})
	}
}

func TestChangeSnippet_IsBounded(t *testing.T) {
	var before, after string
	for i := 0; i < 200; i++ {
		before += "old\n"
		after += "new\n"
	}
	assert.Equal(t, snippetMax, lineCount(changeSnippet(before, after)))
}

func TestAgo_RendersCoarseDurations(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{300 * time.Millisecond, "just now"},
		{3 * time.Second, "3s ago"},
		{125 * time.Second, "2m ago"},
		{5 * time.Hour, "5h ago"},
		{72 * time.Hour, "3d ago"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, ago(tt.d), tt.d.String())
	}
}
