package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The documents' tests keep README.md, ARCHITECTURE.md and docs/*.md honest:
// the command lines they show use verbs and flags that exist, the make
// targets they name are in the Makefile, their relative links resolve, the
// README stays short and the request walks name functions that exist.

// repoRoot is the module root, two directories above this package.
const repoRoot = "../.."

// maxReadmeLines bounds README.md: the rest belongs in docs/.
const maxReadmeLines = 250

// docFiles returns the Markdown documents the tests check.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{filepath.Join(repoRoot, "README.md"), filepath.Join(repoRoot, "ARCHITECTURE.md")}
	more, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, more, "docs/*.md")
	return append(files, more...)
}

// shLine is one logical line of a ```sh block (continuations joined).
type shLine struct {
	file string
	line int
	text string
}

// shLines returns the lines of the ```sh fenced blocks of md.
func shLines(md, file string) []shLine {
	var out []shLine
	in := false
	var cur *shLine
	for i, l := range strings.Split(md, "\n") {
		trim := strings.TrimSpace(l)
		if strings.HasPrefix(trim, "```") {
			in = !in && trim == "```sh"
			cur = nil
			continue
		}
		if !in {
			continue
		}
		if cur != nil {
			cur.text += " " + trim
		} else {
			out = append(out, shLine{file: file, line: i + 1, text: trim})
			cur = &out[len(out)-1]
		}
		if strings.HasSuffix(cur.text, "\\") {
			cur.text = strings.TrimSuffix(cur.text, "\\")
		} else {
			cur = nil
		}
	}
	return out
}

// shWords splits a shell command line into words, honouring quotes, and
// stops at a comment or at the end of the simple command (|, ;, &, &&, >, <).
func shWords(s string) []string {
	var words []string
	var w strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, w.String())
		}
		w.Reset()
		inWord = false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' || c == '"':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				j = len(s) - i - 1
			}
			w.WriteString(s[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case c == ' ' || c == '\t':
			flush()
		case c == '#' && !inWord:
			flush()
			return words
		case strings.IndexByte("|;&<>", c) >= 0:
			flush()
			return words
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return words
}

var (
	// flagDefLine is a flag in a flag.FlagSet's PrintDefaults.
	flagDefLine = regexp.MustCompile(`(?m)^  -([A-Za-z0-9][A-Za-z0-9-]*)`)
	// usageFlag is a flag named in a verb's Usage line (subcommand flags).
	usageFlag = regexp.MustCompile(`--?([A-Za-z][A-Za-z0-9-]*)`)
)

// flagsOf returns the flags `dshmount VERB --help` lists.
func flagsOf(t *testing.T, verb string) map[string]bool {
	t.Helper()
	help := helpOf(t, verb)
	flags := map[string]bool{"help": true, "h": true}
	for _, m := range flagDefLine.FindAllStringSubmatch(help, -1) {
		flags[m[1]] = true
	}
	for _, l := range strings.Split(help, "\n") {
		if strings.HasPrefix(l, "Usage: ") {
			for _, m := range usageFlag.FindAllStringSubmatch(l, -1) {
				flags[m[1]] = true
			}
		}
	}
	return flags
}

// commandProblems returns what is wrong with the dshmount command lines of
// the documents: an unknown verb or a flag its --help does not list.
func commandProblems(t *testing.T, lines []shLine) []string {
	t.Helper()
	verbs := map[string]bool{}
	for _, c := range commands() {
		verbs[c.name] = true
	}
	flagCache := map[string]map[string]bool{}
	var problems []string
	for _, l := range lines {
		words := shWords(l.text)
		if len(words) == 0 || words[0] != "dshmount" {
			continue
		}
		where := l.file + ":" + strconv.Itoa(l.line) + ": " + l.text
		if len(words) < 2 {
			problems = append(problems, where+": no verb")
			continue
		}
		verb := words[1]
		if verb == "--version" || verb == "--help" {
			continue
		}
		if !verbs[verb] {
			problems = append(problems, where+": no verb "+verb)
			continue
		}
		if flagCache[verb] == nil {
			flagCache[verb] = flagsOf(t, verb)
		}
		for _, w := range words[2:] {
			if w == "--" {
				break // exec: the command's own arguments follow
			}
			if len(w) < 2 || w[0] != '-' {
				continue
			}
			name := strings.TrimLeft(w, "-")
			name, _, _ = strings.Cut(name, "=")
			if !flagCache[verb][name] {
				problems = append(problems, where+": dshmount "+verb+" --help lists no flag "+w)
			}
		}
	}
	return problems
}

func allShLines(t *testing.T) []shLine {
	t.Helper()
	var lines []shLine
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		lines = append(lines, shLines(string(b), f)...)
	}
	return lines
}

func TestDocs_CommandLinesUseExistingVerbsAndFlags(t *testing.T) {
	lines := allShLines(t)
	n := 0
	for _, l := range lines {
		if w := shWords(l.text); len(w) > 0 && w[0] == "dshmount" {
			n++
		}
	}
	assert.Greater(t, n, 20, "the documents show dshmount command lines")
	assert.Empty(t, commandProblems(t, lines))
}

// TestDocs_CommandCheckRefusesWhatDoesNotExist pins that the check above can
// fail: an unknown flag, an unknown verb and a flag of another verb.
func TestDocs_CommandCheckRefusesWhatDoesNotExist(t *testing.T) {
	for _, tc := range []struct {
		line string
		bad  bool
	}{
		{"dshmount read main.go --offset 10 --limit 40", false},
		{"dshmount branch create fix --mount ~/fix   # a comment --nope", false},
		{"dshmount exec --name b -- go test --count=1 ./...", false},
		{"dshmount read main.go --no-such-flag", true},
		{"dshmount frobnicate main.go", true},
		{"dshmount read main.go --markers", true},
		{"dshmount edit main.go --old 'a' --new='b' --bogus=1", true},
	} {
		got := commandProblems(t, []shLine{{file: "x.md", line: 1, text: tc.line}})
		assert.Equal(t, tc.bad, len(got) > 0, "%s: %v", tc.line, got)
	}
}

