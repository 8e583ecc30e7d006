package service

import (
	"time"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
	"github.com/dshmount/dshmount/patch"
)

// JSON-RPC 2.0 error codes used on the socket.
const (
	// CodeParseError: the line is not JSON.
	CodeParseError = -32700
	// CodeInvalidRequest: the JSON is not a request object, or the line is
	// too long.
	CodeInvalidRequest = -32600
	// CodeMethodNotFound: no such method.
	CodeMethodNotFound = -32601
	// CodeInvalidParams: missing or mistyped parameters, unknown session,
	// NUL in a path, invalid UTF-8.
	CodeInvalidParams = -32602
	// CodeInternalError: the daemon failed while serving the request.
	CodeInternalError = -32603
	// CodeFilesystem: a filesystem error; Data carries the FS_… code.
	CodeFilesystem = -32000
	// CodePeerRefused: the peer's uid may not use this socket.
	CodePeerRefused = -32001
	// CodeUnavailable: the daemon does not offer this feature (e.g.
	// session.bind without a mount).
	CodeUnavailable = -32002
)

// Method names.
const (
	MethodSessionOpen  = "session.open"
	MethodSessionClose = "session.close"
	MethodSessionBind  = "session.bind"
	MethodStat         = "fs.stat"
	MethodList         = "fs.list"
	MethodRead         = "fs.read"
	MethodWrite        = "fs.write"
	MethodEdit         = "fs.edit"
	MethodPatch        = "fs.patch"
	MethodDelete       = "fs.delete"
	MethodMove         = "fs.move"
	MethodWatch        = "fs.watch"
	MethodUnwatch      = "fs.unwatch"
	MethodLog          = "fs.log"
	MethodStatus       = "daemon.status"
	// NotifyChanged is the notification a watch sends on its connection.
	NotifyChanged = "fs.changed"
)

// ErrorObject is a JSON-RPC error object.
type ErrorObject struct {
	Code    int        `json:"code"`
	Message string     `json:"message"`
	Data    *ErrorData `json:"data,omitempty"`
}

// ErrorData is the data of a filesystem error (and of parameter errors that
// concern a path).
type ErrorData struct {
	Code    provider.Code `json:"code"`
	Path    string        `json:"path,omitempty"`
	Message string        `json:"message"`
	// Field names the parameter an FS_INVALID_ARGUMENT is about, when
	// one is (a mistyped or unknown field).
	Field string `json:"field,omitempty"`
	// Resume is set with FS_CHANGES_LOST: watch again with this since
	// after a rescan.
	Resume *uint64 `json:"resume,omitempty"`
	// Conflicts names the paths of a refused branch commit or atomic
	// patch (FS_STALE_VERSION).
	Conflicts []string `json:"conflicts,omitempty"`
	// ConflictHunks are the conflicted regions of a refused merge
	// (FS_MERGE_CONFLICT).
	ConflictHunks []ConflictHunk `json:"conflictHunks,omitempty"`
}

// WriteExpected is the explicit guard of a write or of a move destination:
// {"kind":"createIfAbsent"} or {"kind":"replaceIfVersion","version":V}.
type WriteExpected struct {
	Kind    provider.IntentKind `json:"kind"`
	Version provider.Version    `json:"version,omitempty"`
}

// VersionExpected is the explicit guard of an edit, delete or move source.
type VersionExpected struct {
	Version provider.Version `json:"version"`
}

// Empty is the result of methods that return nothing.
type Empty struct{}

// SessionOpenParams are the params of session.open.
// Channel "mcp" declares the connection an MCP server's: its requests are
// then audited with channel "mcp" instead of "socket" (a label the client
// chooses; the uid and pid are the kernel's).
type SessionOpenParams struct {
	Name    string         `json:"name,omitempty"`
	Channel policy.Channel `json:"channel,omitempty"`
	Branch  string         `json:"branch,omitempty"` // the session acts in this branch by default
	// Strict: processes bound to the session read before every write on
	// the mount too (else they may change files nobody else changed since
	// the session opened; policy.Session.Strict).
	Strict bool `json:"strict,omitempty"`
}

