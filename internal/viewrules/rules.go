package viewrules

import (
	"fmt"
	"path"
	"strings"
)

// Rules are the path rules of a workspace view. Each entry is a glob on
// workspace-relative slash paths:
//
//   - A pattern without a slash ("*.key", ".git") matches a name at any
//     depth, as in .gitignore.
//   - A pattern with a slash ("build/out", "/vendor") is anchored at the
//     workspace root; a leading slash is optional and a trailing slash is
//     ignored.
//   - Each segment is a path.Match pattern ("*", "?", "[a-z]", "\\*"), and a
//     segment that is exactly "**" matches any number of segments,
//     including none.
//   - A pattern that matches a directory matches everything below it.
//
// Hidden paths do not exist in the view; read-only paths can be read but not
// changed. Hide wins over ReadOnly.
type Rules struct {
	Hide     []string // paths that do not exist in the view
	ReadOnly []string // paths that can be read but not changed
}

// Access is what the view allows on one path.
type Access int

// Access levels, from most to least permissive.
const (
	Visible  Access = iota // readable and writable
	ReadOnly               // readable, every mutation refused
	Hidden                 // does not exist in the view
)

// String names the access level.
func (a Access) String() string {
	switch a {
	case Visible:
		return "visible"
	case ReadOnly:
		return "read-only"
	case Hidden:
		return "hidden"
	default:
		return fmt.Sprintf("Access(%d)", int(a))
	}
}

// glob is one compiled pattern.
type glob struct {
	source   string   // the pattern as the user wrote it
	segments []string // path.Match segments, "**" for any number of segments
	anchored bool     // written with a slash: matches from the root only
}

// compileGlob validates and splits a pattern.
func compileGlob(pattern string) (glob, error) {
	p := strings.TrimSpace(pattern)
	if p == "" {
		return glob{}, fmt.Errorf("empty pattern %q", pattern)
	}
	anchored := strings.Contains(strings.TrimSuffix(p, "/"), "/")
	p = strings.Trim(p, "/")
	if p == "" {
		return glob{}, fmt.Errorf("pattern %q matches the workspace root; hide or protect paths inside it instead", pattern)
	}
	segs := strings.Split(p, "/")
	for _, s := range segs {
		switch s {
		case "":
			return glob{}, fmt.Errorf("pattern %q has an empty path segment", pattern)
		case ".", "..":
			return glob{}, fmt.Errorf("pattern %q has a %q segment; use workspace-relative paths", pattern, s)
		case "**":
			continue
		}
		if _, err := path.Match(s, ""); err != nil {
			return glob{}, fmt.Errorf("pattern %q: bad segment %q: %w", pattern, s, err)
		}
	}
	if !anchored {
		segs = append([]string{"**"}, segs...)
	}
	return glob{source: pattern, segments: segs, anchored: anchored}, nil
}

// matchesPrefix reports whether the glob matches the path given by segs or
// any of its parent directories.
func (g glob) matchesPrefix(segs []string) bool {
	for n := 1; n <= len(segs); n++ {
		if matchSegments(g.segments, segs[:n]) {
			return true
		}
	}
	return false
}

