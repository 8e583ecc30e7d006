package control

import (
	"time"

	"github.com/dshmount/dshmount/internal/service"
)

// The protocol's types, codes and method names are the service's: the
// socket serves them and the Client speaks them, so clients name them
// here as before.
type (
	BindingInfo        = service.BindingInfo
	BindingLister      = service.BindingLister
	BranchCommitParams = service.BranchCommitParams
	BranchCommitResult = service.BranchCommitResult
	BranchCreateParams = service.BranchCreateParams
	BranchDiffParams   = service.BranchDiffParams
	BranchDiffResult   = service.BranchDiffResult
	BranchFile         = service.BranchFile
	BranchInfo         = service.BranchInfo
	BranchListResult   = service.BranchListResult
	BranchMountParams  = service.BranchMountParams
	BranchMountResult  = service.BranchMountResult
	BranchMounter      = service.BranchMounter
	BranchNameParams   = service.BranchNameParams
	BranchRebaseParams = service.BranchRebaseParams
	BranchRebaseResult = service.BranchRebaseResult
	Change             = service.Change
	ChangeActor        = service.ChangeActor
	ChangeEvent        = service.ChangeEvent
	ChangeKind         = service.ChangeKind
	ChangedPath        = service.ChangedPath
	ChangesCursor      = service.ChangesCursor
	ChangesParams      = service.ChangesParams
	ChangesResult      = service.ChangesResult
	Channel            = service.Channel
	CommittedFile      = service.CommittedFile
	Committer          = service.Committer
	ConflictHunk       = service.ConflictHunk
	DeleteParams       = service.DeleteParams
	DeleteResult       = service.DeleteResult
	EditParams         = service.EditParams
	EditResult         = service.EditResult
	Empty              = service.Empty
	ErrorData          = service.ErrorData
	ErrorObject        = service.ErrorObject
	Line               = service.Line
	ListEntry          = service.ListEntry
	ListParams         = service.ListParams
	ListResult         = service.ListResult
	LogEntry           = service.LogEntry
	LogParams          = service.LogParams
	LogResult          = service.LogResult
	MethodCounters     = service.MethodCounters
	MoveParams         = service.MoveParams
	MoveResult         = service.MoveResult
	MutationOp         = service.MutationOp
	PatchOpResult      = service.PatchOpResult
	PatchParams        = service.PatchParams
	PatchResult        = service.PatchResult
	PatchStatus        = service.PatchStatus
	ProcessBinder      = service.ProcessBinder
	RPCError           = service.RPCError
	ReadParams         = service.ReadParams
	ReadResult         = service.ReadResult
	SessionBindParams  = service.SessionBindParams
	SessionBindResult  = service.SessionBindResult
	SessionCloseParams = service.SessionCloseParams
	SessionID          = service.SessionID
	SessionInfo        = service.SessionInfo
	SessionOpenParams  = service.SessionOpenParams
	SessionOpenResult  = service.SessionOpenResult
	SourceFailure      = service.SourceFailure
	StatParams         = service.StatParams
	StatResult         = service.StatResult
	StatusResult       = service.StatusResult
	StrictBinder       = service.StrictBinder
	UnwatchParams      = service.UnwatchParams
	VersionExpected    = service.VersionExpected
	WatchParams        = service.WatchParams
	WatchResult        = service.WatchResult
	WriteExpected      = service.WriteExpected
	WriteParams        = service.WriteParams
	WriteResult        = service.WriteResult
)

