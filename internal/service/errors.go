package service

import (
	"errors"
	"fmt"

	"github.com/dshmount/dshmount/internal/policy"
	"github.com/dshmount/dshmount/internal/provider"
)

// RPCError is an error answered by the daemon. Filesystem errors carry their
// FS_… Code and unwrap to a *provider.Error with that code, so
// errors.Is(err, provider.ErrStaleVersion) works on a client error; protocol
// faults have an empty Code.
type RPCError struct {
	RPCCode int           // JSON-RPC error code (-32000 for filesystem errors)
	Code    provider.Code // FS_… code, "" for protocol faults
	Path    string        // display path the error concerns, when known
	Message string        // what happened and what to do next
	Resume  uint64        // FS_CHANGES_LOST: the since to watch again with, after a rescan
	// Conflicts are the paths a branch commit or atomic patch conflicts on.
	Conflicts []string
	// ConflictHunks are the conflicted regions of a refused merge.
	ConflictHunks []ConflictHunk
}

// Error renders "FS_CODE: message" or "rpc error N: message".
func (e *RPCError) Error() string {
	if e.Code != "" {
		return string(e.Code) + ": " + e.Message
	}
	return fmt.Sprintf("rpc error %d: %s", e.RPCCode, e.Message)
}

// Unwrap returns the filesystem error with the same code, or nil.
func (e *RPCError) Unwrap() error {
	if e.Code == "" {
		return nil
	}
	return &provider.Error{Code: e.Code, Path: e.Path, Message: e.Message}
}

// rpcErrorFromObject converts a wire error object.
func rpcErrorFromObject(o *ErrorObject) *RPCError {
	e := &RPCError{RPCCode: o.Code, Message: o.Message}
	if o.Data != nil {
		e.Code = o.Data.Code
		e.Path = o.Data.Path
		e.Conflicts = o.Data.Conflicts
		e.ConflictHunks = o.Data.ConflictHunks
		if o.Data.Message != "" {
			e.Message = o.Data.Message
		}
		if o.Data.Resume != nil {
			e.Resume = *o.Data.Resume
		}
	}
	return e
}

// callError is a handler error that is already a JSON-RPC error object.
type callError struct{ obj ErrorObject }

func (e *callError) Error() string { return e.obj.Message }

// invalidParams builds a -32602 error; its data is FS_INVALID_ARGUMENT,
// as for every invalid argument.
func invalidParams(format string, args ...any) error {
	return invalidField("", format, args...)
}

// invalidField is invalidParams about the parameter field (data.field).
func invalidField(field, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return &callError{obj: ErrorObject{Code: CodeInvalidParams, Message: msg,
		Data: &ErrorData{Code: provider.CodeInvalidArgument, Field: field, Message: msg}}}
}

// invalidArgument builds a -32602 error about one path, with FS data so
// clients can route it.
func invalidArgument(path, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	return &callError{obj: ErrorObject{Code: CodeInvalidParams, Message: msg,
		Data: &ErrorData{Code: provider.CodeInvalidArgument, Path: path, Message: msg}}}
}

// errorObject maps a handler error onto a JSON-RPC error object.
func errorObject(err error) *ErrorObject {
	var ce *callError
	if errors.As(err, &ce) {
		o := ce.obj
		return &o
	}
	var pe *provider.Error
	if errors.As(err, &pe) {
		msg := pe.Message
		if msg == "" {
			msg = pe.Error()
		}
		o := &ErrorObject{Code: CodeFilesystem, Message: string(pe.Code) + ": " + msg,
			Data: &ErrorData{Code: pe.Code, Path: pe.Path, Message: msg}}
		var lost *policy.ChangesLostError
		if errors.As(err, &lost) {
			o.Data.Resume = &lost.Resume
		}
		return o
	}
	if errors.Is(err, policy.ErrUnknownSession) {
		msg := err.Error()
		return &ErrorObject{Code: CodeInvalidParams, Message: msg,
			Data: &ErrorData{Code: provider.CodeInvalidArgument, Message: msg}}
	}
	return &ErrorObject{Code: CodeInternalError, Message: err.Error()}
}

// WithAfter is a method result whose After func runs once the response
// has been written (a watch starts notifying only after its id is known).
type WithAfter[R any] struct {
	Result R
	After  func()
}

// Split returns the result to encode and the func to run once it is
// written (AfterResponse).
func (w WithAfter[R]) Split() (result any, after func()) { return w.Result, w.After }

// AfterResponse is a method result with a func to run once the response
// has been written (WithAfter); a transport encodes the result Split
// returns.
type AfterResponse interface {
	Split() (result any, after func())
}

// CallError returns an error that is already the JSON-RPC error object
// obj (a transport answers it as is).
func CallError(obj ErrorObject) error { return &callError{obj: obj} }

// InvalidParams builds a -32602 error; its data is FS_INVALID_ARGUMENT.
func InvalidParams(format string, args ...any) error { return invalidParams(format, args...) }

// InvalidField is InvalidParams about the parameter field (data.field).
func InvalidField(field, format string, args ...any) error {
	return invalidField(field, format, args...)
}

// ErrorObjectOf maps a method's error onto a JSON-RPC error object: one
// mapping for every transport.
func ErrorObjectOf(err error) *ErrorObject { return errorObject(err) }

// RPCErrorFromObject converts a wire error object (the client side).
func RPCErrorFromObject(o *ErrorObject) *RPCError { return rpcErrorFromObject(o) }
