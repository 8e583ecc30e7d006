package merge

import (
	"encoding/json"
	"os"
	"testing"
)

// corpusTriple is one entry of testdata/*.json, written by gen_corpus.go
// with git merge-file's answer.
type corpusTriple struct {
	Name   string `json:"name"`
	Base   string `json:"base"`
	Ours   string `json:"ours"`
	Theirs string `json:"theirs"`
	Clean  bool   `json:"clean"`
	Want   string `json:"want"`
}

func loadCorpus(t testing.TB, file string) []corpusTriple {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("read corpus: %v", err)
	}
	var ts []corpusTriple
	if err := json.Unmarshal(raw, &ts); err != nil {
		t.Fatalf("decode %s: %v", file, err)
	}
	return ts
}

var corpusLabels = Options{OursLabel: "ours", TheirsLabel: "theirs"}

// TestMerge_MatchesGitOnCorpus pins the engine to git merge-file: the same
// clean/conflict decision and the same bytes (conflict markers included)
// on every triple.
func TestMerge_MatchesGitOnCorpus(t *testing.T) {
	total := 0
	for _, file := range []string{"testdata/generated.json", "testdata/history.json"} {
		ts := loadCorpus(t, file)
		if len(ts) == 0 {
			t.Fatalf("%s: empty corpus", file)
		}
		total += len(ts)
		for _, tc := range ts {
			r := Merge([]byte(tc.Base), []byte(tc.Ours), []byte(tc.Theirs), corpusLabels)
			if r.Clean() != tc.Clean {
				t.Errorf("%s: clean=%v, git says clean=%v\ngot:\n%s\ngit:\n%s", tc.Name, r.Clean(), tc.Clean, r.Text, tc.Want)
				continue
			}
			if string(r.Text) != tc.Want {
				t.Errorf("%s: bytes differ from git\ngot:\n%q\ngit:\n%q", tc.Name, r.Text, tc.Want)
			}
		}
	}
	if total < 200 {
		t.Fatalf("corpus holds %d triples, want at least 200", total)
	}
}
