package control

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// referenceDecode is what the client did before decodeLine: encoding/json
// on the line, then on the result into a ReadResult.
func referenceDecode(line []byte) (in incoming, r *ReadResult, lineErr, resultErr error) {
	if lineErr = json.Unmarshal(line, &in); lineErr != nil {
		return in, nil, lineErr, nil
	}
	if in.Result == nil {
		return in, nil, nil, nil
	}
	r = new(ReadResult)
	if resultErr = json.Unmarshal(in.Result, r); resultErr != nil {
		r = nil
	}
	return in, r, nil, resultErr
}

// checkDecodeLine asserts decodeLine gives what encoding/json gives: the
// same line error, the same envelope, and a fast-decoded result only where
// encoding/json decodes the same ReadResult.
func checkDecodeLine(t *testing.T, line []byte) (fast bool) {
	t.Helper()
	in, want, lineErr, resultErr := referenceDecode(line)
	d, err := decodeLine(string(line), func(uint64) fastResult { return readResultDecoder })
	if lineErr != nil {
		require.Error(t, err, "line %q", line)
		return false
	}
	require.NoError(t, err, "line %q", line)
	assert.Equal(t, in.ID, d.in.ID, "id of %q", line)
	assert.Equal(t, in.Method, d.in.Method, "method of %q", line)
	assert.Equal(t, in.Params, d.in.Params, "params of %q", line)
	assert.Equal(t, in.Error, d.in.Error, "error of %q", line)
	id, hasID := parseID(in.ID)
	assert.Equal(t, hasID, d.hasID, "id of %q", line)
	assert.Equal(t, id, d.id, "id of %q", line)
	if d.decoded == nil {
		assert.Equal(t, in.Result, d.in.Result, "raw result of %q", line)
		return false
	}
	require.NoError(t, resultErr, "fast decoded a result encoding/json refuses: %q", line)
	assert.Nil(t, d.in.Result, "fast decoded result kept raw too: %q", line)
	assert.Equal(t, want, d.decoded, "result of %q", line)
	return true
}

// TestDecode_ReadResultLineMatchesEncodingJSON pins the fast path to
// encoding/json on the daemon's own encoding of tricky texts.
func TestDecode_ReadResultLineMatchesEncodingJSON(t *testing.T) {
	texts := []string{"", "plain", `quote " and \ backslash`, "tab\tcr\r", "ctl \x00\x01\x1f\x7f",
		"<html> & more", "é ü 日本語 🙂", "sep \u2028 \u2029", "bad \xff\xfe utf8", "mixed \xc3",
		strings.Repeat("long line without anything special ", 40), "\b\f/"}
	for _, text := range texts {
		r := ReadResult{DisplayPath: "dir/" + text, Version: "c1-abc", Offset: 3, TotalLines: 9,
			TruncatedByBytes: len(text)%2 == 0, Lines: []Line{{Number: 3, Text: text}, {Number: 4, Text: text + text}}}
		line := encodeResponse(json.RawMessage("12"), r, nil)
		assert.True(t, checkDecodeLine(t, line), "the daemon's encoding of %q takes the fast path", text)
	}
}

