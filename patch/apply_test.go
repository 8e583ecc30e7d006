package patch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestApplyHunks_FailureStages(t *testing.T) {
	const text = "a\nb\nc\nd\n"
	tests := []struct {
		name  string
		hunks []Hunk
		want  HunkFailure
	}{
		{
			name: "anchor not found after the cursor",
			hunks: []Hunk{
				{Line: 3, OldLines: []string{"c"}, NewLines: []string{"C"}},
				{Line: 6, Context: "a", HasContext: true, OldLines: []string{"d"}},
			},
			want: HunkFailure{HunkLine: 6, Stage: StageContext, SearchStart: 3, Pattern: []string{"a"}},
		},
		{
			name:  "empty anchor is searched like any other",
			hunks: []Hunk{{Line: 3, HasContext: true, NewLines: []string{"x"}}},
			want:  HunkFailure{HunkLine: 3, Stage: StageContext, SearchStart: 0, Pattern: []string{""}},
		},
		{
			name: "old lines not found after the anchor",
			hunks: []Hunk{
				{Line: 3, Context: "b", HasContext: true, OldLines: []string{"a"}, NewLines: []string{"A"}},
			},
			want: HunkFailure{HunkLine: 3, Stage: StageOldLines, SearchStart: 2, Pattern: []string{"a"}},
		},
		{
			name: "pattern keeps its trailing empty line",
			hunks: []Hunk{
				{Line: 4, OldLines: []string{"b"}},
				{Line: 9, OldLines: []string{"x", ""}, NewLines: []string{"y", ""}},
			},
			want: HunkFailure{HunkLine: 9, Stage: StageOldLines, SearchStart: 2, Pattern: []string{"x", ""}},
		},
		{
			name:  "end of file search starts at the tail",
			hunks: []Hunk{{Line: 5, OldLines: []string{"a", "b"}, IsEndOfFile: true}},
			want:  HunkFailure{HunkLine: 5, Stage: StageOldLines, SearchStart: 2, Pattern: []string{"a", "b"}},
		},
		{
			name:  "end of file pattern longer than the file",
			hunks: []Hunk{{Line: 5, OldLines: strings.Split("a b c d e", " "), IsEndOfFile: true}},
			want:  HunkFailure{HunkLine: 5, Stage: StageOldLines, SearchStart: 0, Pattern: strings.Split("a b c d e", " ")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, failure := ApplyHunks(text, tt.hunks)
			assert.Empty(t, got, "no partial text on failure")
			require.NotNil(t, failure)
			assert.Equal(t, tt.want, *failure)
		})
	}
}

func TestHunkFailure_ErrorNamesLineStageAndPattern(t *testing.T) {
	_, f := ApplyHunks("a\n", []Hunk{{Line: 7, Context: "zz", HasContext: true, OldLines: []string{"a"}}})
	require.NotNil(t, f)
	assert.Equal(t, `hunk at patch line 7: context anchor not found (searched from line 1): "zz"`, f.Error())
	_, f = ApplyHunks("a\n", []Hunk{{Line: 9, OldLines: []string{"x", "y"}}})
	require.NotNil(t, f)
	assert.Equal(t, `hunk at patch line 9: old lines not found (searched from line 1): "x\ny"`, f.Error())
}

func TestApplyHunks_FailurePatternIsACopy(t *testing.T) {
	h := []Hunk{{Line: 1, OldLines: []string{"x"}}}
	_, f := ApplyHunks("a\n", h)
	require.NotNil(t, f)
	f.Pattern[0] = "changed"
	assert.Equal(t, "x", h[0].OldLines[0])
}

