package patch

import (
	"fmt"
	"strings"
)

// Hunk is one contiguous update inside an Update operation.
type Hunk struct {
	// Line is the 1-based patch line holding the @@ marker, or the first
	// implicit change line of a chunk without one.
	Line int
	// Context is the anchor text after "@@ "; HasContext tells an empty
	// anchor ("@@ ") from no anchor ("@@").
	Context    string
	HasContext bool
	// OldLines are the context and removed lines, without prefixes.
	OldLines []string
	// NewLines are the context and added lines, without prefixes.
	NewLines []string
	// IsEndOfFile is set when "*** End of File" follows the hunk.
	IsEndOfFile bool
}

// Kind names the kind of a file operation.
type Kind string

// Operation kinds.
const (
	KindAdd    Kind = "add"
	KindDelete Kind = "delete"
	KindUpdate Kind = "update"
)

// Operation is one ordered file operation of a patch: *Add, *Delete or *Update.
type Operation interface {
	// OpKind returns the operation's kind.
	OpKind() Kind
	// OpPath returns the path as written in the patch.
	OpPath() string
	// OpLine returns the 1-based patch line of the operation's header.
	OpLine() int
}

// Add creates a file with Content (every added line followed by LF).
type Add struct {
	Path    string
	Line    int
	Content string
}

// Delete removes a file.
type Delete struct {
	Path string
	Line int
}

// Update changes a file by hunks, optionally moving it to MoveTo.
type Update struct {
	Path   string
	Line   int
	MoveTo string
	Hunks  []Hunk
}

// OpKind implements Operation.
func (*Add) OpKind() Kind { return KindAdd }

// OpPath implements Operation.
func (a *Add) OpPath() string { return a.Path }

// OpLine implements Operation.
func (a *Add) OpLine() int { return a.Line }

// OpKind implements Operation.
func (*Delete) OpKind() Kind { return KindDelete }

// OpPath implements Operation.
func (d *Delete) OpPath() string { return d.Path }

// OpLine implements Operation.
func (d *Delete) OpLine() int { return d.Line }

// OpKind implements Operation.
func (*Update) OpKind() Kind { return KindUpdate }

// OpPath implements Operation.
func (u *Update) OpPath() string { return u.Path }

// OpLine implements Operation.
func (u *Update) OpLine() int { return u.Line }

// Stage names the search that failed while applying a hunk.
type Stage string

// Failure stages.
const (
	StageContext  Stage = "context"
	StageOldLines Stage = "oldLines"
)

// HunkFailure describes the first hunk whose anchor or old lines could not be
// located. It never comes with partially updated text.
type HunkFailure struct {
	HunkLine    int      // 1-based patch line of the failing hunk
	Stage       Stage    // which search failed
	SearchStart int      // 0-based cursor where the search started (EOF: tail position)
	Pattern     []string // anchor or old lines, as written
}

// Error describes the failure in one line.
func (f *HunkFailure) Error() string {
	what := "old lines"
	if f.Stage == StageContext {
		what = "context anchor"
	}
	return fmt.Sprintf("hunk at patch line %d: %s not found (searched from line %d): %q",
		f.HunkLine, what, f.SearchStart+1, strings.Join(f.Pattern, "\n"))
}
