// Package control owns the daemon's control socket: a Unix stream socket that
// speaks newline-delimited JSON-RPC 2.0, the method table that decodes each
// request, calls the service (package service: read, write, edit, patch,
// move, delete, watch, sessions, audit log, branches) and encodes its
// answer, rpc.discover, and the Go client used by the dshmount CLI. The
// protocol's types and codes are the service's, named here by alias.
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
// fs.watch is served from the policy store's change feed (watch.go): every
// change, whoever made it, is an audit entry whose seq orders it; a watch
// sends fs.changed notifications for the files in its scope, merged per
// path within a short window, replayed from a since and then live, and
// ends with one "lost" notification when it cannot vouch for the rest.
//
// # Security
//
// The socket file is 0600 inside a 0700 directory, and every peer is checked
// with SO_PEERCRED: the daemon's own uid and root are allowed, plus
// Config.AllowUIDs (a root daemon only; the socket is then opened to them
// and their reach checked at start). A root daemon runs the requests of any
// other uid on an OS thread of its own carrying that uid's fsuid, fsgid and
// groups (creds.go), so the kernel grants it over the socket exactly what
// it would on the mount. Sessions belong to the uid that opened them
// (owners.go): another non-root uid cannot use, bind, close or list them,
// and session.bind binds only the caller's own processes.
//
// Resources are bounded (Config): connections, watches, requests served at
// once, the bytes of request lines held across all connections, the time a
// line may take to arrive, and idle connections. Config.Descriptors is the
// most descriptors the socket holds, so the daemon can keep the rest for
// the mount. Request lines are bounded (Config.MaxRequestBytes) and read
// without buffering an oversize line whole. A panic in one request is
// recovered, logged and answered; the daemon and the connection go on.
//
// The package must not know about FUSE, nor reach policy, overlay or
// provider/local but through the service: the mount and the socket meet
// only in the policy Engine, under the service.
package control
