package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshmount/dshmount/control"
	"github.com/dshmount/dshmount/internal/provider"
)

// toolFunc serves one tool call with decoded, validated arguments. It
// returns the text shown to the model and the structured result, or an
// error that becomes an isError result (see toolError).
type toolFunc[In, Out any] func(ctx context.Context, in In) (text string, out Out, err error)

// toolSpec describes one tool: its wire definition, the socket method it
// calls, a usage line shown when the arguments are wrong, and schema
// tweaks the struct tags cannot express (minimums).
type toolSpec struct {
	tool  *sdk.Tool
	usage string
	// method is the socket method the tool calls; each argument's JSON
	// type comes from that method's params in the daemon's rpc.discover
	// document.
	method string
	// params names the socket param of each argument whose name differs
	// (old_string → oldString).
	params map[string]string
	// minimums sets "minimum" on integer properties.
	minimums map[string]float64
}

// addTool registers a typed tool. Unlike the SDK's generic AddTool it
// validates the arguments itself, so that bad arguments produce a tool
// error starting with FS_INVALID_ARGUMENT and the tool's usage, the same
// shape as every other failure.
func addTool[In, Out any](s *sdk.Server, doc *control.OpenRPC, base string, spec toolSpec, h toolFunc[In, Out]) error {
	in, err := jsonschema.For[In](nil)
	if err != nil {
		return fmt.Errorf("input schema of %s: %w", spec.tool.Name, err)
	}
	if err := typesFromMethod(in, doc, spec); err != nil {
		return fmt.Errorf("input schema of %s: %w", spec.tool.Name, err)
	}
	for name, lo := range spec.minimums {
		p, ok := in.Properties[name]
		if !ok {
			return fmt.Errorf("input schema of %s: no property %q", spec.tool.Name, name)
		}
		p.Minimum = &lo
	}
	resolved, err := in.Resolve(nil)
	if err != nil {
		return fmt.Errorf("resolve input schema of %s: %w", spec.tool.Name, err)
	}
	out, err := jsonschema.For[Out](nil)
	if err != nil {
		return fmt.Errorf("output schema of %s: %w", spec.tool.Name, err)
	}
	for _, p := range in.Properties {
		p.Description = placed(p.Description, base)
	}
	t := *spec.tool
	t.Description = placed(t.Description, base)
	t.InputSchema = in
	t.OutputSchema = out
	name := t.Name
	s.AddTool(&t, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		args, err := decodeArgs[In](req.Params.Arguments, in, resolved)
		if err != nil {
			return errorResult(fmt.Sprintf("%s: invalid arguments for %s: %v. Usage: %s",
				provider.CodeInvalidArgument, name, err, spec.usage)), nil
		}
		text, result, err := h(ctx, args)
		if err != nil {
			return errorResult(toolErrorText(err)), nil
		}
		return &sdk.CallToolResult{
			Content:           []sdk.Content{&sdk.TextContent{Text: text}},
			StructuredContent: result,
		}, nil
	})
	return nil
}

// typesFromMethod gives every argument of a tool the JSON type of the
// socket param it stands for, from the daemon's method document: the
// tool's arguments are the socket method's params (renamed where the tool
// spells them otherwise), minus those the server fills itself (session,
// cwd, version tokens). An argument the method does not take is an error.
func typesFromMethod(in *jsonschema.Schema, doc *control.OpenRPC, spec toolSpec) error {
	i := slices.IndexFunc(doc.Methods, func(m control.OpenRPCMethod) bool { return m.Name == spec.method })
	if i < 0 {
		return fmt.Errorf("the daemon has no method %q", spec.method)
	}
	m := doc.Methods[i]
	for _, arg := range slices.Sorted(maps.Keys(in.Properties)) {
		p, name := in.Properties[arg], arg
		if renamed, ok := spec.params[arg]; ok {
			name = renamed
		}
		j := slices.IndexFunc(m.Params, func(q control.OpenRPCParam) bool { return q.Name == name })
		if j < 0 {
			return fmt.Errorf("argument %q: %s has no param %q", arg, m.Name, name)
		}
		from := m.Params[j].Schema
		types := from.Types
		if from.Type != "" {
			types = []string{from.Type}
		}
		// An argument is omitted, never null.
		types = slices.DeleteFunc(slices.Clone(types), func(t string) bool { return t == "null" })
		if len(types) == 1 {
			p.Type, p.Types = types[0], nil
		} else {
			p.Type, p.Types = "", types
		}
	}
	return nil
}

// decodeArgs validates raw arguments against the schema, then decodes them.
func decodeArgs[In any](raw json.RawMessage, top *jsonschema.Schema, schema *jsonschema.Resolved) (In, error) {
	var in In
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || bytes.Equal(b, []byte("null")) {
		b = []byte("{}")
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return in, fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	obj, ok := generic.(map[string]any)
	if !ok {
		return in, errors.New("arguments must be a JSON object")
	}
	if msg := explainArgs(obj, top); msg != "" {
		return in, errors.New(msg)
	}
	if err := schema.Validate(generic); err != nil {
		return in, errors.New(cleanSchemaError(err))
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return in, fmt.Errorf("decode arguments: %v", err)
	}
	return in, nil
}

// cleanSchemaError drops the validator's "validating root:" prefixes, which
// mean nothing to the caller.
func cleanSchemaError(err error) string {
	msg := err.Error()
	for _, p := range []string{"validating root: ", "validating /properties/"} {
		msg = strings.ReplaceAll(msg, p, "")
	}
	return msg
}

// errorResult is an isError tool result with one text block.
func errorResult(text string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: text}}}
}

// placed rewrites what a tool's texts say of relative paths for a server
// whose relative paths start at base (Config.Cwd, workspace-relative), not
// at the workspace root.
func placed(text, base string) string {
	if base == "" || base == "." {
		return text
	}
	text = strings.ReplaceAll(text, `"." is the workspace root`,
		`"." is `+base+`, the directory this server was started in, not the workspace root`)
	return strings.ReplaceAll(text, "relative to the workspace root",
		"relative to "+base+" (the directory this server was started in; the workspace root is above it)")
}