// SessionOpenResult is the result of session.open.
type SessionOpenResult struct {
	Session policy.SessionID `json:"session"`
}

// SessionCloseParams are the params of session.close.
type SessionCloseParams struct {
	Session policy.SessionID `json:"session"`
}

// SessionBindParams are the params of session.bind.
type SessionBindParams struct {
	Session policy.SessionID `json:"session"`
	PID     int              `json:"pid"`
	// Strict makes the binding strict: the bound processes read before
	// every write through the mount, even when the session is not strict
	// (dshmount exec --strict).
	Strict bool `json:"strict,omitempty"`
}

// SessionBindResult is the result of session.bind: the session the process
// was bound to (a bound caller binds to its own session, whatever it named).
type SessionBindResult struct {
	Session policy.SessionID `json:"session"`
}

// StatParams are the params of fs.stat.
type StatParams struct {
	Path    string           `json:"path"`
	Cwd     string           `json:"cwd,omitempty"`
	Session policy.SessionID `json:"session,omitempty"`
	Branch  string           `json:"branch,omitempty"` // act in this branch instead of the workspace
}

// StatResult is the result of fs.stat.
type StatResult struct {
	Exists      bool              `json:"exists"`
	Type        provider.FileType `json:"type,omitempty"`
	Size        *int64            `json:"size,omitempty"`
	Version     provider.Version  `json:"version,omitempty"`
	DisplayPath string            `json:"displayPath"`
}

// ListParams are the params of fs.list.
type ListParams struct {
	Path   string `json:"path"`
	Cwd    string `json:"cwd,omitempty"`
	Branch string `json:"branch,omitempty"` // act in this branch instead of the workspace
}

// ListEntry is one child in a ListResult.
type ListEntry struct {
	Name    string            `json:"name"`
	Type    provider.FileType `json:"type"`
	Size    *int64            `json:"size,omitempty"`
	Version provider.Version  `json:"version,omitempty"`
}

// ListResult is the result of fs.list, in name order.
type ListResult struct {
	Entries []ListEntry `json:"entries"`
}

// ReadParams are the params of fs.read. Offset is the 1-based first line
// (default 1), Limit the number of lines (default DefaultReadLimit),
// MaxBytes the cap on returned text (default DefaultReadMaxBytes).
type ReadParams struct {
	Path     string           `json:"path"`
	Cwd      string           `json:"cwd,omitempty"`
	Session  policy.SessionID `json:"session,omitempty"`
	Offset   *int             `json:"offset,omitempty"`
	Limit    *int             `json:"limit,omitempty"`
	MaxBytes *int64           `json:"maxBytes,omitempty"`
	Branch   string           `json:"branch,omitempty"` // act in this branch instead of the workspace
}

// Line is one numbered line of a read.
type Line = provider.WindowLine

// ReadResult is the result of fs.read.
type ReadResult struct {
	DisplayPath      string           `json:"displayPath"`
	Version          provider.Version `json:"version"`
	Offset           int              `json:"offset"`
	Lines            []Line           `json:"lines"`
	TotalLines       int              `json:"totalLines"`
	TruncatedByBytes bool             `json:"truncatedByBytes,omitempty"`
	// Observed is false when the read was answered without being recorded
	// for the session (a shared policy store it could not reach): the
	// session's next guarded change of the file then needs a new read.
	Observed bool `json:"observed"`
}

// WriteParams are the params of fs.write.
type WriteParams struct {
	Path          string           `json:"path"`
	Content       string           `json:"content"`
	Cwd           string           `json:"cwd,omitempty"`
	Session       policy.SessionID `json:"session,omitempty"`
	Expected      *WriteExpected   `json:"expected,omitempty"`
	Unconditional bool             `json:"unconditional,omitempty"`
	Branch        string           `json:"branch,omitempty"` // act in this branch instead of the workspace
	Merge         bool             `json:"merge,omitempty"`  // a stale change is merged over the current bytes when the bytes read are kept
}

