package mcp

import (
	"fmt"
	"strings"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/provider"
)

// numbered renders one line like `cat -n`: the number right-aligned in six
// columns, a tab, the text.
func numbered(n int, text string) string {
	return fmt.Sprintf("%6d\t%s\n", n, text)
}

// renderRead renders a read window: numbered lines, then a footer with the
// range, totalLines and how to read on.
func renderRead(r control.ReadResult) string {
	var b strings.Builder
	for _, l := range r.Lines {
		b.WriteString(numbered(l.Number, l.Text))
	}
	switch {
	case r.TotalLines == 0:
		fmt.Fprintf(&b, "(%s is empty; totalLines: 0)", r.DisplayPath)
		return b.String()
	case len(r.Lines) == 0:
		fmt.Fprintf(&b, "(no lines: offset %d is past the end of %s; totalLines: %d)", r.Offset, r.DisplayPath, r.TotalLines)
		return b.String()
	}
	first, last := r.Lines[0].Number, r.Lines[len(r.Lines)-1].Number
	fmt.Fprintf(&b, "(lines %d-%d of %d in %s; totalLines: %d", first, last, r.TotalLines, r.DisplayPath, r.TotalLines)
	if r.TruncatedByBytes {
		fmt.Fprintf(&b, "; truncated by bytes: the output reached the byte cap after line %d, which may itself be cut short", last)
	}
	if last < r.TotalLines {
		fmt.Fprintf(&b, "; read on with offset=%d", last+1)
	}
	b.WriteString(")")
	return b.String()
}

// readOutput is the structured form of a read.
func readOutput(r control.ReadResult) ReadOutput {
	out := ReadOutput{Path: r.DisplayPath, Version: string(r.Version), FirstLine: r.Offset,
		LastLine: r.Offset - 1, TotalLines: r.TotalLines, TruncatedByBytes: r.TruncatedByBytes}
	if len(r.Lines) > 0 {
		out.FirstLine = r.Lines[0].Number
		out.LastLine = r.Lines[len(r.Lines)-1].Number
	}
	return out
}

// lineCount counts the lines of LF text (a final line without LF counts).
func lineCount(text string) int {
	n := strings.Count(text, "\n")
	if text != "" && !strings.HasSuffix(text, "\n") {
		n++
	}
	return n
}

// splitLines splits LF text into lines without the final empty element.
func splitLines(text string) []string {
	if text == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(text, "\n"), "\n")
}

// snippetContext is the number of unchanged lines shown around a change.
const snippetContext = 3

// snippetMax bounds the lines of a change snippet.
const snippetMax = 40

// changeSnippet renders the region of after that differs from before,
// numbered, with a few lines of context, so the caller can check the edit
// without reading the file again.
func changeSnippet(before, after string) string {
	if before == after {
		return ""
	}
	bl, al := splitLines(before), splitLines(after)
	prefix := 0
	for prefix < len(bl) && prefix < len(al) && bl[prefix] == al[prefix] {
		prefix++
	}
	suffix := 0
	for suffix < len(bl)-prefix && suffix < len(al)-prefix && bl[len(bl)-1-suffix] == al[len(al)-1-suffix] {
		suffix++
	}
	start := max(0, prefix-snippetContext)
	end := min(len(al), len(al)-suffix+snippetContext)
	if end-start > snippetMax {
		end = start + snippetMax
	}
	var b strings.Builder
	for i := start; i < end; i++ {
		b.WriteString(numbered(i+1, al[i]))
	}
	return b.String()
}

// renderWrite renders a write's outcome.
func renderWrite(path string, r control.WriteResult) string {
	n := lineCount(r.After)
	if r.Operation == provider.OpCreate {
		return fmt.Sprintf("Created %s (%d lines).", path, n)
	}
	s := fmt.Sprintf("Replaced the content of %s (%d lines, was %s).", path, n, linesOf(r.Before))
	if r.Merged {
		s += mergedNote
	}
	return s
}

// mergedNote tells that a change was merged over another one.
const mergedNote = " The file had changed since you read it; your change was merged over that change (they do not touch): read the file before relying on its other lines."

// linesOf renders the size of an optional text.
func linesOf(text *string) string {
	if text == nil {
		return "too large to keep"
	}
	return fmt.Sprintf("%d lines", lineCount(*text))
}

