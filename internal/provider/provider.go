// Package provider is the storage seam of dshmount: the FileSystem interface
// every backend implements, its value types (targets, versions, outcomes) and
// the one error type with stable codes.
//
// It owns no policy: guards are optional arguments, and a call without a
// guard is unconditional but still atomic. It must not know about the policy
// store, FUSE or the control socket.
package provider

import (
	"context"
	"iter"

	"github.com/dshmount/dshmount/patch"
)

// Key is the opaque identity of a target. Two paths to the same file resolve
// to the same Key. Consumers must not parse it.
type Key string

// Version is an opaque token that names a file's content: equal bytes give
// an equal version, any byte difference a different one (for the local
// backend, a SHA-256 digest of the bytes). Metadata-only changes (times,
// mode, owner, extended attributes) leave it as it is. Consumers must not
// interpret it.
type Version string

// Target is a path resolved by a backend into a stable identity.
type Target struct {
	Key         Key    // opaque identity for guards and lookups
	DisplayPath string // path for people and models (workspace-relative for local)
}

// FileType classifies a target.
type FileType string

// File types. Info and DirEntry use File, Directory and Other; PathInfo may
// also report Symlink.
const (
	TypeFile      FileType = "file"
	TypeDirectory FileType = "directory"
	TypeSymlink   FileType = "symlink"
	TypeOther     FileType = "other"
)

// Info is metadata about a target (never content).
type Info struct {
	Version Version
	Type    FileType
	Size    int64 // byte size; meaningful for regular files
}

// PathInfo is metadata about a path without following a final symlink.
type PathInfo struct {
	Version Version
	Type    FileType // may be TypeSymlink
	Size    int64
}

// DirEntry is one direct child returned by ListDir.
type DirEntry struct {
	Name    string
	Type    FileType // TypeOther, without metadata, for broken or vanished children
	Target  Target
	Version Version // empty when unavailable
	Size    int64
}

// IntentKind selects a guarded write intent.
type IntentKind string

// Write intents.
const (
	// CreateIfAbsent creates a missing target and refuses an existing one
	// with FS_NOT_OBSERVED, even if it appears after the first probe.
	CreateIfAbsent IntentKind = "createIfAbsent"
	// ReplaceIfVersion replaces only a present target at Version, else
	// FS_STALE_VERSION.
	ReplaceIfVersion IntentKind = "replaceIfVersion"
)

// WriteIntent guards WriteText. A nil *WriteIntent means unconditional
// create-or-overwrite.
type WriteIntent struct {
	Kind    IntentKind
	Version Version // for ReplaceIfVersion
}

// VersionGuard guards edit, patch, delete and move sources. A nil
// *VersionGuard means unconditional.
type VersionGuard struct {
	Version Version
}

// EditRequest is a literal search-and-replace.
type EditRequest struct {
	OldString  string // non-empty literal, matched after line-ending normalization
	NewString  string // replacement; empty deletes the match
	ReplaceAll bool   // replace every match instead of requiring exactly one
}

// Operation tells whether a write created or replaced a file.
type Operation string

// Write operations.
const (
	OpCreate Operation = "create"
	OpUpdate Operation = "update"
)

// DefaultMaxBasisBytes is the default bound of an outcome's Before and
// SourceBefore texts: a previous content larger than this gets none.
const DefaultMaxBasisBytes int64 = 8 << 20

// WriteOutcome is the result of a full-file write.
type WriteOutcome struct {
	Operation Operation
	Version   Version
	// Before is the LF-normalized previous content, nil for a create or when
	// the backend declined a basis (binary, over the bound).
	Before *string
	// After is the LF-normalized new content.
	After string
}

// EditOutcome is the result of an edit or a patch.
type EditOutcome struct {
	Version Version
	Before  string // LF-normalized content before
	After   string // LF-normalized content after
}

// DeleteOutcome is the result of a delete.
type DeleteOutcome struct {
	Before *string // bounded LF-normalized removed content, or nil
}

// SourceFailure reports a move whose destination was published but whose
// source could not be removed.
type SourceFailure struct {
	Code    Code
	Message string
}

