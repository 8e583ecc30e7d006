package patch

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse_OperationsInOrder(t *testing.T) {
	text := strings.Join([]string{
		"*** Begin Patch",
		"*** Add File: new.txt",
		"+a",
		"+",
		"*** Delete File: old.txt",
		"*** Update File: src/x.go",
		"*** Move to: src/y.go",
		"@@ func main() {",
		" ctx",
		"-old",
		"+new",
		"*** End of File",
		"@@ ",
		"+tail",
		"@@",
		"-gone",
		"*** End Patch",
	}, "\n")
	ops, err := Parse(text)
	require.NoError(t, err)
	require.Len(t, ops, 3)
	assert.Equal(t, &Add{Path: "new.txt", Line: 2, Content: "a\n\n"}, ops[0])
	assert.Equal(t, &Delete{Path: "old.txt", Line: 5}, ops[1])
	assert.Equal(t, &Update{Path: "src/x.go", Line: 6, MoveTo: "src/y.go", Hunks: []Hunk{
		{Line: 8, Context: "func main() {", HasContext: true, OldLines: []string{"ctx", "old"},
			NewLines: []string{"ctx", "new"}, IsEndOfFile: true},
		{Line: 13, Context: "", HasContext: true, NewLines: []string{"tail"}},
		{Line: 15, OldLines: []string{"gone"}},
	}}, ops[2])
	assert.Equal(t, []Kind{KindAdd, KindDelete, KindUpdate}, []Kind{ops[0].OpKind(), ops[1].OpKind(), ops[2].OpKind()})
	assert.Equal(t, "src/x.go", ops[2].OpPath())
	assert.Equal(t, 6, ops[2].OpLine())
}

func TestParse_FirstChunkWithoutMarkerStartsAtItsFirstLine(t *testing.T) {
	ops, err := Parse("*** Begin Patch\n*** Update File: a\n-x\n+y\n*** End Patch")
	require.NoError(t, err)
	require.Len(t, ops, 1)
	u := ops[0].(*Update)
	require.Len(t, u.Hunks, 1)
	assert.Equal(t, Hunk{Line: 3, OldLines: []string{"x"}, NewLines: []string{"y"}}, u.Hunks[0])
}

func TestParse_EmptyPatchHasNoOperations(t *testing.T) {
	ops, err := Parse("*** Begin Patch\n*** End Patch")
	require.NoError(t, err)
	assert.Empty(t, ops)
}

func TestParse_PathsKeptAsWritten(t *testing.T) {
	ops, err := Parse("*** Begin Patch\n*** Delete File: ../x/./y z.txt\n*** Add File: /abs/p\n*** End Patch")
	require.NoError(t, err)
	assert.Equal(t, "../x/./y z.txt", ops[0].OpPath())
	assert.Equal(t, "/abs/p", ops[1].OpPath())
}

func TestParse_CRBeforeLFDropped(t *testing.T) {
	ops, err := Parse("*** Begin Patch\r\n*** Add File: a\r\n+x\r\n*** End Patch\r\n")
	require.NoError(t, err)
	assert.Equal(t, &Add{Path: "a", Line: 2, Content: "x\n"}, ops[0])
}

func TestParse_HeredocLineNumbersCountTheWrapper(t *testing.T) {
	for _, opener := range []string{"<<EOF", "<<'EOF'", `<<"EOF"`} {
		ops, err := Parse(opener + "\n*** Begin Patch\n*** Add File: a\n+x\n*** End Patch\nEOF")
		require.NoError(t, err, opener)
		assert.Equal(t, &Add{Path: "a", Line: 3, Content: "x\n"}, ops[0], opener)
	}
	_, err := Parse("<<EOF\n*** Begin Patch\n*** Bogus\n*** End Patch\nEOF")
	assertSyntaxError(t, err, 3, "'*** Bogus' is not a valid hunk header")
}

func TestParse_HeredocOpenerMustBeExact(t *testing.T) {
	_, err := Parse("<<EOFX\n*** Begin Patch\n*** Add File: a\n*** End Patch\nEOF")
	assertSyntaxError(t, err, 1, firstLineMsg)
}

func assertSyntaxError(t *testing.T, err error, line int, msg string) {
	t.Helper()
	var se *SyntaxError
	require.True(t, errors.As(err, &se), "want *SyntaxError, got %v", err)
	assert.Equal(t, line, se.Line)
	assert.Contains(t, se.Message, msg)
	assert.True(t, strings.HasPrefix(se.Error(), "invalid patch at line "))
}