// renderEdit renders an edit's outcome and the changed region.
func renderEdit(path string, replacements int, r control.EditResult) string {
	noun := "occurrences"
	if replacements == 1 {
		noun = "occurrence"
	}
	s := fmt.Sprintf("Edited %s: replaced %d %s of old_string.", path, replacements, noun)
	if r.Merged {
		s += mergedNote
	}
	if snip := changeSnippet(r.Before, r.After); snip != "" {
		s += " The changed region now reads:\n" + strings.TrimSuffix(snip, "\n")
	}
	return s
}

// opLabel names a patch operation for people: "add a.txt",
// "update b.go", "move c.go -> d.go", "delete e.txt".
func opLabel(kind, path, moveTo string) string {
	if moveTo != "" {
		return fmt.Sprintf("move %s -> %s (with update)", path, moveTo)
	}
	return kind + " " + path
}

// patchOutput converts a patch result, rendering each failure like a tool
// error.
func patchOutput(r control.PatchResult, explain func(op control.PatchOpResult) string) PatchOutput {
	out := PatchOutput{Complete: r.Complete, Operations: make([]PatchOperation, 0, len(r.Operations))}
	for _, op := range r.Operations {
		po := PatchOperation{Kind: string(op.Kind), Path: op.Path, MoveTo: op.MoveTo, Status: string(op.Status)}
		if op.Error != nil {
			po.Error = explain(op)
		}
		out.Operations = append(out.Operations, po)
	}
	return out
}

// renderPatch renders a patch outcome: a headline, then one line per
// operation with its status.
func renderPatch(out PatchOutput) string {
	var b strings.Builder
	applied := 0
	for _, op := range out.Operations {
		if op.Status == string(control.PatchApplied) {
			applied++
		}
	}
	if out.Complete {
		fmt.Fprintf(&b, "Patch applied: %d of %d operations.\n", applied, len(out.Operations))
	} else {
		fmt.Fprintf(&b, "Patch partly applied: the commit stopped after %d of %d operations. The applied operations stay on disk; the failed one and those after it were not applied. Read the failed file again and send a new patch for the rest.\n",
			applied, len(out.Operations))
	}
	for _, op := range out.Operations {
		fmt.Fprintf(&b, "- %s: %s", opLabel(op.Kind, op.Path, op.MoveTo), op.Status)
		if op.Error != "" {
			fmt.Fprintf(&b, ": %s", op.Error)
		}
		b.WriteString("\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// renderList renders a directory listing, one entry per line.
func renderList(path string, r control.ListResult) (string, ListOutput) {
	out := ListOutput{Path: path, Entries: make([]ListEntry, 0, len(r.Entries))}
	var b strings.Builder
	if len(r.Entries) == 0 {
		fmt.Fprintf(&b, "%s is empty.", path)
	} else {
		fmt.Fprintf(&b, "%s: %d entries\n", path, len(r.Entries))
	}
	for _, e := range r.Entries {
		out.Entries = append(out.Entries, ListEntry{Name: e.Name, Type: string(e.Type), Size: e.Size})
		switch {
		case e.Type == provider.TypeDirectory:
			fmt.Fprintf(&b, "%s/\n", e.Name)
		case e.Type == provider.TypeSymlink:
			fmt.Fprintf(&b, "%s@\n", e.Name)
		case e.Size != nil:
			fmt.Fprintf(&b, "%s\t%d bytes\n", e.Name, *e.Size)
		default:
			fmt.Fprintf(&b, "%s\t(%s)\n", e.Name, e.Type)
		}
	}
	return strings.TrimSuffix(b.String(), "\n"), out
}

// renderStat renders a stat result.
func renderStat(r control.StatResult) (string, StatOutput) {
	out := StatOutput{Path: r.DisplayPath, Exists: r.Exists, Type: string(r.Type), Size: r.Size, Version: string(r.Version)}
	if !r.Exists {
		return fmt.Sprintf("%s does not exist.", r.DisplayPath), out
	}
	s := fmt.Sprintf("%s: %s", r.DisplayPath, r.Type)
	if r.Size != nil {
		s += fmt.Sprintf(", %d bytes", *r.Size)
	}
	if r.Version != "" {
		s += ", version " + string(r.Version)
	}
	return s + ".", out
}