// MoveOptions are the optional hunks and guards of MoveFile.
type MoveOptions struct {
	Hunks               []patch.Hunk  // applied to the source text before publishing
	ExpectedSource      *VersionGuard // nil: unconditional
	ExpectedDestination *WriteIntent  // nil: unconditional
}

// MoveOutcome is the result of a move. When SourceDeleted is false,
// SourceFailure says why; the destination is published either way.
type MoveOutcome struct {
	SourceBefore  *string
	Destination   WriteOutcome
	SourceDeleted bool
	SourceFailure *SourceFailure
}

// ResolveOptions modify path resolution.
type ResolveOptions struct {
	// Cwd is the base for relative paths, itself relative to the root (or
	// absolute inside it). Empty means the root.
	Cwd string
}

// ByteRange is a window [Offset, Offset+Length) of a file.
type ByteRange struct {
	Offset int64
	Length int64
}

// FileID is the identity of a file's storage (device and inode numbers). It
// is shared by hard links.
type FileID struct {
	Dev uint64
	Ino uint64
}

// TextVersionReader is implemented by backends that read a file's text
// together with the version of exactly the bytes read. Versions name bytes
// and can recur (a file emptied, written, emptied again), so a version
// taken by a separate Stat may belong to other bytes than the text: an
// observation recorded from it could later let an edit prepared against
// the text pass a guard on bytes it never saw.
type TextVersionReader interface {
	// ReadTextVersion is ReadText plus the Info of the bytes it read.
	ReadTextVersion(ctx context.Context, t Target) (string, Info, error)
}

// FileSystem is the provider seam. Every call takes a context; cancellation
// is checked at syscall boundaries and before publication (FS_ABORTED). All
// failures are *Error values.
type FileSystem interface {
	// Resolve turns a path into a stable Target; relative paths resolve
	// against opts.Cwd.
	Resolve(ctx context.Context, path string, opts ResolveOptions) (Target, error)
	// Lstat returns path metadata without following a final symlink; nil
	// with a nil error when the path is absent.
	Lstat(ctx context.Context, path string, opts ResolveOptions) (*PathInfo, error)
	// Stat returns target metadata; nil with a nil error when absent.
	Stat(ctx context.Context, t Target) (*Info, error)
	// ReadText reads a whole regular UTF-8 text file.
	ReadText(ctx context.Context, t Target) (string, error)
	// StreamText yields the same text as ReadText in decoded chunks.
	StreamText(ctx context.Context, t Target) (iter.Seq2[string, error], error)
	// ReadBytes reads a whole regular file of at most maxBytes bytes, else
	// FS_TOO_LARGE; never truncates.
	ReadBytes(ctx context.Context, t Target, maxBytes int64) ([]byte, error)
	// ReadByteRange reads at most r.Length bytes starting at r.Offset.
	ReadByteRange(ctx context.Context, t Target, r ByteRange) ([]byte, error)
	// ListDir lists direct children in name order, metadata only.
	ListDir(ctx context.Context, t Target) ([]DirEntry, error)
	// WriteText atomically creates or replaces text, guarded by expected.
	WriteText(ctx context.Context, t Target, content string, expected *WriteIntent) (WriteOutcome, error)
	// EditText atomically applies a literal edit; the guard is checked
	// before the match.
	EditText(ctx context.Context, t Target, edit EditRequest, expected *VersionGuard) (EditOutcome, error)
	// PatchText atomically applies parsed hunks to the LF-normalized text.
	PatchText(ctx context.Context, t Target, hunks []patch.Hunk, expected *VersionGuard) (EditOutcome, error)
	// DeleteFile removes a regular file.
	DeleteFile(ctx context.Context, t Target, expected *VersionGuard) (DeleteOutcome, error)
	// MoveFile publishes the (optionally patched) source at the destination,
	// then removes the source.
	MoveFile(ctx context.Context, src, dst Target, opts MoveOptions) (MoveOutcome, error)
	// ProcessPath returns the absolute path a subprocess can open.
	ProcessPath(t Target) string
	// ProcessPathFromHostPath maps a host path into this filesystem, when
	// it is inside it.
	ProcessPathFromHostPath(hostPath string) (string, bool)
	// FileURL returns the canonical file: URI of t.
	FileURL(t Target) string
	// Contains reports whether child is parent or a descendant of it.
	Contains(parent, child Target) bool
}