// WriteResult is the result of fs.write (and a move's destination).
type WriteResult struct {
	Operation provider.Operation `json:"operation"`
	Version   provider.Version   `json:"version"`
	Before    *string            `json:"before"`
	After     string             `json:"after"`
	// Merged: a stale change was merged over MergedOver, the version
	// the file had.
	Merged     bool             `json:"merged,omitempty"`
	MergedOver provider.Version `json:"mergedOver,omitempty"`
}

// EditParams are the params of fs.edit.
type EditParams struct {
	Path          string           `json:"path"`
	OldString     string           `json:"oldString"`
	NewString     string           `json:"newString"`
	ReplaceAll    bool             `json:"replaceAll,omitempty"`
	Cwd           string           `json:"cwd,omitempty"`
	Session       policy.SessionID `json:"session,omitempty"`
	Expected      *VersionExpected `json:"expected,omitempty"`
	Unconditional bool             `json:"unconditional,omitempty"`
	Branch        string           `json:"branch,omitempty"` // act in this branch instead of the workspace
	Merge         bool             `json:"merge,omitempty"`  // a stale change is merged over the current bytes when the bytes read are kept
}

// EditResult is the result of fs.edit.
type EditResult struct {
	Version provider.Version `json:"version"`
	Before  string           `json:"before"`
	After   string           `json:"after"`
	// Merged: a stale change was merged over MergedOver, the version
	// the file had.
	Merged     bool             `json:"merged,omitempty"`
	MergedOver provider.Version `json:"mergedOver,omitempty"`
}

// PatchParams are the params of fs.patch.
type PatchParams struct {
	Patch         string           `json:"patch"`
	Cwd           string           `json:"cwd,omitempty"`
	Session       policy.SessionID `json:"session,omitempty"`
	Unconditional bool             `json:"unconditional,omitempty"`
	Branch        string           `json:"branch,omitempty"` // act in this branch instead of the workspace
	Atomic        bool             `json:"atomic,omitempty"` // all operations through one journaled commit, or none
	Merge         bool             `json:"merge,omitempty"`  // a one-file update made stale is merged over the current bytes when the bytes read are kept
}

// PatchStatus is the state of one patch operation after a commit.
type PatchStatus string

// Patch operation states.
const (
	PatchApplied PatchStatus = "applied"
	PatchFailed  PatchStatus = "failed"
	PatchNotRun  PatchStatus = "not-run"
)

// PatchOpResult reports one operation of a patch.
type PatchOpResult struct {
	Kind    patch.Kind       `json:"kind"`
	Path    string           `json:"path"`
	MoveTo  string           `json:"moveTo,omitempty"`
	Status  PatchStatus      `json:"status"`
	Version provider.Version `json:"version,omitempty"`
	Error   *ErrorData       `json:"error,omitempty"`
	// MergedOver is set when the stale update was merged over that
	// version (merge: true).
	MergedOver provider.Version `json:"mergedOver,omitempty"`
}

// PatchResult is the result of fs.patch. Complete is false when a commit
// stopped; Operations then tell which were applied.
type PatchResult struct {
	Operations []PatchOpResult `json:"operations"`
	Complete   bool            `json:"complete"`
}

// DeleteParams are the params of fs.delete.
type DeleteParams struct {
	Path          string           `json:"path"`
	Cwd           string           `json:"cwd,omitempty"`
	Session       policy.SessionID `json:"session,omitempty"`
	Expected      *VersionExpected `json:"expected,omitempty"`
	Unconditional bool             `json:"unconditional,omitempty"`
	Branch        string           `json:"branch,omitempty"` // act in this branch instead of the workspace
}

// DeleteResult is the result of fs.delete.
type DeleteResult struct {
	Before *string `json:"before"`
}

// MoveParams are the params of fs.move.
type MoveParams struct {
	From                string           `json:"from"`
	To                  string           `json:"to"`
	Cwd                 string           `json:"cwd,omitempty"`
	Session             policy.SessionID `json:"session,omitempty"`
	ExpectedSource      *VersionExpected `json:"expectedSource,omitempty"`
	ExpectedDestination *WriteExpected   `json:"expectedDestination,omitempty"`
	Unconditional       bool             `json:"unconditional,omitempty"`
	Branch              string           `json:"branch,omitempty"` // act in this branch instead of the workspace
}

