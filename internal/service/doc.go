// Package service runs the methods of the control protocol, whichever
// transport carries them: the guarded fs operations (stat, list, read,
// write, edit, patch, move, delete), the patch executor (preflight every
// operation, then commit with re-acquired guards, or all at once through
// the journal), a stale change merged over the current bytes, branch
// commits, rebases and the branch-mount lifecycle, sessions and their
// owners, the audit log, fs.watch and the fs.changes feed, and the error
// mapping every transport answers with.
//
// A transport decodes a request into the method's params, passes it with
// the Caller of its connection (who asks: uid, pid, bound and implicit
// sessions) and encodes the result. The protocol's params, results and
// error codes are declared here.
//
// The package must not know the transports: no framing, no socket, no
// FUSE. It reaches the workspace through the policy Engine, the view and
// the branch manager it is configured with.
package service
