// Package control owns the daemon's control socket: a Unix stream socket that
// speaks newline-delimited JSON-RPC 2.0, the server that maps each request
// onto the policy Engine (read, write, edit, patch, move, delete, watch,
// sessions, audit log), the patch executor (preflight every operation, then
// commit with re-acquired guards), and the Go client used by the dshmount
// CLI.
//
// # Wire protocol
//
// One request per line, one response per line. Requests on one connection
// may be pipelined; responses carry the request id and may arrive out of
// order. Paths are workspace-relative (or absolute inside the workspace or
// the mount); every method accepts "cwd" as the base for relative paths.
// Every mutation accepts "session" (default: the connection's own implicit
// session, opened on first use and closed with the connection), "expected"
// (an explicit guard overriding the observation policy) and "unconditional"
// (skip the guard; audited). Filesystem failures are JSON-RPC errors with
// code -32000 whose data is {"code":"FS_…","path":…,"message":…}; protocol
// faults use the standard codes -32700, -32600, -32601 and -32602.
//
// # Security
//
// The socket file is 0600 inside a 0700 directory, and every peer is checked
// with SO_PEERCRED: the daemon's own uid and root are allowed, plus
// Config.AllowUIDs. Request lines are bounded (Config.MaxRequestBytes) and
// read without buffering an oversize line whole. A panic in one request is
// recovered, logged and answered; the daemon and the connection go on.
//
// The package must not know about FUSE: the mount and the socket meet only
// in the policy Engine.
package control