// SourceFailure tells why a moved file's source could not be removed.
type SourceFailure struct {
	Code    provider.Code `json:"code"`
	Message string        `json:"message"`
}

// MoveResult is the result of fs.move.
type MoveResult struct {
	SourceBefore  *string        `json:"sourceBefore"`
	Destination   WriteResult    `json:"destination"`
	SourceDeleted bool           `json:"sourceDeleted"`
	SourceFailure *SourceFailure `json:"sourceFailure,omitempty"`
}

// WatchParams are the params of fs.watch. Path is a file or a directory
// (it may not exist yet; its directory must). A watch of a directory
// reports changes of the directory itself and of its direct children, or
// with Recursive of everything below it; a watch of a file reports that
// file (a rename to or from it included). Since, when set, first replays
// every retained change after that seq, then goes live with no gap and no
// duplicate; without it the watch starts at the newest change
// (WatchResult.Seq). A since the daemon cannot vouch for is the error
// FS_CHANGES_LOST whose data.resume is the seq to subscribe from after a
// rescan.
type WatchParams struct {
	Path      string  `json:"path"`
	Cwd       string  `json:"cwd,omitempty"`
	Recursive bool    `json:"recursive,omitempty"`
	Since     *uint64 `json:"since,omitempty"`
	Branch    string  `json:"branch,omitempty"` // watch the path as this branch shows it
}

// WatchResult is the result of fs.watch. Seq is the seq the watch starts
// after (Since, or the newest change when Since was absent).
type WatchResult struct {
	Watch string `json:"watch"`
	Seq   uint64 `json:"seq"`
}

// UnwatchParams are the params of fs.unwatch.
type UnwatchParams struct {
	Watch string `json:"watch"`
}

// ChangeKind says what changed.
type ChangeKind string

// Change kinds.
const (
	ChangeCreated  ChangeKind = "created"  // the path came into existence
	ChangeModified ChangeKind = "modified" // its bytes changed
	ChangeAttrib   ChangeKind = "attrib"   // mode, owner or times changed, not the bytes
	ChangeDeleted  ChangeKind = "deleted"  // the path is gone
	ChangeRenamed  ChangeKind = "renamed"  // Path was renamed to To
	// ChangeLost ends the watch: the daemon cannot vouch for every change
	// after Seq (the subscriber fell behind, or changes were lost). Rescan,
	// then watch again with since = Seq.
	ChangeLost ChangeKind = "lost"
)

// ChangeActor is who made a change. A peer of another uid than root and
// the daemon's sees only the channel of other uids' changes.
type ChangeActor struct {
	Channel     policy.Channel   `json:"channel"` // socket, mcp, mount or external
	Session     policy.SessionID `json:"session,omitempty"`
	SessionName string           `json:"sessionName,omitempty"`
	PID         int32            `json:"pid,omitempty"`
	UID         *uint32          `json:"uid,omitempty"`
}

// ChangeEvent is the params of an fs.changed notification: one change (or,
// within the coalescing window, the merge of several changes of one path
// by one actor, carrying the last seq), or the final lost event (no
// actor). Path is the changed file itself; To is a rename's destination.
type ChangeEvent struct {
	Watch   string           `json:"watch"`
	Seq     uint64           `json:"seq"`
	Path    string           `json:"path"`
	Kind    ChangeKind       `json:"kind"`
	To      string           `json:"to,omitempty"`
	Version provider.Version `json:"version,omitempty"`
	Actor   *ChangeActor     `json:"actor,omitempty"`
	// at is when the change was made (its audit entry's time): a watch
	// merges only changes made within its window of each other, whether
	// they arrive live or replayed.
	at time.Time
}

