package provider

import (
	"bytes"
	"context"
	"unicode/utf8"
)

// TextWindow selects lines [Offset, Offset+Limit) of a text (1-based),
// keeping at most MaxBytes of line text: each line counts its bytes plus
// one for the newline.
type TextWindow struct {
	Offset   int
	Limit    int
	MaxBytes int64
}

// WindowLine is one numbered line of a window, without its line ending.
type WindowLine struct {
	Number int    `json:"number"`
	Text   string `json:"text"`
}

// WindowedText is a window of a text: the selected lines, the exact number
// of lines of the whole text, and whether MaxBytes cut the window short.
type WindowedText struct {
	Lines      []WindowLine
	TotalLines int
	Truncated  bool
}

// TextWindowReader is implemented by backends that read a window of a
// file's text with memory bounded by the window, whatever the file's size:
// the whole file is still read (its version and line count need every
// byte), but only the window is kept. Its text check is ReadText's.
type TextWindowReader interface {
	// ReadTextWindow is ReadTextVersion keeping only window w of the text.
	ReadTextWindow(ctx context.Context, t Target, w TextWindow) (WindowedText, Info, error)
}

// ReadWindow reads window w of t's text from fsys: streamed when fsys is a
// TextWindowReader, else read whole (ReadTextVersion, or a Stat then
// ReadText) and cut. A missing file is FS_NOT_FOUND.
func ReadWindow(ctx context.Context, fsys FileSystem, t Target, w TextWindow) (WindowedText, Info, error) {
	if r, ok := fsys.(TextWindowReader); ok {
		return r.ReadTextWindow(ctx, t, w)
	}
	var text string
	var info Info
	if r, ok := fsys.(TextVersionReader); ok {
		var err error
		if text, info, err = r.ReadTextVersion(ctx, t); err != nil {
			return WindowedText{}, info, err
		}
	} else {
		in, err := fsys.Stat(ctx, t)
		if err != nil {
			return WindowedText{}, Info{}, err
		}
		if in == nil {
			return WindowedText{}, Info{}, NewError(CodeNotFound, "read", t.DisplayPath, nil,
				"no such file; check the path, or write it to create it")
		}
		info = *in
		if text, err = fsys.ReadText(ctx, t); err != nil {
			return WindowedText{}, info, err
		}
	}
	win := NewWindower(w)
	win.Write([]byte(text))
	return win.Result(), info, nil
}

// Windower cuts a window out of a text written to it in pieces of any
// size. It keeps the selected lines (at most MaxBytes of them, plus the
// line being read, itself kept to at most MaxBytes+2 bytes) and counts
// every line. Lines lose a trailing carriage return. A first selected line
// longer than MaxBytes is cut at a UTF-8 boundary so a window always shows
// something.
type Windower struct {
	w       TextWindow
	lines   []WindowLine
	line    int    // number of the line being read (1-based)
	cur     []byte // its kept bytes, when it is selected
	over    bool   // it is longer than what is kept of it
	used    int64  // bytes of MaxBytes the kept lines cost
	done    bool   // no further line is kept
	cut     bool   // MaxBytes cut the window short
	partial bool   // bytes of the current line were written
}

// NewWindower starts a window w of an empty text.
func NewWindower(w TextWindow) *Windower {
	return &Windower{w: w, line: 1}
}

// Write adds the next piece of the text. p is not retained.
func (win *Windower) Write(p []byte) {
	for len(p) > 0 && !win.done {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			win.keep(p)
			win.partial = true
			return
		}
		win.keep(p[:i])
		win.endLine()
		p = p[i+1:]
	}
	if len(p) == 0 {
		return
	}
	// Past the window only counting is left.
	n := bytes.Count(p, []byte{'\n'})
	win.line += n
	win.partial = p[len(p)-1] != '\n'
}

// selected reports whether the current line is in the window and kept.
func (win *Windower) selected() bool {
	return !win.done && win.line >= win.w.Offset && win.line < win.w.Offset+win.w.Limit
}

// keep adds p, a piece of the current line, to what is kept of it.
func (win *Windower) keep(p []byte) {
	if !win.selected() || win.over {
		return
	}
	room := win.w.MaxBytes - win.used + 2 - int64(len(win.cur))
	if int64(len(p)) > room {
		p = p[:max(room, 0)]
		win.over = true
	}
	win.cur = append(win.cur, p...)
}

// endLine ends the current line at a newline.
func (win *Windower) endLine() {
	if win.selected() {
		win.take()
	}
	win.line++
	win.partial = false
	if win.line >= win.w.Offset+win.w.Limit {
		win.done = true
	}
}

// take keeps the current, selected line, or ends the window when it does
// not fit.
func (win *Windower) take() {
	text := bytes.TrimSuffix(win.cur, []byte{'\r'})
	win.cur, win.over = win.cur[:0], false
	cost := int64(len(text)) + 1
	if win.used+cost > win.w.MaxBytes {
		win.cut, win.done = true, true
		if len(win.lines) == 0 {
			win.lines = append(win.lines, WindowLine{Number: win.line, Text: string(cutUTF8(text, win.w.MaxBytes))})
		}
		return
	}
	win.used += cost
	win.lines = append(win.lines, WindowLine{Number: win.line, Text: string(text)})
}

// Result ends the text and returns the window.
func (win *Windower) Result() WindowedText {
	total := win.line - 1
	if win.partial {
		total++
		if win.selected() {
			win.take()
		}
		win.partial = false
		win.line++
	}
	lines := win.lines
	if lines == nil {
		lines = []WindowLine{}
	}
	return WindowedText{Lines: lines, TotalLines: total, Truncated: win.cut}
}

// cutUTF8 returns the longest prefix of s of at most n bytes that ends on a
// rune boundary.
func cutUTF8(s []byte, n int64) []byte {
	if int64(len(s)) <= n {
		return s
	}
	cut := int(n)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