func TestParse_SyntaxErrorLineNumbers(t *testing.T) {
	const emptyMsg = "update hunk does not contain any lines"
	tests := []struct {
		name string
		text string
		line int
		msg  string
	}{
		{"empty text", "", 1, firstLineMsg},
		{"only whitespace", " \n\t\n", 1, firstLineMsg},
		{"missing begin", "*** Add File: a\n*** End Patch", 1, firstLineMsg},
		{"only begin", "*** Begin Patch", 1, lastLineMsg},
		{"missing end", "*** Begin Patch\n*** Add File: a\n+x", 3, lastLineMsg},
		{"unknown header", "*** Begin Patch\n*** Frobnicate: a\n*** End Patch", 2,
			"'*** Frobnicate: a' is not a valid hunk header; valid headers are '*** Add File: {path}', '*** Delete File: {path}', '*** Update File: {path}'"},
		{"header without space after colon", "*** Begin Patch\n*** Add File:a\n*** End Patch", 2, "is not a valid hunk header"},
		{"blank line between operations", "*** Begin Patch\n*** Delete File: a\n\n*** Delete File: b\n*** End Patch", 3, "'' is not a valid hunk header"},
		{"update without chunk", "*** Begin Patch\n*** Delete File: x\n*** Update File: a\n*** End Patch", 3, "update file hunk for path 'a' is empty"},
		{"update with only move", "*** Begin Patch\n*** Update File: a\n*** Move to: b\n*** End Patch", 2, "update file hunk for path 'a' is empty"},
		{"at marker last", "*** Begin Patch\n*** Update File: a\n@@\n*** End Patch", 4, emptyMsg},
		{"eof right after at", "*** Begin Patch\n*** Update File: a\n@@ x\n*** End of File\n*** End Patch", 4, emptyMsg},
		{"unexpected first line", "*** Begin Patch\n*** Update File: a\n@@\nfoo\n*** End Patch", 4,
			"unexpected line found in update hunk: 'foo'. Every line should start with ' ' (context line), '+' (added line), or '-' (removed line)"},
		{"header right after at", "*** Begin Patch\n*** Update File: a\n@@\n*** Delete File: b\n*** End Patch", 4,
			"unexpected line found in update hunk: '*** Delete File: b'"},
		{"later chunk without marker", "*** Begin Patch\n*** Update File: a\n-x\n+y\nz\n*** End Patch", 5,
			"expected update hunk to start with a @@ context marker, got: 'z'"},
		{"two anchors in a row", "*** Begin Patch\n*** Update File: a\n@@ class A\n@@ def f\n-x\n*** End Patch", 4,
			"unexpected line found in update hunk: '@@ def f'"},
		{"padded end of file marker", "*** Begin Patch\n*** Update File: a\n-x\n*** End of File \n*** End Patch", 4,
			"'*** End of File' is not a valid hunk header"},
		{"line count after leading blank lines", "\n\n*** Begin Patch\n*** Nope\n*** End Patch", 2, "'*** Nope'"},
		{"crlf line numbers", "*** Begin Patch\r\n*** Update File: a\r\n@@\r\n*** End Patch\r\n", 4, emptyMsg},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops, err := Parse(tt.text)
			assert.Nil(t, ops)
			assertSyntaxError(t, err, tt.line, tt.msg)
		})
	}
}

func TestParse_WhitespaceOnlyChunkLineIsContext(t *testing.T) {
	ops, err := Parse("*** Begin Patch\n*** Update File: a\n@@\n-x\n   \n+y\n*** End Patch")
	require.NoError(t, err)
	h := ops[0].(*Update).Hunks[0]
	assert.Equal(t, []string{"x", "  "}, h.OldLines)
	assert.Equal(t, []string{"  ", "y"}, h.NewLines)
}

func TestParse_MoveToRecognisedOnlyExactly(t *testing.T) {
	ops, err := Parse("*** Begin Patch\n*** Update File: a\n *** Move to: b\n*** End Patch")
	require.NoError(t, err)
	u := ops[0].(*Update)
	assert.Empty(t, u.MoveTo)
	assert.Equal(t, []string{"*** Move to: b"}, u.Hunks[0].OldLines)
}

func TestParse_TabLineEndsChunkThenIsSkipped(t *testing.T) {
	ops, err := Parse("*** Begin Patch\n*** Update File: a\n@@\n-x\n\t\n@@\n-y\n*** End Patch")
	require.NoError(t, err)
	hunks := ops[0].(*Update).Hunks
	require.Len(t, hunks, 2)
	assert.Equal(t, 6, hunks[1].Line)
}

// FuzzParse checks that Parse never panics, that errors are *SyntaxError
// with a line inside the text, and that every parsed line number points into
// the text at a line of the right shape.
func FuzzParse(f *testing.F) {
	for _, dir := range scenarioDirs(f) {
		if data, err := os.ReadFile(filepath.Join(dir, "patch")); err == nil {
			f.Add(string(data))
		}
	}
	f.Fuzz(func(t *testing.T, text string) {
		ops, err := Parse(text)
		lines := patchLines(strings.TrimSpace(text))
		count := max(len(lines), 1)
		if err != nil {
			var se *SyntaxError
			require.True(t, errors.As(err, &se), "error %v is not a *SyntaxError", err)
			require.GreaterOrEqual(t, se.Line, 1)
			require.LessOrEqual(t, se.Line, count)
			return
		}
		prev := 1
		for _, op := range ops {
			line := op.OpLine()
			require.Greater(t, line, prev, "operations must be after line %d", prev)
			require.Less(t, line, count)
			header := strings.TrimSpace(lines[line-1])
			require.True(t, strings.HasSuffix(header, op.OpPath()), "line %d %q does not name %q", line, header, op.OpPath())
			prev = line
			u, ok := op.(*Update)
			if !ok {
				continue
			}
			require.NotEmpty(t, u.Hunks)
			for _, h := range u.Hunks {
				require.GreaterOrEqual(t, h.Line, prev)
				require.Less(t, h.Line, count)
				if h.HasContext {
					require.Equal(t, "@@ "+h.Context, lines[h.Line-1])
				}
				prev = h.Line
			}
		}
	})
}
