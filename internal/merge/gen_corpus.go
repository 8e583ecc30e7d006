//go:build ignore

// gen_corpus writes the merge corpus: testdata/generated.json (edits of
// every kind at distances -5..5, at the ends of a file, CRLF, no final
// newline, empty files, seeded random edits) and testdata/history.json
// (consecutive versions of this repository's own files), each triple with
// the answer of `git merge-file -p`. Run it from the merge directory with
// `go generate` inside a checkout that has the history.
package main

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// triple is one corpus entry; Want and Clean are git's answer.
type triple struct {
	Name   string `json:"name"`
	Base   string `json:"base"`
	Ours   string `json:"ours"`
	Theirs string `json:"theirs"`
	Clean  bool   `json:"clean"`
	Want   string `json:"want"`
}

// historyTip pins the commit whose history the real triples come from.
const historyTip = "73387b5"

func main() {
	gen := generated()
	hist, err := history()
	if err != nil {
		fail(err)
	}
	for _, set := range []struct {
		file string
		ts   []triple
	}{{"testdata/generated.json", gen}, {"testdata/history.json", hist}} {
		for i := range set.ts {
			if err := ask(&set.ts[i]); err != nil {
				fail(err)
			}
		}
		out, err := json.MarshalIndent(set.ts, "", " ")
		if err != nil {
			fail(err)
		}
		if err := os.WriteFile(set.file, append(out, '\n'), 0o644); err != nil {
			fail(err)
		}
		fmt.Printf("%s: %d triples\n", set.file, len(set.ts))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gen_corpus:", err)
	os.Exit(1)
}

// ask runs git merge-file -p on the triple and records its answer.
func ask(t *triple) error {
	dir, err := os.MkdirTemp("", "mergecorpus")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for name, body := range map[string]string{"ours": t.Ours, "base": t.Base, "theirs": t.Theirs} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	cmd := exec.Command("git", "merge-file", "-p", "-L", "ours", "-L", "base", "-L", "theirs",
		filepath.Join(dir, "ours"), filepath.Join(dir, "base"), filepath.Join(dir, "theirs"))
	out, err := cmd.Output()
	t.Want = string(out)
	t.Clean = err == nil
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() > 0 && ee.ExitCode() < 128 {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: git merge-file: %w", t.Name, err)
	}
	return nil
}

// edit changes lines at pos: "insert" puts a new line before it, "delete"
// removes it, "change" replaces it.
func edit(lines []string, kind string, pos int, text string) []string {
	out := append([]string{}, lines[:pos]...)
	switch kind {
	case "insert":
		out = append(out, text)
		out = append(out, lines[pos:]...)
	case "delete":
		out = append(out, lines[pos+1:]...)
	case "change":
		out = append(out, text)
		out = append(out, lines[pos+1:]...)
	}
	return out
}

// render joins lines with eol; noFinal drops the last line's end.
func render(lines []string, eol string, noFinal bool) string {
	if len(lines) == 0 {
		return ""
	}
	s := strings.Join(lines, eol) + eol
	if noFinal {
		s = strings.TrimSuffix(s, eol)
	}
	return s
}

func distinctBase(n int) []string {
	var ls []string
	for i := 0; i < n; i++ {
		ls = append(ls, fmt.Sprintf("line %02d", i+1))
	}
	return ls
}

// codeBase has the repeated lines real code has: braces and blank lines.
func codeBase() []string {
	return []string{"func a() {", "\treturn 1", "}", "", "func b() {", "\treturn 2", "}", "",
		"func c() {", "\treturn 3", "}", "", "func d() {", "\treturn 4", "}", ""}
}

func generated() []triple {
	var ts []triple
	kinds := []string{"insert", "delete", "change"}
	type variant struct {
		name    string
		base    []string
		eol     string
		noFinal bool
	}
	variants := []variant{
		{"lf", distinctBase(16), "\n", false},
		{"code", codeBase(), "\n", false},
		{"crlf", distinctBase(16), "\r\n", false},
		{"nofinal", distinctBase(16), "\n", true},
	}
	for _, v := range variants {
		for _, k1 := range kinds {
			for _, k2 := range kinds {
				for dist := -5; dist <= 5; dist++ {
					p1, p2 := 7, 7+dist
					o := edit(v.base, k1, p1, "ours edit")
					t := edit(v.base, k2, p2, "theirs edit")
					ts = append(ts, triple{
						Name:   fmt.Sprintf("%s/%s-%s/%+d", v.name, k1, k2, dist),
						Base:   render(v.base, v.eol, v.noFinal),
						Ours:   render(o, v.eol, v.noFinal),
						Theirs: render(t, v.eol, v.noFinal),
					})
				}
			}
		}
	}
	// Both ends of a file, with and without a final newline.
	base := distinctBase(8)
	last := len(base) - 1
	for _, noFinal := range []bool{false, true} {
		for _, k1 := range kinds {
			for _, k2 := range kinds {
				for _, pp := range [][2]int{{0, 0}, {0, 1}, {0, last}, {last, last}, {last - 1, last}, {last, 0}} {
					o := edit(base, k1, pp[0], "ours edit")
					t := edit(base, k2, pp[1], "theirs edit")
					ts = append(ts, triple{
						Name:   fmt.Sprintf("ends/nofinal=%v/%s@%d-%s@%d", noFinal, k1, pp[0], k2, pp[1]),
						Base:   render(base, "\n", noFinal),
						Ours:   render(o, "\n", noFinal),
						Theirs: render(t, "\n", noFinal),
					})
				}
			}
		}
		// Appending at the end on one or both sides.
		app := func(s string) []string { return append(append([]string{}, base...), s) }
		ts = append(ts,
			triple{Name: fmt.Sprintf("ends/nofinal=%v/append-ours", noFinal), Base: render(base, "\n", noFinal),
				Ours: render(app("ours tail"), "\n", noFinal), Theirs: render(edit(base, "change", 2, "theirs edit"), "\n", noFinal)},
			triple{Name: fmt.Sprintf("ends/nofinal=%v/append-both", noFinal), Base: render(base, "\n", noFinal),
				Ours: render(app("ours tail"), "\n", noFinal), Theirs: render(app("theirs tail"), "\n", noFinal)},
			triple{Name: fmt.Sprintf("ends/nofinal=%v/append-same", noFinal), Base: render(base, "\n", noFinal),
				Ours: render(app("same tail"), "\n", noFinal), Theirs: render(app("same tail"), "\n", noFinal)})
	}
	// A final newline added or removed on one side.
	b := render(base, "\n", false)
	nf := render(base, "\n", true)
	ts = append(ts,
		triple{Name: "eol/drop-final-ours", Base: b, Ours: nf, Theirs: render(edit(base, "change", 1, "theirs edit"), "\n", false)},
		triple{Name: "eol/drop-final-both", Base: b, Ours: nf, Theirs: nf},
		triple{Name: "eol/add-final-theirs", Base: nf, Ours: render(edit(base, "change", 1, "ours edit"), "\n", true), Theirs: b},
		triple{Name: "eol/crlf-vs-lf", Base: b, Ours: render(base, "\r\n", false), Theirs: render(edit(base, "change", 4, "theirs edit"), "\n", false)},
	)
	// Empty files.
	one := "only line\n"
	for _, e := range []struct{ name, b, o, t string }{
		{"empty/all", "", "", ""},
		{"empty/ours-adds", "", one, ""},
		{"empty/both-add-same", "", one, one},
		{"empty/both-add-different", "", one, "other line\n"},
		{"empty/ours-empties", b, "", b},
		{"empty/ours-empties-theirs-changes", b, "", render(edit(base, "change", 3, "theirs edit"), "\n", false)},
		{"empty/both-empty", b, "", ""},
		{"empty/theirs-adds-nofinal", "", "", "no end"},
	} {
		ts = append(ts, triple{Name: e.name, Base: e.b, Ours: e.o, Theirs: e.t})
	}
	// Identical changes on both sides.
	for _, k := range kinds {
		x := render(edit(base, k, 3, "same edit"), "\n", false)
		ts = append(ts, triple{Name: "same/" + k, Base: b, Ours: x, Theirs: x})
	}
	// Seeded random edits: several per side, on bases with repeated lines,
	// some long enough for Myers' cost heuristics.
	rng := rand.New(rand.NewSource(34))
	pool := []string{"}", "", "\treturn nil", "x := 1", "if err != nil {", "// comment"}
	for i := 0; i < 60; i++ {
		n := 10 + rng.Intn(40)
		if i%10 == 9 {
			n = 1500 + rng.Intn(1000)
		}
		var bl []string
		for j := 0; j < n; j++ {
			if rng.Intn(3) == 0 {
				bl = append(bl, pool[rng.Intn(len(pool))])
			} else {
				bl = append(bl, fmt.Sprintf("stmt%d", rng.Intn(n*2)))
			}
		}
		mutate := func(tag string, edits int) []string {
			ls := append([]string{}, bl...)
			for e := 0; e < edits; e++ {
				if len(ls) == 0 {
					ls = append(ls, tag)
					continue
				}
				p := rng.Intn(len(ls))
				text := fmt.Sprintf("%s%d", tag, rng.Intn(5))
				if rng.Intn(4) == 0 {
					text = pool[rng.Intn(len(pool))]
				}
				ls = edit(ls, kinds[rng.Intn(3)], p, text)
			}
			return ls
		}
		edits := 1 + rng.Intn(4)
		if n > 1000 {
			edits = 200 + rng.Intn(200)
		}
		ts = append(ts, triple{Name: fmt.Sprintf("random/%02d", i), Base: render(bl, "\n", false),
			Ours: render(mutate("o", edits), "\n", false), Theirs: render(mutate("t", edits), "\n", false)})
	}
	return ts
}

// history takes files with at least three versions in historyTip's
// history and makes two triples of each run of three consecutive versions
// v0, v1, v2: (base v0, ours v1, theirs v2) and (base v1, ours v0, theirs
// v2), the second undoing one commit while keeping the next.
func history() ([]triple, error) {
	out, err := exec.Command("git", "log", "--format=", "--name-only", historyTip).Output()
	if err != nil {
		return nil, fmt.Errorf("git log: %w", err)
	}
	counts := map[string]int{}
	var order []string
	for _, p := range strings.Split(string(out), "\n") {
		if p == "" || !(strings.HasSuffix(p, ".go") || strings.HasSuffix(p, ".md")) {
			continue
		}
		if counts[p] == 0 {
			order = append(order, p)
		}
		counts[p]++
	}
	var ts []triple
	files := 0
	for _, p := range order {
		if counts[p] < 3 || files >= 30 {
			continue
		}
		revs, err := exec.Command("git", "log", "--format=%H", historyTip, "--", ":(top)"+p).Output()
		if err != nil {
			return nil, fmt.Errorf("git log %s: %w", p, err)
		}
		hs := strings.Fields(string(revs))
		if len(hs) < 3 {
			continue
		}
		var vs []string
		for _, h := range hs[:3] {
			body, err := exec.Command("git", "show", h+":"+p).Output()
			if err != nil || len(body) > 12<<10 || !utf8.Valid(body) {
				break
			}
			vs = append(vs, string(body))
		}
		if len(vs) < 3 {
			continue
		}
		files++
		// git log lists newest first.
		v0, v1, v2 := vs[2], vs[1], vs[0]
		ts = append(ts,
			triple{Name: "history/" + p + "/forward", Base: v0, Ours: v1, Theirs: v2},
			triple{Name: "history/" + p + "/undo-keep", Base: v1, Ours: v0, Theirs: v2})
	}
	return ts, nil
}
