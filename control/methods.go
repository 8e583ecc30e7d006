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
	result reflect.Type // the result; Empty when it returns {} (a service method's: its return type)
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
func call[P, R any](method string, f func(*service.Service, context.Context, *service.Caller, P) (R, error)) func(*Server) handler {
	return func(s *Server) handler {
		return func(ctx context.Context, c *conn, params json.RawMessage) (any, error) {
			var p P
			if err := decodeParams(method, params, &p); err != nil {
				return nil, err
			}
			r, err := f(s.svc, ctx, c.caller, p)
			if err != nil {
				return nil, err
			}
			return r, nil
		}
	}
}

// serviceMethod is the row of a method the service serves: the params and
// result types are the service method's own, so the table, rpc.discover and
// the documents cannot disagree with what the method decodes and returns.
func serviceMethod[P, R any](name, doc string, f func(*service.Service, context.Context, *service.Caller, P) (R, error)) method {
	return method{name: name, doc: doc, params: typeOf[P](), result: resultType(typeOf[R]()), bind: call(name, f)}
}

// afterResponse is the type of results that run a func once written.
var afterResponse = typeOf[service.AfterResponse]()

// resultType is the type a method's result encodes as: the result of a
// service.WithAfter, else t.
func resultType(t reflect.Type) reflect.Type {
	if t.Kind() == reflect.Struct && t.Implements(afterResponse) {
		if f, ok := t.FieldByName("Result"); ok {
			return f.Type
		}
	}
	return t
}

// typeOf is reflect.TypeFor, short for the table.
func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

// methodTable returns the method table, in the order the method list and
// the documents give them.
func methodTable() []method {
	return []method{
		serviceMethod(MethodSessionOpen, "Open a session: the guard's unit of \"what its author last saw\"; returns its id.",
			(*service.Service).SessionOpen),
		serviceMethod(MethodSessionClose, "Close a session; its observations end, its audit records stay.",
			(*service.Service).SessionClose),
		serviceMethod(MethodSessionBind, "Bind a process (and its children) on the mount to a session.",
			(*service.Service).SessionBind),
		serviceMethod(MethodStat, "Stat a path: type, size and version token; records nothing.",
			(*service.Service).Stat),
		serviceMethod(MethodList, "List a directory's entries with their types and versions.",
			(*service.Service).List),
		serviceMethod(MethodRead, "Read a window of a text file's lines; records the version the session saw.",
			(*service.Service).Read),
		serviceMethod(MethodWrite, "Create or replace a file, guarded by the version the session saw (or an expected one).",
			(*service.Service).Write),
		serviceMethod(MethodEdit, "Replace an exact string in a file the session read, at the version it read.",
			(*service.Service).Edit),
		serviceMethod(MethodPatch, "Apply a patch (docs/patch-format.md) of adds, updates, moves and deletes; atomic on request.",
			(*service.Service).Patch),
		serviceMethod(MethodDelete, "Delete a file the session read, at the version it read.",
			(*service.Service).Delete),
		serviceMethod(MethodMove, "Move a file the session read to a new path that does not exist.",
			(*service.Service).Move),
		serviceMethod(MethodWatch, "Watch a path; changes arrive as fs.changed notifications on this connection.",
			(*service.Service).Watch),
		serviceMethod(MethodUnwatch, "Stop a watch.",
			(*service.Service).Unwatch),
		serviceMethod(MethodLog, "Page through the audit log, filtered by path, session, actor or time.",
			(*service.Service).AuditLog),
		{MethodStatus, "The daemon's status: mount, store, sessions and per-method counters.",
			typeOf[Empty](), typeOf[StatusResult](), on((*Server).status)},
		serviceMethod(MethodBranchCreate, "Create a branch: a copy-on-write overlay of the workspace.",
			(*service.Service).BranchCreate),
		serviceMethod(MethodBranchList, "List the branches.",
			(*service.Service).BranchList),
		serviceMethod(MethodBranchDiff, "The branch's changes against its base, as unified diffs.",
			(*service.Service).BranchDiff),
		serviceMethod(MethodBranchCommit, "Apply a branch's changes to the workspace through the guard, all or nothing.",
			(*service.Service).BranchCommit),
		serviceMethod(MethodBranchDiscard, "Discard a branch and its changes.",
			(*service.Service).BranchDiscard),
		serviceMethod(MethodBranchMount, "Mount a branch at a directory of its own.",
			(*service.Service).BranchMount),
		serviceMethod(MethodBranchUnmount, "Unmount a branch's mount.",
			(*service.Service).BranchUnmount),
		serviceMethod(MethodBranchRebase, "Three-way merge the workspace's later changes into a branch.",
			(*service.Service).BranchRebase),
		serviceMethod(MethodChanges, "Page through the change feed from a sequence number (what changed, by whom).",
			(*service.Service).Changes),
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
