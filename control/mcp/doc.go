// Package mcp serves the guarded workspace as a Model Context Protocol
// server: `dshmount mcp` speaks MCP on stdin/stdout and forwards each tool
// call (read, write, edit, apply_patch, move, delete, list, stat) to a
// running daemon over its control socket.
//
// One MCP connection is one policy session: the session is opened when the
// server starts and closed when the client goes away (stdin closes), so the
// read-before-write rules apply to each agent on its own. Tool failures are
// tool results with isError set whose text starts with the stable FS_… code;
// a stale refusal names who changed the file, from the daemon's audit log.
//
// The package owns the tool schemas, the model-facing rendering of results
// and errors, and the session lifecycle of one MCP connection. It must not
// know about FUSE, the policy store or the providers: everything goes
// through the control client.
package mcp