var (
	makeTarget  = regexp.MustCompile(`(?m)^([A-Za-z0-9_.-]+):`)
	inlineMake  = regexp.MustCompile("`make ([^`]*)`")
	markdownRef = regexp.MustCompile(`\]\(([^)\s]+)\)`)
)

// makeTargets returns the Makefile's targets.
func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	require.NoError(t, err)
	targets := map[string]bool{}
	for _, m := range makeTarget.FindAllStringSubmatch(string(b), -1) {
		targets[m[1]] = true
	}
	return targets
}

// makeNames returns the targets a `make …` command names (its words that
// are neither flags nor VAR=value assignments).
func makeNames(cmd string) []string {
	var names []string
	for _, w := range shWords(cmd)[1:] {
		if strings.HasPrefix(w, "-") || strings.Contains(w, "=") {
			continue
		}
		names = append(names, w)
	}
	return names
}

func TestDocs_MakeTargetsExist(t *testing.T) {
	targets := makeTargets(t)
	require.True(t, targets["test"] && targets["demo"], "the Makefile parses")
	n := 0
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var cmds []string
		for _, l := range shLines(string(b), f) {
			text := strings.TrimPrefix(l.text, "sudo ")
			if strings.HasPrefix(text, "make ") {
				cmds = append(cmds, text)
			}
		}
		for _, m := range inlineMake.FindAllStringSubmatch(string(b), -1) {
			cmds = append(cmds, "make "+m[1])
		}
		for _, c := range cmds {
			for _, name := range makeNames(c) {
				n++
				assert.True(t, targets[name], "%s: %q names no Makefile target %q", f, c, name)
			}
		}
	}
	assert.Greater(t, n, 3)
	assert.Equal(t, []string{"demo"}, makeNames("make demo BIN=x"), "the parse pins a target")
}

func TestDocs_RelativeLinksResolve(t *testing.T) {
	n := 0
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range markdownRef.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			n++
			_, err := os.Stat(filepath.Join(filepath.Dir(f), target))
			assert.NoError(t, err, "%s links to %s", f, m[1])
		}
	}
	assert.Greater(t, n, 10)
}

func TestDocs_ReadmeIsShort(t *testing.T) {
	f, err := os.Open(filepath.Join(repoRoot, "README.md"))
	require.NoError(t, err)
	defer f.Close()
	n := 0
	for s := bufio.NewScanner(f); s.Scan(); {
		n++
	}
	assert.LessOrEqual(t, n, maxReadmeLines, "README.md has %d lines; move detail into docs/", n)
}

// codeName is a function or method named in ARCHITECTURE.md:
// `pkg/path.Func`, `pkg/path.Type.Method` or `pkg/path.(*Type).Method`.
var codeName = regexp.MustCompile("`([a-z][a-z/]*)\\.(?:\\(\\*([A-Za-z]\\w*)\\)\\.|([A-Za-z]\\w*)\\.)?([A-Za-z]\\w*)`")

// funcExists reports whether the package in dir declares a function or
// method (on recv, when not empty) called name.
func funcExists(t *testing.T, dir, recv, name string) bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	var decl *regexp.Regexp
	if recv == "" {
		decl = regexp.MustCompile(`(?m)^func ` + name + `[\[(]`)
	} else {
		decl = regexp.MustCompile(`(?m)^func \(\w+ \*?` + recv + `\) ` + name + `\(`)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		if decl.Match(b) {
			return true
		}
	}
	return false
}

func TestDocs_ArchitectureNamesExistingFunctions(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "ARCHITECTURE.md"))
	require.NoError(t, err)
	n := 0
	for _, m := range codeName.FindAllStringSubmatch(string(b), -1) {
		pkg, recv, name := m[1], m[2]+m[3], m[4]
		dir := filepath.Join(repoRoot, filepath.FromSlash(pkg))
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			continue // not a package path (a file name such as guard.go)
		}
		n++
		if recv == "" && (funcExists(t, dir, "", name) || typeExists(t, dir, name)) {
			continue
		}
		assert.True(t, recv != "" && funcExists(t, dir, recv, name), "ARCHITECTURE.md names %s, which %s does not declare", m[0], pkg)
	}
	assert.Greater(t, n, 40, "the walks name functions")
	assert.False(t, funcExists(t, filepath.Join(repoRoot, "internal", "policy"), "Engine", "NoSuchMethod"), "the check can fail")
}

// typeExists reports whether the package in dir declares a type called name.
func typeExists(t *testing.T, dir, name string) bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	decl := regexp.MustCompile(`(?m)^type ` + name + `[ \[]`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		if !strings.HasSuffix(f, "_test.go") && decl.Match(b) {
			return true
		}
	}
	return false
}

func TestDocs_OperationsNamesEveryServeFlag(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operations.md"))
	require.NoError(t, err)
	flags := flagDefLine.FindAllStringSubmatch(helpOf(t, "serve"), -1)
	require.Greater(t, len(flags), 20)
	for _, m := range flags {
		named := regexp.MustCompile(`--` + m[1] + `([^A-Za-z0-9-]|$)`)
		assert.True(t, named.Match(b), "docs/operations.md does not name serve --%s", m[1])
	}
}
