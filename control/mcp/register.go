package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshmount/dshmount/provider"
)

// toolFunc serves one tool call with decoded, validated arguments. It
// returns the text shown to the model and the structured result, or an
// error that becomes an isError result (see toolError).
type toolFunc[In, Out any] func(ctx context.Context, in In) (text string, out Out, err error)

// toolSpec describes one tool: its wire definition, a usage line shown
// when the arguments are wrong, and schema tweaks the struct tags cannot
// express (minimums).
type toolSpec struct {
	tool  *sdk.Tool
	usage string
	// minimums sets "minimum" on integer properties.
	minimums map[string]float64
}

// addTool registers a typed tool. Unlike the SDK's generic AddTool it
// validates the arguments itself, so that bad arguments produce a tool
// error starting with FS_INVALID_ARGUMENT and the tool's usage, the same
// shape as every other failure.
func addTool[In, Out any](s *sdk.Server, base string, spec toolSpec, h toolFunc[In, Out]) error {
	in, err := jsonschema.For[In](nil)
	if err != nil {
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