// TestDecode_OtherShapesMatchEncodingJSON feeds hand-written lines: other
// key orders, spaces, escapes the daemon never writes, nulls, repeated and
// unknown keys, wrong types and broken JSON.
func TestDecode_OtherShapesMatchEncodingJSON(t *testing.T) {
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"result":{"lines":[{"text":"a","number":1}],"offset":1,"totalLines":1,"version":"v","displayPath":"p"}}`,
		` { "result" : { "lines" : [ { "number" : 1 , "text" : "a" } ] } , "id" : 2 } `,
		`{"id":3,"result":{"lines":[{"number":1,"text":"\ud83d\ude00 \ud83d x \udc00\u0041 \/ \"\\"}]}}`,
		`{"id":4,"result":{"lines":null,"version":null,"truncatedByBytes":null}}`,
		`{"id":5,"result":{"lines":[{"number":1,"text":"a"}],"lines":[{"number":2}]}}`,
		`{"id":6,"result":{"Lines":[{"Number":1,"Text":"a"}]}}`,
		`{"id":7,"result":{"offset":1.5}}`,
		`{"id":8,"result":{"offset":"1"}}`,
		`{"id":9,"result":{"offset":99999999999999999999}}`,
		`{"id":10,"result":{"offset":-7,"totalLines":1e2}}`,
		`{"id":11,"result":{"lines":[null]}}`,
		`{"id":12,"result":{"lines":[{"number":1,"text":"a"}],}}`,
		`{"id":13,"result":{"lines":[{"number":01}]}}`,
		`{"id":14,"result":{"lines":[{"number":1,"text":"a` + "\x01" + `"}]}}`,
		`{"id":15,"result":{"displayPath":"` + "\xff" + `"}}`,
		`{"id":16,"result":{"unknown":{"deep":[1,2,{"x":null}]},"offset":2}}`,
		`{"id":17,"result":null}`,
		`{"id":18,"error":{"code":-32000,"message":"m","data":{"code":"FS_STALE_VERSION"}}}`,
		`{"id":19,"error":{"code":1,"message":"a"},"error":{"message":"b"}}`,
		`{"id":null,"error":{"code":-32600,"message":"refused"}}`,
		`{"jsonrpc":"2.0","method":"fs.changed","params":{"watch":"w1"}}`,
		`{"method":null,"id":"x"}`,
		`{"ID":20,"result":{}}`,
		`{"id":21,"result":{"lines":[]}} trailing`,
		`{"id":22,"result":{"lines":[{"number":1,"text":"\x"}]}}`,
		`{"id":23,"result":{"lines":[{"number":1,"text":"\u12"}]}}`,
		`{"id":24,"result":{"truncatedByBytes":true,"truncatedByBytes":false}}`,
		`{"id":25,"result":{"truncatedByBytes":1}}`,
		`{"id":26,"result":{"lines":[{"number":1,"text":"a"}]}`,
		`{"id":27,"result":{"lines":[{"number":-0,"text":""}]}}`,
		`{"id":28,"result":{"lines":[{"number":1,"text":"é` + "\xc3" + `"}]}}`,
		`[]`, `null`, `"x"`, ``, `{`, `{"id":1,}`, `{"id":1 "result":2}`, `{"id":[1,{"a":[true,false,null,-1.5e+3]}]}`,
	}
	fast := 0
	for _, l := range lines {
		if checkDecodeLine(t, []byte(l)) {
			fast++
		}
	}
	assert.Greater(t, fast, 5, "the well-formed shapes take the fast path")
}

// TestDecode_EditResultMatchesEncodingJSON pins fs.edit's fast decoder to
// encoding/json: the daemon's own encoding takes the fast path, and other
// shapes either decode the same or fall back.
func TestDecode_EditResultMatchesEncodingJSON(t *testing.T) {
	var lines []string
	for _, text := range []string{"", "a\nb\n", `quote " \`, "ctl \x00\x1f", "<&>", "é 🙂 \u2028", "bad \xff"} {
		for _, merged := range []bool{false, true} {
			r := EditResult{Version: "c1-new", Before: text + "x\n", After: text, Merged: merged}
			if merged {
				r.MergedOver = "c1-over"
			}
			lines = append(lines, string(encodeResponse(json.RawMessage("5"), r, nil)))
		}
	}
	daemon := len(lines)
	lines = append(lines,
		`{"id":6,"result":{"after":"a","version":"v","before":null,"merged":null}}`,
		`{"id":7,"result":{"version":"v","Version":"w"}}`,
		`{"id":8,"result":{"version":"v","version":"w"}}`,
		`{"id":9,"result":{"merged":1}}`,
		`{"id":10,"result":{"extra":true}}`,
		`{"id":11,"result":{"before":"\ud83d\ude00 \ud83d"}}`,
	)
	for i, l := range lines {
		var in incoming
		require.NoError(t, json.Unmarshal([]byte(l), &in), l)
		var want EditResult
		wantErr := json.Unmarshal(in.Result, &want)
		d, err := decodeLine(l, func(uint64) fastResult { return editResultDecoder })
		require.NoError(t, err, l)
		if i < daemon {
			require.NotNil(t, d.decoded, "the daemon's encoding takes the fast path: %s", l)
		}
		if d.decoded == nil {
			assert.Equal(t, in.Result, d.in.Result, "raw result of %s", l)
			continue
		}
		require.NoError(t, wantErr, "fast decoded a result encoding/json refuses: %s", l)
		assert.Equal(t, &want, d.decoded, "result of %s", l)
	}
}

