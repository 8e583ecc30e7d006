package patch

import (
	"fmt"
	"strings"
)

// Markers of the patch language.
const (
	beginMarker   = "*** Begin Patch"
	endMarker     = "*** End Patch"
	addMarker     = "*** Add File: "
	deleteMarker  = "*** Delete File: "
	updateMarker  = "*** Update File: "
	moveMarker    = "*** Move to: "
	eofMarker     = "*** End of File"
	noAnchor      = "@@"
	anchorPrefix  = "@@ "
	firstLineMsg  = "the first line of the patch must be '*** Begin Patch'"
	lastLineMsg   = "the last line of the patch must be '*** End Patch'"
	emptyChunkMsg = "update hunk does not contain any lines"
)

// SyntaxError reports a patch text that does not follow the grammar.
type SyntaxError struct {
	Line    int    // 1-based line of the (trimmed) patch text
	Message string // what was expected
}

// Error returns "invalid patch at line N: MESSAGE".
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid patch at line %d: %s", e.Line, e.Message)
}

// Parse parses a complete patch text into its ordered file operations:
// *Add, *Delete and *Update. Paths are kept as written. A patch with no
// operation parses to an empty list (applying it is ErrNoOperations). A text
// that does not follow the grammar returns a *SyntaxError naming the line,
// counted from the first line of the text trimmed of surrounding white space.
func Parse(text string) ([]Operation, error) {
	lines := patchLines(strings.TrimSpace(text))
	body, base, err := envelope(lines)
	if err != nil {
		return nil, err
	}
	p := parser{lines: body, base: base}
	return p.operations()
}

// patchLines splits trimmed patch text on LF, dropping a CR before each LF.
func patchLines(text string) []string {
	if text == "" {
		return nil
	}
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

// envelope checks the Begin/End markers, unwrapping a literal heredoc, and
// returns the lines between the markers with the 1-based number of the first.
func envelope(lines []string) ([]string, int, error) {
	err := checkMarkers(lines, 0)
	if err == nil {
		return lines[1 : len(lines)-1], 2, nil
	}
	n := len(lines)
	if n >= 4 && isHeredocStart(lines[0]) && strings.HasSuffix(lines[n-1], "EOF") {
		inner := lines[1 : n-1]
		if err := checkMarkers(inner, 1); err != nil {
			return nil, 0, err
		}
		return inner[1 : len(inner)-1], 3, nil
	}
	return nil, 0, err
}

// isHeredocStart reports the three literal heredoc openers agents send.
func isHeredocStart(line string) bool {
	return line == "<<EOF" || line == "<<'EOF'" || line == `<<"EOF"`
}

// checkMarkers checks the first and last line; offset is the number of patch
// lines before lines[0].
func checkMarkers(lines []string, offset int) error {
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != beginMarker {
		return &SyntaxError{Line: offset + 1, Message: firstLineMsg}
	}
	if len(lines) < 2 || strings.TrimSpace(lines[len(lines)-1]) != endMarker {
		return &SyntaxError{Line: offset + len(lines), Message: lastLineMsg}
	}
	return nil
}

// parser walks the lines between the envelope markers.
type parser struct {
	lines []string
	base  int // 1-based patch line of lines[0]
	i     int // next line to read
}

// lineNo returns the 1-based patch line of lines[i].
func (p *parser) lineNo(i int) int { return p.base + i }

func (p *parser) errorf(i int, format string, args ...any) error {
	return &SyntaxError{Line: p.lineNo(i), Message: fmt.Sprintf(format, args...)}
}

func (p *parser) operations() ([]Operation, error) {
	ops := []Operation{}
	for p.i < len(p.lines) {
		op, err := p.operation()
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// operation parses one header and what belongs to it.
func (p *parser) operation() (Operation, error) {
	at := p.i
	header := strings.TrimSpace(p.lines[at])
	p.i++
	if path, ok := strings.CutPrefix(header, addMarker); ok {
		return p.add(path, at), nil
	}
	if path, ok := strings.CutPrefix(header, deleteMarker); ok {
		return &Delete{Path: path, Line: p.lineNo(at)}, nil
	}
	if path, ok := strings.CutPrefix(header, updateMarker); ok {
		return p.update(path, at)
	}
	return nil, p.errorf(at, "'%s' is not a valid hunk header; valid headers are "+
		"'*** Add File: {path}', '*** Delete File: {path}', '*** Update File: {path}'", header)
}

// add collects the '+' lines of an Add File section.
func (p *parser) add(path string, at int) *Add {
	var b strings.Builder
	for p.i < len(p.lines) {
		text, ok := strings.CutPrefix(p.lines[p.i], "+")
		if !ok {
			break
		}
		b.WriteString(text)
		b.WriteByte('\n')
		p.i++
	}
	return &Add{Path: path, Line: p.lineNo(at), Content: b.String()}
}

// update collects the optional Move to line and the chunks of an Update
// File section, which ends at the next line beginning with '*'.
func (p *parser) update(path string, at int) (*Update, error) {
	u := &Update{Path: path, Line: p.lineNo(at)}
	if p.i < len(p.lines) {
		if to, ok := strings.CutPrefix(p.lines[p.i], moveMarker); ok {
			u.MoveTo = to
			p.i++
		}
	}
	for p.i < len(p.lines) {
		line := p.lines[p.i]
		if strings.TrimSpace(line) == "" {
			p.i++
			continue
		}
		if strings.HasPrefix(line, "*") {
			break
		}
		h, err := p.chunk(len(u.Hunks) == 0)
		if err != nil {
			return nil, err
		}
		u.Hunks = append(u.Hunks, h)
	}
	if len(u.Hunks) == 0 {
		return nil, p.errorf(at, "update file hunk for path '%s' is empty", path)
	}
	return u, nil
}

// chunk parses one chunk; the first chunk of an Update may omit its @@ line.
func (p *parser) chunk(first bool) (Hunk, error) {
	at := p.i
	h := Hunk{Line: p.lineNo(at)}
	line := p.lines[at]
	switch {
	case line == noAnchor:
		p.i++
	case strings.HasPrefix(line, anchorPrefix):
		h.Context, h.HasContext = line[len(anchorPrefix):], true
		p.i++
	case !first:
		return Hunk{}, p.errorf(at, "expected update hunk to start with a @@ context marker, got: '%s'", line)
	}
	start := p.i
	if start >= len(p.lines) {
		return Hunk{}, p.errorf(start, emptyChunkMsg)
	}
	for ; p.i < len(p.lines); p.i++ {
		line := p.lines[p.i]
		if line == eofMarker {
			if p.i == start {
				return Hunk{}, p.errorf(p.i, emptyChunkMsg)
			}
			h.IsEndOfFile = true
			p.i++
			break
		}
		if line == "" {
			h.OldLines = append(h.OldLines, "")
			h.NewLines = append(h.NewLines, "")
			continue
		}
		switch text := line[1:]; line[0] {
		case ' ':
			h.OldLines = append(h.OldLines, text)
			h.NewLines = append(h.NewLines, text)
			continue
		case '-':
			h.OldLines = append(h.OldLines, text)
			continue
		case '+':
			h.NewLines = append(h.NewLines, text)
			continue
		}
		if p.i == start {
			return Hunk{}, p.errorf(p.i, "unexpected line found in update hunk: '%s'. Every line "+
				"should start with ' ' (context line), '+' (added line), or '-' (removed line)", line)
		}
		break
	}
	return h, nil
}
