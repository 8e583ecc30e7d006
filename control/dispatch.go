package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"unicode/utf8"

	"github.com/dshmount/dshmount/internal/service"
)

// handler serves one method. params is the raw params value (nil when
// absent).
type handler func(ctx context.Context, c *conn, params json.RawMessage) (any, error)

// handleLine decodes one request line, runs it and returns the encoded
// response (nil for a notification) and an optional func to run after the
// response is written. It never panics.
func (s *Server) handleLine(ctx context.Context, c *conn, line []byte) (out []byte, after func()) {
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		s.count(invalidMethod, true)
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return encodeResponse(nil, nil, &ErrorObject{Code: CodeParseError,
				Message: "parse error: the request line is not valid JSON; send one JSON-RPC 2.0 object per line"}), nil
		}
		return s.malformed(line), nil
	}
	hasID := req.ID != nil
	if hasID && !validID(req.ID) {
		s.count(invalidMethod, true)
		return encodeResponse(nil, nil, &ErrorObject{Code: CodeInvalidRequest,
			Message: "invalid request: id must be a string, a number or null"}), nil
	}
	respond := func(result any, e *ErrorObject) []byte {
		if !hasID {
			return nil
		}
		return encodeResponse(req.ID, result, e)
	}
	if req.JSONRPC != jsonrpcVersion {
		s.count(invalidMethod, true)
		return respond(nil, &ErrorObject{Code: CodeInvalidRequest, Message: `invalid request: "jsonrpc" must be "2.0"`}), nil
	}
	if req.Method == "" {
		s.count(invalidMethod, true)
		return respond(nil, &ErrorObject{Code: CodeInvalidRequest, Message: `invalid request: "method" must be a non-empty string`}), nil
	}
	h, ok := s.table[req.Method]
	if !ok {
		s.count(invalidMethod, true)
		return respond(nil, &ErrorObject{Code: CodeMethodNotFound,
			Message: fmt.Sprintf("method %q not found; known methods: %s", req.Method, strings.Join(methodNames(), ", "))}), nil
	}
	if msg := invalidText(line); msg != "" {
		s.count(req.Method, true)
		return respond(nil, errorObject(invalidParams("%s", msg))), nil
	}
	result, err := s.call(ctx, c, req.Method, h, req.Params)
	s.count(req.Method, err != nil)
	if err != nil {
		return respond(nil, errorObject(err)), nil
	}
	if wa, ok := result.(service.AfterResponse); ok {
		r, after := wa.Split()
		return respond(r, nil), after
	}
	return respond(result, nil), nil
}

// malformed answers a line that is JSON but not a well-typed request
// object: a batch, a non-object, or a mistyped member. The id is echoed
// when it can be recovered and is valid.
func (s *Server) malformed(line []byte) []byte {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		return encodeResponse(nil, nil, &ErrorObject{Code: CodeInvalidRequest,
			Message: "batch requests are not supported; send one request per line"})
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil || fields == nil {
		return encodeResponse(nil, nil, &ErrorObject{Code: CodeInvalidRequest,
			Message: "invalid request: expected a JSON object with jsonrpc, id, method and params"})
	}
	id, hasID := fields["id"]
	if hasID && !validID(id) {
		return encodeResponse(nil, nil, &ErrorObject{Code: CodeInvalidRequest,
			Message: "invalid request: id must be a string, a number or null"})
	}
	if !hasID {
		id = nil // even a malformed notification is answered, with a null id
	}
	var version, method string
	if err := json.Unmarshal(fields["jsonrpc"], &version); err != nil || version != jsonrpcVersion {
		return encodeResponse(id, nil, &ErrorObject{Code: CodeInvalidRequest, Message: `invalid request: "jsonrpc" must be "2.0"`})
	}
	if err := json.Unmarshal(fields["method"], &method); err != nil || method == "" {
		return encodeResponse(id, nil, &ErrorObject{Code: CodeInvalidRequest, Message: `invalid request: "method" must be a non-empty string`})
	}
	return encodeResponse(id, nil, &ErrorObject{Code: CodeInvalidRequest, Message: "invalid request: a member has the wrong type"})
}

// call runs a handler, with the peer's filesystem credentials when it has
// its own (another uid than the daemon's), turning a panic into an
// internal error.
func (s *Server) call(ctx context.Context, c *conn, method string, h handler, params json.RawMessage) (result any, err error) {
	if c.creds == nil {
		return s.callAs(ctx, c, method, h, params)
	}
	if rerr := c.creds.run(s.self, func() { result, err = s.callAs(ctx, c, method, h, params) }); rerr != nil {
		s.log.Error("run a request with the peer's credentials", "method", method, "uid", c.creds.uid, "err", rerr)
		if err == nil && result == nil {
			return nil, callError(ErrorObject{Code: CodeInternalError,
				Message: fmt.Sprintf("internal error: could not take your credentials (uid %d) to serve %s", c.creds.uid, method)})
		}
	}
	return result, err
}

