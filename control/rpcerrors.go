package control

import "github.com/dshmount/dshmount/internal/service"

// The error model is the service's (service.ErrorObjectOf): the socket
// answers a method's error with the object it maps to.

// callError is an error that is already a JSON-RPC error object.
func callError(obj ErrorObject) error { return service.CallError(obj) }

// invalidParams builds a -32602 error; its data is FS_INVALID_ARGUMENT.
func invalidParams(format string, args ...any) error { return service.InvalidParams(format, args...) }

// invalidField is invalidParams about the parameter field (data.field).
func invalidField(field, format string, args ...any) error {
	return service.InvalidField(field, format, args...)
}

// errorObject maps a method's error onto a JSON-RPC error object.
func errorObject(err error) *ErrorObject { return service.ErrorObjectOf(err) }

// rpcErrorFromObject converts a wire error object.
func rpcErrorFromObject(o *ErrorObject) *RPCError { return service.RPCErrorFromObject(o) }
