package mcp

import (
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stretchr/testify/require"

	"github.com/dshmount/dshmount/control"
)

// TestToolSchemas_TypesComeFromTheMethodDocument pins that a tool's
// argument types are the socket params' types from rpc.discover, not the
// tool's own struct: a type changed in the document changes the tool's.
func TestToolSchemas_TypesComeFromTheMethodDocument(t *testing.T) {
	doc, err := control.Discover()
	require.NoError(t, err)
	for _, m := range doc.Methods {
		if m.Name != control.MethodRead {
			continue
		}
		for _, p := range m.Params {
			if p.Name == "limit" {
				p.Schema.Type, p.Schema.Types = "string", nil
			}
		}
	}
	in, err := jsonschema.For[ReadInput](nil)
	require.NoError(t, err)
	require.NoError(t, typesFromMethod(in, &doc, readSpec))
	require.Equal(t, "string", in.Properties["limit"].Type)
	require.Equal(t, "integer", in.Properties["offset"].Type, "from the document's *int, without null")
	require.Empty(t, in.Properties["offset"].Types)
}

func TestToolSchemas_AnArgumentTheMethodDoesNotTakeIsAnError(t *testing.T) {
	doc, err := control.Discover()
	require.NoError(t, err)
	in, err := jsonschema.For[EditInput](nil)
	require.NoError(t, err)
	spec := editSpec
	spec.params = nil // new_string is not a param of fs.edit (newString is)
	require.ErrorContains(t, typesFromMethod(in, &doc, spec), `fs.edit has no param "new_string"`)
	spec = readSpec
	spec.method = "fs.nothing"
	require.ErrorContains(t, typesFromMethod(in, &doc, spec), `no method "fs.nothing"`)
}

func TestToolSchemas_EveryToolNamesItsMethod(t *testing.T) {
	doc, err := control.Discover()
	require.NoError(t, err)
	specs := map[string]toolSpec{ToolRead: readSpec, ToolWrite: writeSpec, ToolEdit: editSpec, ToolApplyPatch: patchSpec,
		ToolMove: moveSpec, ToolDelete: deleteSpec, ToolList: listSpec, ToolStat: statSpec, ToolBranchRebase: branchRebaseSpec}
	require.Len(t, specs, len(ToolNames))
	for _, name := range ToolNames {
		spec, ok := specs[name]
		require.True(t, ok, name)
		require.NotEmpty(t, spec.method, "%s names no socket method", name)
		found := false
		for _, m := range doc.Methods {
			found = found || m.Name == spec.method
		}
		require.True(t, found, "%s calls %s, which rpc.discover does not list", name, spec.method)
	}
}