// callAs runs a handler on the calling thread, turning a panic into an
// internal error.
func (s *Server) callAs(ctx context.Context, c *conn, method string, h handler, params json.RawMessage) (result any, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("request panicked", "method", method, "panic", r, "stack", string(debug.Stack()))
			result, err = nil, callError(ErrorObject{Code: CodeInternalError,
				Message: fmt.Sprintf("internal error while serving %s; the daemon logged it and goes on", method)})
		}
	}()
	return h(ctx, c, params)
}

// validID reports whether a raw id is a string, a number or null.
func validID(id json.RawMessage) bool {
	b := bytes.TrimSpace(id)
	if len(b) == 0 {
		return false
	}
	switch b[0] {
	case '"', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// encodeResponse encodes a response; a result that cannot be encoded turns
// into an internal error.
func encodeResponse(id json.RawMessage, result any, e *ErrorObject) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	if r, ok := result.(ReadResult); ok {
		result = readEncoded(r)
	}
	if a, ok := appenderOf(result); ok && e == nil && isCompactID(id) {
		b := append(make([]byte, 0, 64+len(id)+a.sizeHint()), `{"jsonrpc":"2.0","id":`...)
		b = append(b, id...)
		b = append(b, `,"result":`...)
		return append(a.appendJSON(b), '}')
	}
	r := response{JSONRPC: jsonrpcVersion, ID: id, Error: e}
	if e == nil {
		if result == nil {
			result = Empty{}
		}
		b, err := json.Marshal(result)
		if err != nil {
			r.Error = &ErrorObject{Code: CodeInternalError, Message: "encode result: " + err.Error()}
		} else {
			r.Result = b
		}
	}
	out, err := json.Marshal(r)
	if err != nil {
		// Only the id could be at fault, and it was validated.
		out, _ = json.Marshal(response{JSONRPC: jsonrpcVersion, ID: json.RawMessage("null"),
			Error: &ErrorObject{Code: CodeInternalError, Message: "encode response: " + err.Error()}})
	}
	return out
}

// decodeParams decodes params into v (a pointer to a params struct),
// rejecting non-objects, unknown fields and mistyped values with -32602
// errors that name the field.
func decodeParams(method string, params json.RawMessage, v any) error {
	b := bytes.TrimSpace(params)
	if len(b) == 0 || bytes.Equal(b, []byte("null")) {
		b = []byte("{}")
	}
	if b[0] != '{' {
		return invalidParams("invalid params for %s: params must be a JSON object", method)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				field = "params"
			}
			return invalidField(field, "invalid params for %s: %s must be %s, not %s", method, field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		msg := strings.TrimPrefix(err.Error(), "json: ")
		field, _ := strings.CutPrefix(msg, `unknown field "`)
		field, unknown := strings.CutSuffix(field, `"`)
		if !unknown {
			field = ""
		}
		return invalidField(field, "invalid params for %s: %s", method, msg)
	}
	return nil
}

// jsonKind names a Go kind the way a JSON user thinks of it.
func jsonKind(kind string) string {
	switch kind {
	case "int", "int32", "int64", "uint32", "uint64":
		return "an integer"
	case "float64":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "struct", "map", "ptr":
		return "an object"
	case "slice":
		return "an array"
	}
	return "a " + kind
}

// invalidText checks a raw line for text the decoder would silently replace:
// invalid UTF-8 bytes and unpaired \u surrogate escapes. It returns a message
// for the client, or "".
func invalidText(line []byte) string {
	if !utf8.Valid(line) {
		return "invalid params: the request contains invalid UTF-8; dshmount stores text as UTF-8, so send text files' content as UTF-8"
	}
	for i := 0; i < len(line); i++ {
		if line[i] != '\\' || i+1 >= len(line) {
			continue
		}
		if line[i+1] != 'u' {
			i++ // skip the escaped character (it may be a backslash)
			continue
		}
		r, ok := hex4(line, i+2)
		switch {
		case !ok:
		case r >= 0xD800 && r < 0xDC00:
			r2, ok2 := rune(0), false
			if i+11 < len(line) && line[i+6] == '\\' && line[i+7] == 'u' {
				r2, ok2 = hex4(line, i+8)
			}
			if !ok2 || r2 < 0xDC00 || r2 >= 0xE000 {
				return "invalid params: the request contains an unpaired UTF-16 surrogate escape; send valid Unicode text"
			}
			i += 11
			continue
		case r >= 0xDC00 && r < 0xE000:
			return "invalid params: the request contains an unpaired UTF-16 surrogate escape; send valid Unicode text"
		}
		i += 5
	}
	return ""
}

// hex4 parses four hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, ch := range b[i : i+4] {
		r <<= 4
		switch {
		case ch >= '0' && ch <= '9':
			r |= rune(ch - '0')
		case ch >= 'a' && ch <= 'f':
			r |= rune(ch - 'a' + 10)
		case ch >= 'A' && ch <= 'F':
			r |= rune(ch - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// isCompactID reports whether id is a plain number, null, or a string
// without escapes: bytes json.Marshal would copy unchanged.
func isCompactID(id json.RawMessage) bool {
	for _, c := range id {
		if c <= ' ' || c == '\\' || c == '<' || c == '>' || c == '&' || c >= utf8.RuneSelf {
			return false
		}
	}
	return len(id) > 0
}
