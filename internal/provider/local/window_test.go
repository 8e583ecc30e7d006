package local

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

// A windowed read decides text or binary over the whole file by the rule
// fs.edit uses: a bad byte far past the window is FS_NOT_TEXT for both.
// A text file's window carries the version of every byte (ReadTextVersion's)
// and its exact line count, also when multibyte characters straddle reads.
func TestReadTextWindow_TextRuleOfEditAndVersionOfTheWholeFile(t *testing.T) {
	fs, root := newTestFS(t, Options{})
	ctx := context.Background()
	body := "first\n" + strings.Repeat("日本語テキスト\r\n", 20000) // far over one read (64 KiB)
	put(t, root, "bad.txt", body+"\xff\n")
	put(t, root, "good.txt", body+"last")
	one := provider.TextWindow{Offset: 1, Limit: 1, MaxBytes: 1 << 10}

	_, _, err := fs.ReadTextWindow(ctx, target(t, fs, "bad.txt"), one)
	assert.Equal(t, provider.CodeNotText, provider.CodeOf(err), "read: %v", err)
	_, err = fs.EditText(ctx, target(t, fs, "bad.txt"), provider.EditRequest{OldString: "first", NewString: "1st"}, nil)
	assert.Equal(t, provider.CodeNotText, provider.CodeOf(err), "edit: %v", err)

	win, info, err := fs.ReadTextWindow(ctx, target(t, fs, "good.txt"), provider.TextWindow{Offset: 20001, Limit: 5, MaxBytes: 1 << 10})
	require.NoError(t, err)
	_, whole, err := fs.ReadTextVersion(ctx, target(t, fs, "good.txt"))
	require.NoError(t, err)
	assert.Equal(t, whole, info, "the version and size of every byte")
	assert.Equal(t, 20002, win.TotalLines)
	assert.Equal(t, []provider.WindowLine{{Number: 20001, Text: "日本語テキスト"}, {Number: 20002, Text: "last"}}, win.Lines)
}
