package patch_test

import (
	"fmt"

	"github.com/dshmount/dshmount/patch"
)

func ExampleParse() {
	ops, err := patch.Parse(`*** Begin Patch
*** Add File: docs/hello.txt
+Hello
*** Update File: main.go
*** Move to: cmd/main.go
@@ func main() {
-	println("old")
+	println("new")
*** Delete File: legacy.go
*** End Patch`)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, op := range ops {
		fmt.Printf("line %d: %s %s\n", op.OpLine(), op.OpKind(), op.OpPath())
		if u, ok := op.(*patch.Update); ok {
			h := u.Hunks[0]
			fmt.Printf("  move to %s; anchor %q; old %q; new %q\n", u.MoveTo, h.Context, h.OldLines, h.NewLines)
		}
	}

	_, err = patch.Parse("*** Begin Patch\n*** Rename File: a\n*** End Patch")
	fmt.Println(err)
	// Output:
	// line 2: add docs/hello.txt
	// line 4: update main.go
	//   move to cmd/main.go; anchor "func main() {"; old ["\tprintln(\"old\")"]; new ["\tprintln(\"new\")"]
	// line 9: delete legacy.go
	// invalid patch at line 2: '*** Rename File: a' is not a valid hunk header; valid headers are '*** Add File: {path}', '*** Delete File: {path}', '*** Update File: {path}'
}

func ExampleApplyHunks() {
	original := "def a():\n    return 1\n\ndef b():\n    return 1\n"
	hunks := []patch.Hunk{{
		Line:       3,
		Context:    "def b():",
		HasContext: true,
		OldLines:   []string{"return 1"}, // matched after trimming white space
		NewLines:   []string{"    return 2"},
	}}
	after, failure := patch.ApplyHunks(original, hunks)
	fmt.Print(after)

	_, failure = patch.ApplyHunks(original, []patch.Hunk{{Line: 3, OldLines: []string{"return 3"}}})
	fmt.Println(failure.Stage, failure.SearchStart, failure)
	// Output:
	// def a():
	//     return 1
	//
	// def b():
	//     return 2
	// oldLines 0 hunk at patch line 3: old lines not found (searched from line 1): "return 3"
}
