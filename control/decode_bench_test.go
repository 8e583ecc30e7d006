package control

import (
	"encoding/json"
	"testing"

	"github.com/dshmount/dshmount/internal/provider"
)

// bigReadResult is the fs.read result of bigText, every line.
func bigReadResult() ReadResult {
	win := provider.NewWindower(provider.TextWindow{Offset: 1, Limit: 1 << 20, MaxBytes: 2 << 20})
	win.Write([]byte(bigText()))
	r := win.Result()
	return ReadResult{DisplayPath: "big.txt", Version: "c1-0123", Offset: 1, Lines: r.Lines, TotalLines: r.TotalLines}
}

// BenchmarkReadResult_Encode measures the daemon's encoding of a 1 MiB read.
func BenchmarkReadResult_Encode(b *testing.B) {
	r := bigReadResult()
	b.ReportAllocs()
	for b.Loop() {
		_ = encodeResponse(json.RawMessage("7"), r, nil)
	}
}

// BenchmarkReadResult_Decode measures the client's decoding of a 1 MiB read
// response line: the fast pass, then encoding/json as it was.
func BenchmarkReadResult_Decode(b *testing.B) {
	line := encodeResponse(json.RawMessage("7"), bigReadResult(), nil)
	b.Run("fast", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		b.ReportAllocs()
		fast := func(uint64) fastResult { return readResultDecoder }
		text := string(line) // the client's line reader gives a string
		for b.Loop() {
			d, err := decodeLine(text, fast)
			if err != nil || d.decoded == nil {
				b.Fatal("not decoded fast", err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		b.ReportAllocs()
		for b.Loop() {
			var in incoming
			var r ReadResult
			if json.Unmarshal(line, &in) != nil || json.Unmarshal(in.Result, &r) != nil {
				b.Fatal("decode")
			}
		}
	})
}

// mergedEditResult is the result of a merge: true fs.edit of a 1 MiB file
// of short lines (a newline to escape every few bytes), as
// BenchmarkMergeEdit1MiB_Socket's edit returns it.
func mergedEditResult() EditResult {
	before := numbered(1<<20/10, "\n")
	return EditResult{Version: "c1-new", Before: before, After: "line 10 by a\n" + before, Merged: true, MergedOver: "c1-over"}
}

// BenchmarkEditResult_Encode measures the daemon's encoding of a merged
// 1 MiB edit's result (its before and after texts).
func BenchmarkEditResult_Encode(b *testing.B) {
	r := mergedEditResult()
	b.ReportAllocs()
	for b.Loop() {
		_ = encodeResponse(json.RawMessage("7"), r, nil)
	}
}

// BenchmarkEditResult_Decode measures the client's decoding of that
// result's response line.
func BenchmarkEditResult_Decode(b *testing.B) {
	text := string(encodeResponse(json.RawMessage("7"), mergedEditResult(), nil))
	fast := func(uint64) fastResult { return editResultDecoder }
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		d, err := decodeLine(text, fast)
		if err != nil || d.decoded == nil {
			b.Fatal("not decoded fast", err)
		}
	}
}
