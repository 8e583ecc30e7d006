package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/provider"
)

// toolError is a failure whose model-facing text is already rendered.
type toolError struct{ text string }

func (e *toolError) Error() string { return e.text }

// toolErrorText renders any handler error as the text of an isError
// result: always "FS_CODE: what happened; what to do next".
func toolErrorText(err error) string {
	var te *toolError
	if errors.As(err, &te) {
		return te.text
	}
	var re *control.RPCError
	if errors.As(err, &re) {
		switch {
		case re.Code != "" && len(re.ConflictHunks) > 0:
			return string(re.Code) + ": " + re.Message + hunksText(re.ConflictHunks)
		case re.Code != "":
			return string(re.Code) + ": " + re.Message
		case re.RPCCode == control.CodeInvalidParams:
			return string(provider.CodeInvalidArgument) + ": " + re.Message
		}
		return fmt.Sprintf("%s: the daemon could not serve the request (%s); try again, and check the daemon's log if it persists",
			provider.CodeIOError, re.Message)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("%s: the call was cancelled before it finished: %v", provider.CodeAborted, err)
	}
	return fmt.Sprintf("%s: cannot reach the dshmount daemon (%v); check that 'dshmount serve' is still running", provider.CodeIOError, err)
}

// explain turns a daemon error about path into a tool error for the tool
// named op. A stale refusal is rewritten to say who changed the file and
// when, from the audit log; a missing observation says what to do in terms
// of the tools; other errors keep the daemon's message, naming the path.
func (c *Conn) explain(ctx context.Context, err error, op, path string) error {
	var re *control.RPCError
	if !errors.As(err, &re) || re.Code == "" {
		return err
	}
	if re.Path != "" {
		path = re.Path
	} else if path != "" {
		path = c.displayPath(ctx, path) // workspace-relative, as the audit log and c.seen name it
	}
	switch {
	case re.Code == provider.CodeStaleVersion && path != "":
		return &toolError{text: c.staleText(ctx, path)}
	case re.Code == provider.CodeNotObserved && path != "" && op == ToolWrite:
		return &toolError{text: fmt.Sprintf("%s: %s already exists and you have not read it in this session; read it first, then write again",
			re.Code, path)}
	case re.Code == provider.CodeNotObserved && path != "" && op != ToolApplyPatch:
		return &toolError{text: fmt.Sprintf("%s: you have not read %s in this session; read it first, then redo your change",
			re.Code, path)}
	case path != "" && !strings.Contains(re.Message, path):
		return &toolError{text: fmt.Sprintf("%s: %s: %s", re.Code, path, re.Message)}
	}
	return err
}

// staleText renders an FS_STALE_VERSION refusal for path, saying who made
// the newest change: the newest audit entry when it is newer than this
// session's last sight of the file, otherwise a change that bypassed
// dshmount.
func (c *Conn) staleText(ctx context.Context, path string) string {
	what, next := "changed", "read it again, then redo your change"
	who := "by a change outside dshmount, e.g. directly in the backing directory, not through the mount or the socket"
	if e, ok := c.newestEntry(ctx, path); ok && c.afterSeen(path, e) {
		who = c.describeEntry(e)
		switch e.Op {
		case control.OpDelete, control.OpUnlink:
			what, next = "was deleted", "it no longer exists; write it anew if you still need it"
		case control.OpMove, control.OpRename:
			if e.To != "" && e.To != path {
				what = "was moved to " + e.To
			}
		}
	}
	return fmt.Sprintf("%s: %s %s since you read it (%s); %s",
		provider.CodeStaleVersion, path, what, who, next)
}

// newestEntry returns the newest change of path in the audit log.
func (c *Conn) newestEntry(ctx context.Context, path string) (control.LogEntry, bool) {
	changes := false // a refusal (this one, most likely) changed nothing
	// path is workspace-relative (a display path): no Cwd.
	res, err := c.cfg.Daemon.Log(ctx, control.LogParams{Path: path, Limit: 1, Refused: &changes})
	if err != nil {
		c.log.Warn("cannot read the audit log", "path", path, "err", err)
		return control.LogEntry{}, false
	}
	if len(res.Entries) == 0 {
		return control.LogEntry{}, false
	}
	return res.Entries[0], true
}

// afterSeen reports whether e is a change this session has not seen: not
// the change that produced the version the session last saw, and not older
// than the call in which it saw it. When the session never saw the path,
// nothing better is known and e counts as unseen.
func (c *Conn) afterSeen(path string, e control.LogEntry) bool {
	seen, ok := c.lastSeen(path)
	if !ok {
		return true
	}
	if seen.version != "" && e.After == seen.version {
		return false
	}
	return !e.Time.Before(seen.at)
}

// describeEntry renders "by a write through the mount (pid 123), 3s ago",
// in the wording the CLI and the socket use.
func (c *Conn) describeEntry(e control.LogEntry) string {
	return control.DescribeChange(control.Change{Op: e.Op, Channel: e.Channel, PID: e.PID, Session: e.Session,
		SessionName: e.SessionName, Unconditional: e.Unconditional, Age: c.cfg.Now().Sub(e.Time)}, c.session)
}

// ago renders a duration as "3s ago".
func ago(d time.Duration) string { return control.Ago(d) }

// hunksText lists the conflicted regions of a refused merge.
func hunksText(hunks []control.ConflictHunk) string {
	return "\nConflicted regions (ours, then theirs):\n" + strings.TrimSuffix(control.ConflictHunksText(hunks), "\n")
}