// matchSegments matches pattern segments against path segments exactly.
func matchSegments(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			rest := pat[1:]
			for i := 0; i <= len(segs); i++ {
				if matchSegments(rest, segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		ok, err := path.Match(pat[0], segs[0])
		if err != nil || !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}

// stackSegs is how many path segments the rule checks keep on the stack:
// every FUSE request classifies its path, and a clean path that deep is
// classified without allocating.
const stackSegs = 32

// splitRel appends the segments of a workspace-relative path to buf; the
// root ("", ".", "/") has none. A clean path (what the mount passes) is cut
// in place: its segments share its bytes.
func splitRel(buf []string, rel string) []string {
	if !cleanRel(rel) {
		rel = path.Clean("/" + strings.ReplaceAll(rel, "\\", "/"))
		rel = strings.TrimPrefix(rel, "/")
	}
	if rel == "" {
		return buf
	}
	for {
		i := strings.IndexByte(rel, '/')
		if i < 0 {
			return append(buf, rel)
		}
		buf = append(buf, rel[:i])
		rel = rel[i+1:]
	}
}

// cleanRel reports whether rel is already in the form splitRel cuts: no
// backslash, no leading or trailing slash, no empty, "." or ".." segment.
func cleanRel(rel string) bool {
	if strings.IndexByte(rel, '\\') >= 0 {
		return false
	}
	start := 0
	for i := 0; i <= len(rel); i++ {
		if i < len(rel) && rel[i] != '/' {
			continue
		}
		if seg := rel[start:i]; (seg == "" && len(rel) > 0) || seg == "." || seg == ".." {
			return false
		}
		start = i + 1
	}
	return true
}

// ruleSet is the compiled form of Rules.
type ruleSet struct {
	hide     []glob
	readOnly []glob
}

// compileRules validates every pattern of r.
func compileRules(r Rules) (ruleSet, error) {
	hide, err := compileGlobs("hide", r.Hide)
	if err != nil {
		return ruleSet{}, err
	}
	readOnly, err := compileGlobs("read-only", r.ReadOnly)
	if err != nil {
		return ruleSet{}, err
	}
	return ruleSet{hide: hide, readOnly: readOnly}, nil
}

// compileGlobs compiles the patterns of the flag --name.
func compileGlobs(name string, patterns []string) ([]glob, error) {
	var out []glob
	for _, p := range patterns {
		g, err := compileGlob(p)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", name, err)
		}
		out = append(out, g)
	}
	return out, nil
}

// Matcher matches workspace-relative paths against globs written as in
// Rules (serve --unguarded): a path matches when it, or a directory above
// it, matches one of them.
type Matcher struct{ globs []glob }

// NewMatcher compiles the patterns of the flag --name (named in errors).
func NewMatcher(name string, patterns []string) (*Matcher, error) {
	globs, err := compileGlobs(name, patterns)
	if err != nil {
		return nil, err
	}
	return &Matcher{globs: globs}, nil
}

// Match reports whether rel matches. The root never does.
func (m *Matcher) Match(rel string) bool {
	var buf [stackSegs]string
	segs := splitRel(buf[:0], rel)
	if len(segs) == 0 {
		return false
	}
	for _, g := range m.globs {
		if g.matchesPrefix(segs) {
			return true
		}
	}
	return false
}

// classify returns the access of rel and the pattern that decided it ("" for
// Visible).
func (rs ruleSet) classify(rel string) (Access, string) {
	var buf [stackSegs]string
	segs := splitRel(buf[:0], rel)
	if len(segs) == 0 {
		return Visible, ""
	}
	for _, g := range rs.hide {
		if g.matchesPrefix(segs) {
			return Hidden, g.source
		}
	}
	for _, g := range rs.readOnly {
		if g.matchesPrefix(segs) {
			return ReadOnly, g.source
		}
	}
	return Visible, ""
}

// mayMatchBelow reports whether the glob can match a path strictly below
// the directory segs. Unanchored globs match names at any depth, so they
// keep matching wherever the directory is moved; only anchored ones can be
// escaped by moving an ancestor.
func (g glob) mayMatchBelow(segs []string) bool {
	if !g.anchored {
		return false
	}
	return prefixCanMatch(g.segments, segs)
}

// prefixCanMatch reports whether pattern segments can match some path that
// has segs as a proper prefix.
func prefixCanMatch(pat, segs []string) bool {
	for len(segs) > 0 {
		if len(pat) == 0 {
			return false
		}
		if pat[0] == "**" {
			return true
		}
		ok, err := path.Match(pat[0], segs[0])
		if err != nil || !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(pat) > 0
}

// guardsBelow returns the strongest access of the anchored rules that
// could match below the directory rel, and the pattern.
func (rs ruleSet) guardsBelow(rel string) (Access, string) {
	var buf [stackSegs]string
	segs := splitRel(buf[:0], rel)
	for _, g := range rs.hide {
		if g.mayMatchBelow(segs) {
			return Hidden, g.source
		}
	}
	for _, g := range rs.readOnly {
		if g.mayMatchBelow(segs) {
			return ReadOnly, g.source
		}
	}
	return Visible, ""
}
