package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/dshmount/dshmount/control"
)

func TestPrintDiffStat_NamesConflictsAndMissingBases(t *testing.T) {
	page := &control.BranchDiffResult{
		Files: []control.BranchFile{
			{Path: "a.txt", Status: "modified", Conflict: true},
			{Path: "b.txt", Status: "modified"},
			{Path: "c.bin", Status: "modified", Binary: true, Conflict: true, NoBase: true},
		},
		Diff: "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n" +
			"diff --git a/b.txt b/b.txt\n--- a/b.txt\n+++ b/b.txt\n@@ -1 +1,2 @@\n b\n+c\n",
	}
	var out bytes.Buffer
	printDiffStat(&out, page)
	assert.Equal(t, "modified  a.txt +1 -1 (conflict: the workspace changed it)\n"+
		"modified  b.txt +1 -0\n"+
		"modified  c.bin (binary) (conflict: the workspace changed it; no base copy: the diff also undoes that change)\n",
		out.String())
}
