package control

import (
	"context"
	"encoding/json"
	"reflect"
)

// method is one row of the method table: everything the daemon knows about
// a socket method. The dispatch map, the method list in errors,
// rpc.discover, the MCP tools' input schemas and docs/protocol-methods.md
// are all built from the table, so a method is added in one place.
type method struct {
	name   string
	doc    string       // one line: what the method does
	params reflect.Type // the params object
	result reflect.Type // the result; Empty when it returns {}
	bind   func(*Server) handler
}

// on adapts a Server method value to the table's bind form.
func on(m func(*Server, context.Context, *conn, json.RawMessage) (any, error)) func(*Server) handler {
	return func(s *Server) handler {
		return func(ctx context.Context, c *conn, params json.RawMessage) (any, error) { return m(s, ctx, c, params) }
	}
}

// typeOf is reflect.TypeFor, short for the table.
func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

// methodTable returns the method table, in the order the method list and
// the documents give them.
func methodTable() []method {
	return []method{
		{MethodSessionOpen, "Open a session: the guard's unit of \"what its author last saw\"; returns its id.",
			typeOf[SessionOpenParams](), typeOf[SessionOpenResult](), on((*Server).sessionOpen)},
		{MethodSessionClose, "Close a session; its observations end, its audit records stay.",
			typeOf[SessionCloseParams](), typeOf[Empty](), on((*Server).sessionClose)},
		{MethodSessionBind, "Bind a process (and its children) on the mount to a session.",
			typeOf[SessionBindParams](), typeOf[SessionBindResult](), on((*Server).sessionBind)},
		{MethodStat, "Stat a path: type, size and version token; records nothing.",
			typeOf[StatParams](), typeOf[StatResult](), on((*Server).stat)},
		{MethodList, "List a directory's entries with their types and versions.",
			typeOf[ListParams](), typeOf[ListResult](), on((*Server).list)},
		{MethodRead, "Read a window of a text file's lines; records the version the session saw.",
			typeOf[ReadParams](), typeOf[ReadResult](), on((*Server).read)},
		{MethodWrite, "Create or replace a file, guarded by the version the session saw (or an expected one).",
			typeOf[WriteParams](), typeOf[WriteResult](), on((*Server).write)},
		{MethodEdit, "Replace an exact string in a file the session read, at the version it read.",
			typeOf[EditParams](), typeOf[EditResult](), on((*Server).edit)},
		{MethodPatch, "Apply a patch (docs/patch-format.md) of adds, updates, moves and deletes; atomic on request.",
			typeOf[PatchParams](), typeOf[PatchResult](), on((*Server).patch)},
		{MethodDelete, "Delete a file the session read, at the version it read.",
			typeOf[DeleteParams](), typeOf[DeleteResult](), on((*Server).delete)},
		{MethodMove, "Move a file the session read to a new path that does not exist.",
			typeOf[MoveParams](), typeOf[MoveResult](), on((*Server).move)},
		{MethodWatch, "Watch a path; changes arrive as fs.changed notifications on this connection.",
			typeOf[WatchParams](), typeOf[WatchResult](), on((*Server).watch)},
		{MethodUnwatch, "Stop a watch.",
			typeOf[UnwatchParams](), typeOf[Empty](), on((*Server).unwatch)},
		{MethodLog, "Page through the audit log, filtered by path, session, actor or time.",
			typeOf[LogParams](), typeOf[LogResult](), on((*Server).auditLog)},
		{MethodStatus, "The daemon's status: mount, store, sessions and per-method counters.",
			typeOf[Empty](), typeOf[StatusResult](), on((*Server).status)},
		{MethodBranchCreate, "Create a branch: a copy-on-write overlay of the workspace.",
			typeOf[BranchCreateParams](), typeOf[BranchInfo](), on((*Server).branchCreate)},
		{MethodBranchList, "List the branches.",
			typeOf[Empty](), typeOf[BranchListResult](), on((*Server).branchList)},
		{MethodBranchDiff, "The branch's changes against its base, as unified diffs.",
			typeOf[BranchDiffParams](), typeOf[BranchDiffResult](), on((*Server).branchDiff)},
		{MethodBranchCommit, "Apply a branch's changes to the workspace through the guard, all or nothing.",
			typeOf[BranchCommitParams](), typeOf[BranchCommitResult](), on((*Server).branchCommit)},
		{MethodBranchDiscard, "Discard a branch and its changes.",
			typeOf[BranchNameParams](), typeOf[Empty](), on((*Server).branchDiscard)},
		{MethodBranchMount, "Mount a branch at a directory of its own.",
			typeOf[BranchMountParams](), typeOf[BranchMountResult](), on((*Server).branchMount)},
		{MethodBranchUnmount, "Unmount a branch's mount.",
			typeOf[BranchNameParams](), typeOf[Empty](), on((*Server).branchUnmount)},
		{MethodBranchRebase, "Three-way merge the workspace's later changes into a branch.",
			typeOf[BranchRebaseParams](), typeOf[BranchRebaseResult](), on((*Server).branchRebase)},
		{MethodChanges, "Page through the change feed from a sequence number (what changed, by whom).",
			typeOf[ChangesParams](), typeOf[ChangesResult](), (*Server).changesMethod},
		{MethodDiscover, "This document: every method with its params and result schemas (OpenRPC).",
			typeOf[Empty](), typeOf[OpenRPC](), on((*Server).discover)},
	}
}

// handlers returns the dispatch map built from the method table.
func (s *Server) handlers() map[string]handler {
	table := methodTable()
	t := make(map[string]handler, len(table))
	for _, m := range table {
		t[m.name] = m.bind(s)
	}
	return t
}

// methodNames lists the methods in the table's order.
func methodNames() []string {
	table := methodTable()
	names := make([]string, len(table))
	for i, m := range table {
		names[i] = m.name
	}
	return names
}
