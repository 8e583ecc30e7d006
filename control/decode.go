package control

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/dshmount/dshmount/internal/provider"
)

// The client's reading of the daemon's lines. encoding/json checks a whole
// line, decodes the envelope into raw messages (a copy of the result),
// then checks and decodes the result again by reflection: for a 1 MiB
// fs.read that is three passes and one allocation per line of the file.
// decodeLine reads the envelope in one strict pass over the line (read as
// a string) and, for the result types that have one (readResultDecoder),
// decodes the result in that same pass, its strings substrings of the
// line. Anything it does not expect (an unknown key, a key or value of an
// unusual shape) falls back to encoding/json on the whole line, so the
// outcome, and every error, is what encoding/json gives.

// fastResult decodes one result value at the start of src, returning the
// decoded value and the length read; ok false: not this shape (the caller
// falls back to encoding/json).
type fastResult func(src string) (v any, n int, ok bool)

// lineDecoder finds the fast decoder of the pending call with a given id.
type lineDecoder func(id uint64) fastResult

// decodedLine is one line from the daemon: the envelope, and the result
// already decoded when a fast decoder took it (in.Result is then nil).
type decodedLine struct {
	in      incoming
	id      uint64 // valid when hasID
	hasID   bool
	decoded any
}

// decodeLine decodes a line from the daemon, fast when it can.
func decodeLine(line string, fast lineDecoder) (decodedLine, error) {
	if d, ok := decodeLineFast(line, fast); ok {
		return d, nil
	}
	var d decodedLine
	if err := json.Unmarshal([]byte(line), &d.in); err != nil {
		return decodedLine{}, err
	}
	d.id, d.hasID = parseID(d.in.ID)
	return d, nil
}

// parseID reads a numeric request id (the client only sends those).
func parseID(raw json.RawMessage) (uint64, bool) {
	id, err := strconv.ParseUint(string(raw), 10, 64)
	return id, err == nil
}

// decodeLineFast is decodeLine's one strict pass; ok false: fall back.
func decodeLineFast(s string, fast lineDecoder) (d decodedLine, ok bool) {
	i := skipSpace(s, 0)
	var seen keySet
	i, ok = objectFields(s, i, func(key string, at int) (int, bool) {
		if !seen.add(key) {
			return at, false
		}
		switch key {
		case "jsonrpc":
			return skipValue(s, at)
		case "id":
			end, ok := skipValue(s, at)
			if ok {
				d.in.ID = json.RawMessage(s[at:end])
				d.id, d.hasID = parseID(d.in.ID)
			}
			return end, ok
		case "method":
			if isNull(s, at) {
				return at + len("null"), true
			}
			m, end, ok := readString(s, at)
			d.in.Method = m
			return end, ok
		case "params":
			end, ok := skipValue(s, at)
			d.in.Params = json.RawMessage(s[at:end])
			return end, ok
		case "result":
			d.in.Result, d.decoded = nil, nil
			if d.hasID && fast != nil {
				if dec := fast(d.id); dec != nil {
					if v, n, ok := dec(s[at:]); ok {
						d.decoded = v
						return at + n, true
					}
				}
			}
			end, ok := skipValue(s, at)
			d.in.Result = json.RawMessage(s[at:end])
			return end, ok
		case "error":
			end, ok := skipValue(s, at)
			if !ok {
				return end, false
			}
			d.in.Error = nil
			if isNull(s, at) {
				return end, true
			}
			var e ErrorObject
			if json.Unmarshal([]byte(s[at:end]), &e) != nil {
				return end, false
			}
			d.in.Error = &e
			return end, true
		}
		return at, false // a key encoding/json might match by case: its call
	})
	if !ok || skipSpace(s, i) != len(s) {
		return decodedLine{}, false
	}
	return d, true
}

// readResultDecoder is the fastResult of fs.read.
func readResultDecoder(src string) (any, int, bool) {
	r, n, ok := decodeReadResult(src, 0)
	if !ok {
		return nil, n, false
	}
	return &r, n, true
}

// decodeReadResult decodes a ReadResult at i, as json.Unmarshal into a
// zero ReadResult would.
func decodeReadResult(s string, i int) (r ReadResult, end int, ok bool) {
	var seen keySet
	end, ok = objectFields(s, i, func(key string, at int) (int, bool) {
		if !seen.add(key) {
			return at, false
		}
		if isNull(s, at) && key != "lines" {
			return at + len("null"), true // encoding/json leaves the field as it is
		}
		var end int
		var ok bool
		switch key {
		case "displayPath":
			r.DisplayPath, end, ok = readString(s, at)
		case "version":
			var v string
			v, end, ok = readString(s, at)
			r.Version = provider.Version(v)
		case "offset":
			r.Offset, end, ok = scanInt(s, at)
		case "totalLines":
			r.TotalLines, end, ok = scanInt(s, at)
		case "truncatedByBytes":
			r.TruncatedByBytes, end, ok = scanBool(s, at)
		case "observed":
			r.Observed, end, ok = scanBool(s, at)
		case "lines":
			r.Lines, end, ok = decodeLines(s, at)
		default:
			return at, false
		}
		return end, ok
	})
	return r, end, ok
}