// FuzzDecodeLine checks decodeLine against encoding/json on any line.
func FuzzDecodeLine(f *testing.F) {
	r := ReadResult{DisplayPath: "a<b", Version: "c1-x", Offset: 1, TotalLines: 2,
		Lines: []Line{{Number: 1, Text: "x\t\"y\" é"}, {Number: 2, Text: ""}}}
	f.Add(encodeResponse(json.RawMessage("1"), r, nil))
	f.Add([]byte(`{"id":3,"result":{"lines":[{"number":1,"text":"\ud83d\ude00 \ud83d"}]}}`))
	f.Add([]byte(`{"id":null,"error":{"code":1,"message":"m"}}`))
	f.Add([]byte(`{"method":"fs.changed","params":{}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		checkDecodeLine(t, line)
	})
}

// TestJSONString_SpecialByteAtEveryPosition moves each byte that needs a
// look of its own through every position of a long string, so the
// eight-bytes-at-a-time paths of the encoder and the decoder meet it in
// every lane and in the tail.
func TestJSONString_SpecialByteAtEveryPosition(t *testing.T) {
	specials := []string{"\x00", "\x1f", "\t", "\n", `"`, `\`, "<", ">", "&", "\x7f", "é", "\xff", "\u2028", "🙂"}
	base := "abcdefghijklmnopqrstuvwxyz0123"
	for _, sp := range specials {
		for i := 0; i <= len(base); i++ {
			text := base[:i] + sp + base[i:]
			want, err := json.Marshal(text)
			require.NoError(t, err)
			require.Equal(t, string(want), string(appendJSONString(nil, text)), "encode %q", text)
			got, end, ok := readString(string(want), 0)
			require.True(t, ok, "decode %s", want)
			require.Equal(t, len(want), end)
			var ref string
			require.NoError(t, json.Unmarshal(want, &ref))
			require.Equal(t, ref, got, "decode %s", want)
			// The raw byte in a string as another encoder might send it.
			raw := `"` + text + `"`
			var rawRef string
			rawErr := json.Unmarshal([]byte(raw), &rawRef)
			got, end, ok = readString(raw, 0)
			if rawErr != nil {
				require.False(t, ok && end == len(raw), "decode raw %q", raw)
				continue
			}
			require.Equal(t, len(raw), end)
			require.True(t, ok, "decode raw %q", raw)
			require.Equal(t, rawRef, got, "decode raw %q", raw)
		}
	}
}

// TestLineReader_TextMatchesBytes reads the same stream as strings and as
// bytes: lines shorter and longer than one read buffer, an empty line and
// an unterminated last line.
func TestLineReader_TextMatchesBytes(t *testing.T) {
	lines := []string{"short", strings.Repeat("x", readBufferSize-1), strings.Repeat("y", 3*readBufferSize+17), "", "last"}
	stream := strings.Join(lines, "\n")
	asBytes := newLineReader(strings.NewReader(stream), 1<<30)
	asText := newLineReader(strings.NewReader(stream), 1<<30)
	asText.asText = true
	for i, want := range lines {
		b, err := asBytes.nextFrame()
		require.NoError(t, err)
		s, err := asText.nextFrame()
		require.NoError(t, err)
		assert.Equal(t, want, string(b.line), "line %d as bytes", i)
		assert.Equal(t, want, s.text, "line %d as text", i)
		assert.Nil(t, s.line, "line %d as text has no bytes", i)
	}
	_, err := asText.nextFrame()
	require.ErrorIs(t, err, io.EOF)
}

// readString checks and decodes a string with escapes in one pass:
// accepted exactly when encoding/json accepts it, to the same value.
func TestReadString_EscapedStringsDecodeAsEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`"a\nb\nc\n"`, `"\"quoted\" then more"`, `"\ud83d\ude00 pair"`, `"\ud83d lone"`, `"\ude00\ud83d"`,
		`"\ud83d\u00e9"`, `"\ud83d\uZZZZ"`, `"bad \x"`, `"\u12"`, "\"raw \xff byte \\n\"", "\"ctl \x01 \\n\"",
		`"\/\b\f\r\t\\"`, `"unterminated \n`, `"\`,
	} {
		var want string
		wantErr := json.Unmarshal([]byte(in), &want)
		got, end, ok := readString(in, 0)
		if wantErr != nil {
			assert.False(t, ok && end == len(in), "accepted %q", in)
			continue
		}
		assert.True(t, ok, "refused %q", in)
		assert.Equal(t, len(in), end, in)
		assert.Equal(t, want, got, in)
	}
}
