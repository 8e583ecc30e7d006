package control

import (
	"encoding/binary"
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

// The eight-byte masks jump to their lowest flag: it must be the first
// byte that needs a look of its own, whatever lies above it (a borrow
// may flag bytes above a true one, never below).
func TestMask8_LowestFlagIsTheFirstSpecialByte(t *testing.T) {
	masks := []struct {
		name    string
		mask    func(uint64) uint64
		special func(byte) bool
	}{
		{"specialMask8", specialMask8, func(c byte) bool { return !plainByte(c) }},
		{"htmlSpecialMask8", htmlSpecialMask8, func(c byte) bool { return !htmlSafeByte(c) }},
	}
	above := []byte{'a', 0x00, '"', '\\', 0xff, '<', 0x1f}
	for _, m := range masks {
		t.Run(m.name, func(t *testing.T) {
			for lane := range 8 {
				for c := range 256 {
					for _, up := range above {
						var w [8]byte
						for k := range w {
							switch {
							case k < lane:
								w[k] = 'a'
							case k == lane:
								w[k] = byte(c)
							default:
								w[k] = up
							}
						}
						got := m.mask(binary.LittleEndian.Uint64(w[:]))
						if m.special(byte(c)) {
							require.NotZero(t, got, "lane %d byte %#x", lane, c)
							require.Equal(t, lane, firstFlagged(got), "lane %d byte %#x, %#x above", lane, c, up)
						} else if got != 0 {
							require.Greater(t, firstFlagged(got), lane, "lane %d byte %#x flagged, %#x above", lane, c, up)
						}
					}
				}
			}
		})
	}
}