// The protocol's constants.
const (
	BranchUnmountGrace  = service.BranchUnmountGrace
	ChangeAttrib        = service.ChangeAttrib
	ChangeCreated       = service.ChangeCreated
	ChangeDeleted       = service.ChangeDeleted
	ChangeLost          = service.ChangeLost
	ChangeModified      = service.ChangeModified
	ChangeRenamed       = service.ChangeRenamed
	ChangesCookiePrefix = service.ChangesCookiePrefix
	ChangesTokenPrefix  = service.ChangesTokenPrefix
	ChannelMCP          = service.ChannelMCP
	ChannelMount        = service.ChannelMount
	OpCreate            = service.OpCreate
	OpWrite             = service.OpWrite
	OpTruncate          = service.OpTruncate
	OpSetattr           = service.OpSetattr
	ChannelSocket       = service.ChannelSocket
	CodeFilesystem      = service.CodeFilesystem
	CodeInternalError   = service.CodeInternalError
	CodeInvalidParams   = service.CodeInvalidParams
	CodeInvalidRequest  = service.CodeInvalidRequest
	CodeMethodNotFound  = service.CodeMethodNotFound
	CodeParseError      = service.CodeParseError
	CodePeerRefused     = service.CodePeerRefused
	CodeUnavailable     = service.CodeUnavailable
	DefaultChangesMax   = service.DefaultChangesMax
	DefaultDiffLimit    = service.DefaultDiffLimit
	DefaultLogLimit     = service.DefaultLogLimit
	DefaultMaxWatches   = service.DefaultMaxWatches
	DefaultReadLimit    = service.DefaultReadLimit
	DefaultReadMaxBytes = service.DefaultReadMaxBytes
	DefaultWatchWindow  = service.DefaultWatchWindow
	MaxReadLimit        = service.MaxReadLimit
	MaxReadMaxBytes     = service.MaxReadMaxBytes
	MethodBranchCommit  = service.MethodBranchCommit
	MethodBranchCreate  = service.MethodBranchCreate
	MethodBranchDiff    = service.MethodBranchDiff
	MethodBranchDiscard = service.MethodBranchDiscard
	MethodBranchList    = service.MethodBranchList
	MethodBranchMount   = service.MethodBranchMount
	MethodBranchRebase  = service.MethodBranchRebase
	MethodBranchUnmount = service.MethodBranchUnmount
	MethodChanges       = service.MethodChanges
	MethodDelete        = service.MethodDelete
	MethodEdit          = service.MethodEdit
	MethodList          = service.MethodList
	MethodLog           = service.MethodLog
	MethodMove          = service.MethodMove
	MethodPatch         = service.MethodPatch
	MethodRead          = service.MethodRead
	MethodSessionBind   = service.MethodSessionBind
	MethodSessionClose  = service.MethodSessionClose
	MethodSessionOpen   = service.MethodSessionOpen
	MethodStat          = service.MethodStat
	MethodStatus        = service.MethodStatus
	MethodUnwatch       = service.MethodUnwatch
	MethodWatch         = service.MethodWatch
	MethodWrite         = service.MethodWrite
	NotifyChanged       = service.NotifyChanged
	OpDelete            = service.OpDelete
	OpMove              = service.OpMove
	OpRename            = service.OpRename
	OpUnlink            = service.OpUnlink
	PatchApplied        = service.PatchApplied
	PatchFailed         = service.PatchFailed
	PatchNotRun         = service.PatchNotRun
)

// ErrDetachedLazily is wrapped by an unmount that found the mount busy and
// detached it lazily (service.ErrDetachedLazily).
var ErrDetachedLazily = service.ErrDetachedLazily

// DescribeChange is service.DescribeChange.
func DescribeChange(c Change, self SessionID) string { return service.DescribeChange(c, self) }

// Ago is service.Ago.
func Ago(d time.Duration) string { return service.Ago(d) }

// ConflictHunksText is service.ConflictHunksText.
func ConflictHunksText(hunks []ConflictHunk) string { return service.ConflictHunksText(hunks) }

// FormatChangesToken is service.FormatChangesToken.
func FormatChangesToken(run string, seq uint64) string { return service.FormatChangesToken(run, seq) }

// ParseChangesToken is service.ParseChangesToken.
func ParseChangesToken(tok string) (run string, seq uint64, ok bool) {
	return service.ParseChangesToken(tok)
}

// IsChangesCookie is service.IsChangesCookie.
func IsChangesCookie(p string) bool { return service.IsChangesCookie(p) }
