package control

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

func TestEncode_ReadResultMatchesEncodingJSON(t *testing.T) {
	texts := []string{"", "plain", `quote " and \ backslash`, "tab\tcr\r", "ctl \x00\x01\x1f\x7f",
		"<html> & more", "é ü 日本語 🙂", "sep \u2028 \u2029", "bad \xff\xfe utf8", "mixed \xc3"}
	for _, text := range texts {
		t.Run(text, func(t *testing.T) {
			r := ReadResult{DisplayPath: "dir/" + text, Version: "v1:" +
				"abc", Offset: 3, TotalLines: 9, TruncatedByBytes: len(text)%2 == 0,
				Lines: []Line{{Number: 3, Text: text}, {Number: 4, Text: text + text}}}
			want, err := json.Marshal(r)
			require.NoError(t, err)
			assert.Equal(t, string(want), string(readEncoded(r).appendJSON(nil)))
		})
	}
}

// TestEncode_ChangeResultsMatchEncodingJSON pins the appenders of fs.edit's
// and fs.write's results (their texts are whole files) to json.Marshal.
func TestEncode_ChangeResultsMatchEncodingJSON(t *testing.T) {
	texts := []string{"", "plain\nlines\n", `quote " and \ backslash`, "tab\tcr\r\n", "ctl \x00\x01\x1f\x7f",
		"<html> & more", "é ü 日本語 🙂", "sep \u2028 \u2029", "bad \xff\xfe utf8", "mixed \xc3"}
	for _, text := range texts {
		before := text + "<"
		results := []jsonAppender{
			editJSON{Version: "c1-a", Before: before, After: text},
			editJSON{Version: "c1-a", Before: before, After: text, Merged: true, MergedOver: "c1-" + provider.Version(text)},
			writeJSON{Operation: provider.OpUpdate, Version: "c1-b", Before: &before, After: text},
			writeJSON{Operation: provider.OpCreate, Version: "c1-b", After: text, Merged: true, MergedOver: "c1-z"},
		}
		for _, r := range results {
			want, err := json.Marshal(r)
			require.NoError(t, err)
			assert.Equal(t, string(want), string(r.appendJSON(nil)), "%#v", r)
		}
	}
}

func TestEncode_FastResponseMatchesEnvelope(t *testing.T) {
	r := ReadResult{DisplayPath: "a", Lines: []Line{}}
	for _, id := range []string{`7`, `"abc"`, `"a\u003cb"`, `null`} {
		fast := encodeResponse(json.RawMessage(id), r, nil)
		res, err := json.Marshal(r)
		require.NoError(t, err)
		slow, err := json.Marshal(response{JSONRPC: jsonrpcVersion, ID: json.RawMessage(id), Result: res})
		require.NoError(t, err)
		assert.JSONEq(t, string(slow), string(fast), "id %s", id)
	}
}
