// Package branch owns dshmount's branches: named copy-on-write layers over
// the live workspace, kept under the daemon's state directory, and the
// journaled all-or-nothing commit that applies a set of changes to the
// workspace.
//
// # Layout
//
// A branch NAME lives in <state>/branches/NAME/:
//
//	branch.json   name, creation time and mount directory (temp file + rename)
//	changes.log   one JSON record per change of a path's state, appended
//	upper/        the branch's own files, at their workspace-relative paths
//	base/         copies of the workspace bytes each file started from (up
//	              to maxDiffBytes; basecopy.go), for branch.diff
//
// Reads of a path the branch has not changed fall through to the workspace
// as it is now (the base is live, as in overlayfs: a branch sees the
// workspace's later changes to files it did not touch). The first change of
// a path copies it up and records its copy-up base: the content version of
// the workspace bytes it started from, or "absent" for a file the branch
// creates. A delete is a whiteout (a record, no file). A record is appended
// only after the upper file it describes is in place, so a kill -9 at any
// point leaves either the previous state or the new one (an upper file
// without a record is an orphan, removed on open; so is a base copy).
// Creating a branch writes one small file and renames one directory: O(1)
// whatever the workspace holds.
//
// # Targets
//
// A branch is a provider.FileSystem. Its targets keep the workspace-relative
// DisplayPath (so hide and read-only rules apply unchanged) and get keys in
// their own namespace ("branch/NAME/rel"): observations, last writers and
// locks are per (branch, path).
//
// # Commit
//
// Commit (and an atomic patch) applies a ChangeSet through a journal: under
// the workspace provider's per-target locks of every path it touches, each
// path's current workspace version must still be the change's base (else
// FS_STALE_VERSION naming every conflict, nothing applied); then an intent
// record is written and fsynced, the new files are staged in
// <workspace>/.dshmount-staging/ID/ (the workspace's own filesystem, so the
// renames cannot cross devices; the view hides it) together with hard-link
// backups of the files they replace or delete, the journal is marked
// applying, the staged files are renamed into place, the workspace is
// flushed, and the journal is marked applied; only then is the branch
// reset or removed, and the journal deleted. Open settles a journal left
// by a killed daemon by its state: staging is dropped (nothing was
// applied); applying goes forward when every path is either applied or
// still at its base, else back (a path changed while the daemon was down
// keeps that change, and the branch, untouched until applied, stays as it
// was); applied goes forward whatever changed while the daemon was down
// (a later change on top, reported as out of band). So the workspace is
// entirely before the commit with the branch intact, or entirely after
// it: the branch's changes are never lost. A reader of the workspace
// directory itself can see a commit half applied while it runs; readers
// through dshmount wait for the per-target locks.
//
// # Mounts
//
// A FUSE mount of a branch (package fuse) reads and writes the files of
// UpperDir itself, and changes a path's state only through the operations
// of mount.go (CopyUp, CreateFile, Mkdir, Symlink, Remove, RemoveDir,
// Rename, Chmod), which keep the records. The socket-facing mutations take
// the same per-target locks (the workspace's lock table, branch keys) as
// the mount's check-then-change sequences. A hard link, or a rename of a
// directory the workspace has, has no record: both are refused.
//
// It must not know about FUSE, sockets or the observation policy.
package branch