func TestApplyHunks_TextRules(t *testing.T) {
	tests := []struct {
		name     string
		original string
		hunks    []Hunk
		want     string
	}{
		{"final newline added", "a", []Hunk{{OldLines: []string{"a"}, NewLines: []string{"b"}}}, "b\n"},
		{"no hunks normalises the end", "a\n\n", nil, "a\n"},
		{"delete every line", "a\nb\n", []Hunk{{OldLines: []string{"a", "b"}}}, ""},
		{"additions to empty file", "", []Hunk{{NewLines: []string{"x"}}, {NewLines: []string{"y"}}}, "x\ny\n"},
		{"pure additions keep their order after a replacement", "a\nb\n",
			[]Hunk{{NewLines: []string{"1"}}, {OldLines: []string{"a"}, NewLines: []string{"A"}}, {NewLines: []string{"2"}}}, "A\nb\n1\n2\n"},
		{"pure addition before final empty line", "a\n\n", []Hunk{{NewLines: []string{"z"}}}, "a\nz\n"},
		{"new lines ending in empty line", "a\nb\n", []Hunk{{OldLines: []string{"b"}, NewLines: []string{"b", ""}}}, "a\nb\n"},
		{"retry drops the empty last new line", "a\nb\n", []Hunk{{OldLines: []string{"b", ""}, NewLines: []string{"c", ""}}}, "a\nc\n"},
		{"retry keeps a non-empty last new line", "a\nb\n", []Hunk{{OldLines: []string{"b", ""}, NewLines: []string{"c", "d"}}}, "a\nc\nd\n"},
		{"fuzzy match takes the patch spelling", "  x \ny\n", []Hunk{{OldLines: []string{"x", "y"}, NewLines: []string{"x", "Y"}}}, "x\nY\n"},
		{"anchor moves the cursor past itself", "k\nk\nv\n",
			[]Hunk{{Context: "k", HasContext: true, OldLines: []string{"k"}, NewLines: []string{"K"}}}, "k\nK\nv\n"},
		{"end of file tail before the cursor follows the reference", "a\nb\nc\n", []Hunk{
			{OldLines: []string{"b"}, NewLines: []string{"B"}},
			{OldLines: []string{"b", "c"}, NewLines: []string{"b", "C"}, IsEndOfFile: true},
		}, "a\nB\nC\n"},
		{"replacement recorded before an insertion at its index wins", "a\n\n", []Hunk{
			{OldLines: []string{""}, NewLines: []string{"x"}},
			{NewLines: []string{"y"}},
		}, "a\nx\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, f := ApplyHunks(tt.original, tt.hunks)
			require.Nil(t, f)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestApplyUpdate_UsesTheUpdateHunks(t *testing.T) {
	ops, err := Parse("*** Begin Patch\n*** Update File: a\n@@\n-x\n+y\n*** End Patch")
	require.NoError(t, err)
	got, f := ApplyUpdate("x\n", ops[0].(*Update))
	require.Nil(t, f)
	assert.Equal(t, "y\n", got)
}

func TestDiffHunks_ApplyGivesTarget(t *testing.T) {
	tests := []struct{ a, b string }{
		{"", "x\n"},
		{"x\n", ""},
		{"a\nb\nc\n", "a\nB\nc\n"},
		{"x\nx\nx\ny\n", "x\nx\nz\ny\n"},
		{"a\nb\na\nb\na\n", "a\nb\na\nc\na\n"},
		{"1\n2\n3\n4\n5\n6\n7\n8\n9\n", "0\n2\n3\n4\n5\n6\n7\n8\n10\n"},
	}
	for _, tt := range tests {
		for ctx := 1; ctx <= 3; ctx++ {
			a, b := splitLines(tt.a), splitLines(tt.b)
			got, f := ApplyHunks(tt.a, diffHunks(a, b, ctx))
			require.Nil(t, f, "%q→%q ctx %d", tt.a, tt.b, ctx)
			assert.Equal(t, render(b, nil), got, "%q→%q ctx %d", tt.a, tt.b, ctx)
		}
	}
}

// FuzzApplyHunks checks that ApplyHunks never panics on arbitrary hunks and
// that a patch generated from a line diff of two texts, applied to the first,
// gives the second (with the trailing-LF normalisation), both as hunks and
// through its patch text.
func FuzzApplyHunks(f *testing.F) {
	for _, dir := range scenarioDirs(f) {
		in := filepath.Join(dir, "input")
		entries, _ := os.ReadDir(in)
		for _, e := range entries {
			before, err1 := os.ReadFile(filepath.Join(in, e.Name()))
			after, err2 := os.ReadFile(filepath.Join(dir, "expected", e.Name()))
			if err1 == nil && err2 == nil {
				f.Add(string(before), string(after), uint8(len(f.Name())))
			}
		}
	}
	f.Add("a\nb\na\nb\n", "a\nb\nB\nb\n", uint8(0))
	f.Add("", "x", uint8(2))
	f.Fuzz(func(t *testing.T, a, b string, ctx uint8) {
		al, bl := splitLines(a), splitLines(b)
		if len(al) > 300 || len(bl) > 300 {
			return
		}
		// Arbitrary hunks built from the inputs must not panic.
		_, _ = ApplyHunks(a, []Hunk{
			{OldLines: bl, NewLines: al, IsEndOfFile: ctx&1 == 1},
			{Context: b, HasContext: ctx&2 == 2, NewLines: bl},
			{OldLines: append(append([]string(nil), bl...), ""), IsEndOfFile: ctx&4 == 4},
		})

		hunks := diffHunks(al, bl, int(ctx%4)+1)
		want := render(bl, nil)
		got, failure := ApplyHunks(a, hunks)
		require.Nil(t, failure)
		require.Equal(t, want, got)

		if strings.ContainsRune(a+b, '\r') {
			return
		}
		ops, err := Parse(formatPatch("f.txt", hunks))
		if len(hunks) == 0 {
			require.Error(t, err, "an update without chunks is a syntax error")
			return
		}
		require.NoError(t, err)
		got, failure = ApplyUpdate(a, ops[0].(*Update))
		require.Nil(t, failure)
		require.Equal(t, want, got)
	})
}

// benchmarkInput builds a lines-line file and a patch with hunks chunks
// spread evenly over it, each replacing one line by two.
func benchmarkInput(lines, hunks int) (string, string) {
	var file strings.Builder
	for i := range lines {
		fmt.Fprintf(&file, "\tvalue%d := compute(%d, %q)\n", i, i%17, "x")
	}
	var p strings.Builder
	p.WriteString("*** Begin Patch\n*** Update File: big.go\n")
	step := lines / hunks
	for h := range hunks {
		at := h*step + step/2
		p.WriteString("@@\n")
		for i := at - 3; i < at; i++ {
			fmt.Fprintf(&p, " \tvalue%d := compute(%d, %q)\n", i, i%17, "x")
		}
		fmt.Fprintf(&p, "-\tvalue%d := compute(%d, %q)\n", at, at%17, "x")
		fmt.Fprintf(&p, "+\tvalue%d := compute(%d, %q) // changed\n+\tuse(value%d)\n", at, at%17, "x", at)
		for i := at + 1; i <= at+3; i++ {
			fmt.Fprintf(&p, " \tvalue%d := compute(%d, %q)\n", i, i%17, "x")
		}
	}
	p.WriteString("*** End Patch\n")
	return file.String(), p.String()
}

func BenchmarkParseAndApply_200Hunks10kLines(b *testing.B) {
	file, text := benchmarkInput(10_000, 200)
	b.SetBytes(int64(len(file) + len(text)))
	b.ReportAllocs()
	for b.Loop() {
		ops, err := Parse(text)
		if err != nil {
			b.Fatal(err)
		}
		out, f := ApplyUpdate(file, ops[0].(*Update))
		if f != nil {
			b.Fatal(f)
		}
		if len(out) <= len(file) {
			b.Fatal("patch did not grow the file")
		}
	}
}