// LogParams are the params of fs.log. Every filter is optional and they
// combine: Path "" lists every path (a path matches an entry's path or its
// move destination); Refused true lists only refusals, false only changes,
// absent both; Session lists one session's entries; Since lists entries
// with a seq above it: the first Limit of them (still newest first), so
// passing the highest seq you got pages forward without gaps.
type LogParams struct {
	Path    string           `json:"path,omitempty"`
	Cwd     string           `json:"cwd,omitempty"`
	Limit   int              `json:"limit,omitempty"`
	Refused *bool            `json:"refused,omitempty"`
	Session policy.SessionID `json:"session,omitempty"`
	Since   uint64           `json:"since,omitempty"`
	// Under keeps the entries about these paths or anything below them
	// (relative to Cwd).
	Under []string `json:"under,omitempty"`
	// Exclude drops the entries whose path matches one of these globs: a
	// glob without a slash matches any path component (".git", "*.log"),
	// one with a slash the path or a directory leading to it.
	Exclude []string `json:"exclude,omitempty"`
}

// LogEntry is one audit entry: a change, or a refused attempt at one
// (Refused holds the FS_… code the caller got, Reason its message, and
// Suppressed how many refusals of the same session, path and code were left
// out of the log just before this one; a refusal has no versions).
type LogEntry struct {
	Seq           uint64            `json:"seq"`
	Time          time.Time         `json:"time"`
	Path          string            `json:"path"`
	Op            policy.MutationOp `json:"op"`
	Session       policy.SessionID  `json:"session,omitempty"`
	SessionName   string            `json:"sessionName,omitempty"` // the session's name, when it has one
	Channel       policy.Channel    `json:"channel,omitempty"`
	PID           int32             `json:"pid,omitempty"`
	UID           uint32            `json:"uid"`
	Before        provider.Version  `json:"before,omitempty"`
	After         provider.Version  `json:"after,omitempty"`
	To            string            `json:"to,omitempty"`
	Unconditional bool              `json:"unconditional,omitempty"`
	Detail        string            `json:"detail,omitempty"`
	Refused       provider.Code     `json:"refused,omitempty"`
	Reason        string            `json:"reason,omitempty"`
	Suppressed    uint64            `json:"suppressed,omitempty"`
	Branch        string            `json:"branch,omitempty"` // the change was made in this branch, not the workspace
}

// LogResult is the result of fs.log, newest first.
type LogResult struct {
	Entries []LogEntry `json:"entries"`
}

// SessionInfo describes one open session in daemon.status.
type SessionInfo struct {
	ID       policy.SessionID `json:"id"`
	Name     string           `json:"name,omitempty"`
	Owner    uint32           `json:"owner"` // uid that opened it
	Opened   time.Time        `json:"opened"`
	LastUsed time.Time        `json:"lastUsed"`
	Strict   bool             `json:"strict,omitempty"` // its bound processes read before every write
}

// MethodCounters counts the requests and errors of one method.
type MethodCounters struct {
	Requests uint64 `json:"requests"`
	Errors   uint64 `json:"errors"`
}

// StatusResult is the result of daemon.status.
type StatusResult struct {
	Source        string                    `json:"source"`
	Mount         string                    `json:"mount,omitempty"`
	Sessions      []SessionInfo             `json:"sessions"`
	Connections   int                       `json:"connections"`
	UptimeSeconds float64                   `json:"uptimeSeconds"`
	Counters      map[string]MethodCounters `json:"counters"`
	// FuseRequests are the FUSE requests the mount answered since it was
	// mounted, by opcode (a daemon serving a mount).
	FuseRequests map[string]uint64 `json:"fuseRequests,omitempty"`
	// CPUSeconds is the daemon's user and system CPU time since it started.
	CPUSeconds float64 `json:"cpuSeconds"`
	// Bindings are the process bindings of the sessions the caller may
	// use (a daemon whose binder lists them).
	Bindings []BindingInfo `json:"bindings,omitempty"`
}

// BindingInfo is one process binding in daemon.status.
type BindingInfo struct {
	Session policy.SessionID `json:"session"`
	PID     int              `json:"pid,omitempty"`    // root process of a process binding
	Cgroup  string           `json:"cgroup,omitempty"` // binding cgroup
	// TreeGone: no bound root process of the session runs any more; a
	// cgroup binding then binds its members only while they stay in it
	// (a root process can leave it and is then unbound).
	TreeGone bool `json:"treeGone,omitempty"`
}
