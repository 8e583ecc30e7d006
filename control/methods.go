package control

import (
	"context"
	"encoding/json"
	"reflect"

	"github.com/dshmount/dshmount/internal/service"
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

// call adapts a service method to the table's bind form: decode the
// params (decodeParams), call the service with the connection's caller,
// and hand the result back to be encoded.
func call[P any](method string, f func(*service.Service, context.Context, *service.Caller, P) (any, error)) func(*Server) handler {
	return func(s *Server) handler {
		return func(ctx context.Context, c *conn, params json.RawMessage) (any, error) {
			var p P
			if err := decodeParams(method, params, &p); err != nil {
				return nil, err
			}
			return f(s.svc, ctx, c.caller, p)
		}
	}
}

// typeOf is reflect.TypeFor, short for the table.
func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

// methodTable returns the method table, in the order the method list and
// the documents give them.
func methodTable() []method {
	return []method{
		{MethodSessionOpen, "Open a session: the guard's unit of \"what its author last saw\"; returns its id.",
			typeOf[SessionOpenParams](), typeOf[SessionOpenResult](), call(MethodSessionOpen, (*service.Service).SessionOpen)},
		{MethodSessionClose, "Close a session; its observations end, its audit records stay.",
			typeOf[SessionCloseParams](), typeOf[Empty](), call(MethodSessionClose, (*service.Service).SessionClose)},
		{MethodSessionBind, "Bind a process (and its children) on the mount to a session.",
			typeOf[SessionBindParams](), typeOf[SessionBindResult](), call(MethodSessionBind, (*service.Service).SessionBind)},
		{MethodStat, "Stat a path: type, size and version token; records nothing.",
			typeOf[StatParams](), typeOf[StatResult](), call(MethodStat, (*service.Service).Stat)},
		{MethodList, "List a directory's entries with their types and versions.",
			typeOf[ListParams](), typeOf[ListResult](), call(MethodList, (*service.Service).List)},
		{MethodRead, "Read a window of a text file's lines; records the version the session saw.",
			typeOf[ReadParams](), typeOf[ReadResult](), call(MethodRead, (*service.Service).Read)},
		{MethodWrite, "Create or replace a file, guarded by the version the session saw (or an expected one).",
			typeOf[WriteParams](), typeOf[WriteResult](), call(MethodWrite, (*service.Service).Write)},
		{MethodEdit, "Replace an exact string in a file the session read, at the version it read.",
			typeOf[EditParams](), typeOf[EditResult](), call(MethodEdit, (*service.Service).Edit)},
		{MethodPatch, "Apply a patch (docs/patch-format.md) of adds, updates, moves and deletes; atomic on request.",
			typeOf[PatchParams](), typeOf[PatchResult](), call(MethodPatch, (*service.Service).Patch)},
		{MethodDelete, "Delete a file the session read, at the version it read.",
			typeOf[DeleteParams](), typeOf[DeleteResult](), call(MethodDelete, (*service.Service).Delete)},
		{MethodMove, "Move a file the session read to a new path that does not exist.",
			typeOf[MoveParams](), typeOf[MoveResult](), call(MethodMove, (*service.Service).Move)},
		{MethodWatch, "Watch a path; changes arrive as fs.changed notifications on this connection.",
			typeOf[WatchParams](), typeOf[WatchResult](), call(MethodWatch, (*service.Service).Watch)},
		{MethodUnwatch, "Stop a watch.",
			typeOf[UnwatchParams](), typeOf[Empty](), call(MethodUnwatch, (*service.Service).Unwatch)},
		{MethodLog, "Page through the audit log, filtered by path, session, actor or time.",
			typeOf[LogParams](), typeOf[LogResult](), call(MethodLog, (*service.Service).AuditLog)},
		{MethodStatus, "The daemon's status: mount, store, sessions and per-method counters.",
			typeOf[Empty](), typeOf[StatusResult](), on((*Server).status)},
		{MethodBranchCreate, "Create a branch: a copy-on-write overlay of the workspace.",
			typeOf[BranchCreateParams](), typeOf[BranchInfo](), call(MethodBranchCreate, (*service.Service).BranchCreate)},
		{MethodBranchList, "List the branches.",
			typeOf[Empty](), typeOf[BranchListResult](), call(MethodBranchList, (*service.Service).BranchList)},
		{MethodBranchDiff, "The branch's changes against its base, as unified diffs.",
			typeOf[BranchDiffParams](), typeOf[BranchDiffResult](), call(MethodBranchDiff, (*service.Service).BranchDiff)},
		{MethodBranchCommit, "Apply a branch's changes to the workspace through the guard, all or nothing.",
			typeOf[BranchCommitParams](), typeOf[BranchCommitResult](), call(MethodBranchCommit, (*service.Service).BranchCommit)},
		{MethodBranchDiscard, "Discard a branch and its changes.",
			typeOf[BranchNameParams](), typeOf[Empty](), call(MethodBranchDiscard, (*service.Service).BranchDiscard)},
		{MethodBranchMount, "Mount a branch at a directory of its own.",
			typeOf[BranchMountParams](), typeOf[BranchMountResult](), call(MethodBranchMount, (*service.Service).BranchMount)},
		{MethodBranchUnmount, "Unmount a branch's mount.",
			typeOf[BranchNameParams](), typeOf[Empty](), call(MethodBranchUnmount, (*service.Service).BranchUnmount)},
		{MethodBranchRebase, "Three-way merge the workspace's later changes into a branch.",
			typeOf[BranchRebaseParams](), typeOf[BranchRebaseResult](), call(MethodBranchRebase, (*service.Service).BranchRebase)},
		{MethodChanges, "Page through the change feed from a sequence number (what changed, by whom).",
			typeOf[ChangesParams](), typeOf[ChangesResult](), call(MethodChanges, (*service.Service).Changes)},
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
