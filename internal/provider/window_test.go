package provider_test

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/internal/provider"
)

// wholeWindow is the window of a text held whole in memory, as fs.read cut
// it before reads were streamed: the reference the Windower must match.
func wholeWindow(text string, w provider.TextWindow) provider.WindowedText {
	total := strings.Count(text, "\n")
	if text != "" && !strings.HasSuffix(text, "\n") {
		total++
	}
	out := provider.WindowedText{Lines: []provider.WindowLine{}, TotalLines: total}
	rest := text
	var used int64
	for n := 1; n < w.Offset+w.Limit && rest != ""; n++ {
		line := rest
		if i := strings.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = ""
		}
		if n < w.Offset {
			continue
		}
		line = strings.TrimSuffix(line, "\r")
		cost := int64(len(line)) + 1
		if used+cost > w.MaxBytes {
			out.Truncated = true
			if len(out.Lines) == 0 {
				cut := min(int(w.MaxBytes), len(line))
				for cut < len(line) && cut > 0 && !utf8.RuneStart(line[cut]) {
					cut--
				}
				out.Lines = append(out.Lines, provider.WindowLine{Number: n, Text: line[:cut]})
			}
			break
		}
		used += cost
		out.Lines = append(out.Lines, provider.WindowLine{Number: n, Text: line})
	}
	return out
}

// windowInPieces writes text to a Windower cut at random places.
func windowInPieces(r *rand.Rand, text string, w provider.TextWindow) provider.WindowedText {
	win := provider.NewWindower(w)
	for text != "" {
		n := min(1+r.IntN(9), len(text))
		if r.IntN(4) == 0 {
			n = len(text)
		}
		win.Write([]byte(text[:n]))
		text = text[n:]
	}
	return win.Result()
}

func TestWindower_MatchesTheWholeTextWindowInAnyPieces(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	atoms := []string{"a", "bc", "\n", "\r\n", "\r", "é", "日本", "🙂", "xxxxxxxxxxxxxxxxxxxx", "\n\n"}
	for i := 0; i < 5000; i++ {
		var b strings.Builder
		for n := r.IntN(30); n > 0; n-- {
			b.WriteString(atoms[r.IntN(len(atoms))])
		}
		text := b.String()
		w := provider.TextWindow{Offset: 1 + r.IntN(6), Limit: 1 + r.IntN(8), MaxBytes: int64(1 + r.IntN(40))}
		want := wholeWindow(text, w)
		got := windowInPieces(r, text, w)
		require.Equal(t, want, got, "text %q window %+v", text, w)
	}
}

func TestWindower_KeepsOnlyTheWindowOfAHugeLine(t *testing.T) {
	win := provider.NewWindower(provider.TextWindow{Offset: 1, Limit: 1, MaxBytes: 10})
	chunk := []byte(strings.Repeat("y", 1<<16))
	for i := 0; i < 64; i++ { // a 4 MiB first line
		win.Write(chunk)
	}
	win.Write([]byte("\nsecond\nthird"))
	got := win.Result()
	assert.Equal(t, []provider.WindowLine{{Number: 1, Text: strings.Repeat("y", 10)}}, got.Lines)
	assert.Equal(t, 3, got.TotalLines)
	assert.True(t, got.Truncated)
}