// editResultDecoder is the fastResult of fs.edit (its before and after
// are whole files).
func editResultDecoder(src string) (any, int, bool) {
	var r EditResult
	var seen keySet
	end, ok := objectFields(src, 0, func(key string, at int) (int, bool) {
		if !seen.add(key) {
			return at, false
		}
		if isNull(src, at) {
			return at + len("null"), true // encoding/json leaves the field as it is
		}
		var v string
		var end int
		var ok bool
		switch key {
		case "version":
			v, end, ok = readString(src, at)
			r.Version = provider.Version(v)
		case "before":
			r.Before, end, ok = readString(src, at)
		case "after":
			r.After, end, ok = readString(src, at)
		case "merged":
			r.Merged, end, ok = scanBool(src, at)
		case "mergedOver":
			v, end, ok = readString(src, at)
			r.MergedOver = provider.Version(v)
		default:
			return at, false
		}
		return end, ok
	})
	if !ok {
		return nil, end, false
	}
	return &r, end, true
}

// scanBool decodes the JSON true or false at i.
func scanBool(s string, i int) (bool, int, bool) {
	if i < len(s) && s[i] == 't' {
		end, ok := skipLiteral(s, i, "true")
		return true, end, ok
	}
	end, ok := skipLiteral(s, i, "false")
	return false, end, ok
}

// decodeLines decodes the lines array at i (null: nil).
func decodeLines(s string, i int) ([]Line, int, bool) {
	if isNull(s, i) {
		return nil, i + len("null"), true
	}
	if i >= len(s) || s[i] != '[' {
		return nil, i, false
	}
	lines := make([]Line, 0, estimateLines(s, i))
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == ']' {
		return lines, i + 1, true
	}
	for {
		l, end, ok := decodeLineCompact(s, i)
		if !ok {
			l, end, ok = decodeLineObject(s, i)
		}
		if !ok {
			return nil, end, false
		}
		lines = append(lines, l)
		if i = skipSpace(s, end); i >= len(s) {
			return nil, i, false
		}
		switch s[i] {
		case ',':
			i = skipSpace(s, i+1)
		case ']':
			return lines, i + 1, true
		default:
			return nil, i, false
		}
	}
}

// decodeLineCompact decodes a Line at i written as the daemon writes it,
// {"number":N,"text":"…"}; ok false: another shape (decodeLineObject
// reads any).
func decodeLineCompact(s string, i int) (l Line, end int, ok bool) {
	const head, mid = `{"number":`, `,"text":`
	if !strings.HasPrefix(s[i:], head) {
		return l, i, false
	}
	if l.Number, end, ok = scanInt(s, i+len(head)); !ok || !strings.HasPrefix(s[end:], mid) {
		return l, end, false
	}
	if l.Text, end, ok = readString(s, end+len(mid)); !ok || end >= len(s) || s[end] != '}' {
		return l, end, false
	}
	return l, end + 1, true
}

// decodeLineObject decodes a Line object at i with its keys in any order.
func decodeLineObject(s string, i int) (l Line, end int, ok bool) {
	var seen keySet
	end, ok = objectFields(s, i, func(key string, at int) (int, bool) {
		if !seen.add(key) {
			return at, false
		}
		if isNull(s, at) {
			return at + len("null"), true
		}
		var end int
		var ok bool
		switch key {
		case "number":
			l.Number, end, ok = scanInt(s, at)
		case "text":
			l.Text, end, ok = readString(s, at)
		default:
			return at, false
		}
		return end, ok
	})
	return l, end, ok
}

// estimateLines guesses the number of lines in the array at i from the
// bytes left (a line of source and its envelope is rarely under 64 bytes),
// so the slice grows at most a few times.
func estimateLines(s string, i int) int {
	return min((len(s)-i)/64+1, 1<<16)
}

// keySet holds the keys of one object read so far. A key seen twice sends
// the line to encoding/json, whose handling of repeated keys (merging into
// what the first one decoded) the fast path does not copy; so does a ninth
// key (no object of the protocol has that many).
type keySet struct {
	keys [8]string
	n    int
}

// add records key; false when it was already there, or the set is full.
func (k *keySet) add(key string) bool {
	if k.n == len(k.keys) || slices.Contains(k.keys[:k.n], key) {
		return false
	}
	k.keys[k.n] = key
	k.n++
	return true
}
