package control

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stretchr/testify/require"
)

var updateReference = flag.Bool("update", false, "rewrite docs/protocol-methods.md from the method table")

// referencePath is the generated protocol reference, from this package.
const referencePath = "../docs/protocol-methods.md"

func TestMethodTable_NamesAreUniqueAndDispatched(t *testing.T) {
	env := newTestEnv(t)
	names := methodNames()
	seen := map[string]bool{}
	for _, m := range methodTable() {
		require.False(t, seen[m.name], "%s is in the table twice", m.name)
		seen[m.name] = true
		require.NotEmpty(t, m.doc, "%s has no doc line", m.name)
		require.NotContains(t, m.doc, "\n", "%s: the doc is one line", m.name)
		_, ok := env.srv.table[m.name]
		require.True(t, ok, "%s is not dispatched", m.name)
	}
	require.Len(t, env.srv.table, len(names), "the dispatch map has a method the table does not list")
	require.Equal(t, len(seen), len(names))
}

func TestDiscover_ListsEveryMethodWithItsSchemas(t *testing.T) {
	env := newTestEnv(t)
	doc, err := env.client(t).Discover(context.Background())
	require.NoError(t, err)
	require.Equal(t, "1.3.2", doc.OpenRPC)
	var got []string
	for _, m := range doc.Methods {
		got = append(got, m.Name)
		require.NotNil(t, m.Result.Schema, m.Name)
		require.Equal(t, "object", m.Result.Schema.Type, "%s: results are objects", m.Name)
		require.Equal(t, "by-name", m.ParamStructure)
	}
	require.Equal(t, methodNames(), got)
	require.Contains(t, got, MethodDiscover)

	edit := findMethod(t, doc, MethodEdit)
	for _, name := range []string{"path", "oldString", "newString"} {
		p := findParam(t, edit, name)
		require.True(t, p.Required, "fs.edit %s is required", name)
		require.Equal(t, "string", p.Schema.Type)
	}
	require.False(t, findParam(t, edit, "replaceAll").Required)
	require.Contains(t, edit.Result.Schema.Properties, "version")
	since := findParam(t, findMethod(t, doc, MethodChanges), "since")
	require.Equal(t, []string{"string", "integer"}, since.Schema.Types)
}

// TestDiscover_ParamsSchemasMatchTheDecoder checks the schemas against the
// daemon's own decoding: a request with every required member (of the
// schema's type) is not refused for a missing or mistyped member, and one
// with an unknown member is.
func TestDiscover_ParamsSchemasMatchTheDecoder(t *testing.T) {
	doc, err := Discover()
	require.NoError(t, err)
	for _, m := range doc.Methods {
		var members []string
		for _, p := range m.Params {
			if p.Required {
				members = append(members, fmt.Sprintf("%q:%s", p.Name, sampleJSON(p.Schema)))
			}
		}
		table := methodTable()
		i := slices.IndexFunc(table, func(x method) bool { return x.name == m.Name })
		err = decodeParams(m.Name, []byte("{"+strings.Join(members, ",")+"}"), newValue(table[i].params))
		require.NoError(t, err, "%s: its required members, as the schema types them, do not decode", m.Name)
		bad := decodeParams(m.Name, []byte(`{"noSuchMember":1}`), newValue(table[i].params))
		require.Error(t, bad, "%s accepts an unknown member its schema does not list", m.Name)
	}
}

func TestProtocolReference_IsGeneratedFromTheTable(t *testing.T) {
	doc, err := Discover()
	require.NoError(t, err)
	want := renderReference(&doc)
	if *updateReference {
		require.NoError(t, os.WriteFile(referencePath, []byte(want), 0o644))
	}
	got, err := os.ReadFile(referencePath)
	require.NoError(t, err, "generate it: go test ./control -run TestProtocolReference -update")
	require.Equal(t, want, string(got),
		"%s is stale: regenerate it with go test ./control -run TestProtocolReference -update", filepath.Base(referencePath))
}

func findMethod(t *testing.T, doc *OpenRPC, name string) OpenRPCMethod {
	t.Helper()
	for _, m := range doc.Methods {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("rpc.discover does not list %s", name)
	return OpenRPCMethod{}
}

func findParam(t *testing.T, m OpenRPCMethod, name string) OpenRPCParam {
	t.Helper()
	for _, p := range m.Params {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("%s has no param %q", m.Name, name)
	return OpenRPCParam{}
}

// sampleJSON is a value of the schema's type.
func sampleJSON(s *jsonschema.Schema) string {
	typ := s.Type
	if typ == "" && len(s.Types) > 0 {
		typ = s.Types[len(s.Types)-1]
	}
	switch typ {
	case "string":
		return `"x"`
	case "integer", "number":
		return "1"
	case "boolean":
		return "true"
	case "array":
		return "[]"
	case "object":
		return "{}"
	}
	return "null"
}

// renderReference writes the method reference in Markdown.
func renderReference(doc *OpenRPC) string {
	var b strings.Builder
	b.WriteString("# Socket methods\n\n")
	b.WriteString("<!-- Generated from the method table (control/methods.go); do not edit.\n")
	b.WriteString("     Regenerate: go test ./control -run TestProtocolReference -update -->\n\n")
	fmt.Fprintf(&b, "The daemon describes itself: `rpc.discover` returns this list as an OpenRPC %s document with\n", doc.OpenRPC)
	b.WriteString("the JSON Schema of every method's params and result. See [protocol.md](protocol.md) for the framing,\nsessions, version tokens and error codes.\n\n")
	for _, m := range doc.Methods {
		fmt.Fprintf(&b, "- [`%s`](#%s): %s\n", m.Name, strings.ReplaceAll(m.Name, ".", ""), m.Summary)
	}
	for _, m := range doc.Methods {
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n", m.Name, m.Summary)
		if len(m.Params) == 0 {
			b.WriteString("Params: none (`{}`).\n")
		} else {
			b.WriteString("| param | type | required |\n|---|---|---|\n")
			for _, p := range m.Params {
				req := ""
				if p.Required {
					req = "yes"
				}
				writeRows(&b, p.Name, p.Schema, req, true)
			}
		}
		if len(m.Result.Schema.Properties) == 0 {
			b.WriteString("\nResult: `{}`.\n")
			continue
		}
		b.WriteString("\n| result member | type |\n|---|---|\n")
		for _, name := range propertyOrder(m.Result.Schema) {
			writeRows(&b, name, m.Result.Schema.Properties[name], "", false)
		}
	}
	return b.String()
}

// writeRows writes one member's row and its nested members' rows.
func writeRows(b *strings.Builder, name string, s *jsonschema.Schema, req string, withReq bool) {
	if withReq {
		fmt.Fprintf(b, "| `%s` | %s | %s |\n", name, typeName(s), req)
	} else {
		fmt.Fprintf(b, "| `%s` | %s |\n", name, typeName(s))
	}
	inner := s
	prefix := name + "."
	if s.Items != nil {
		inner, prefix = s.Items, name+"[]."
	}
	for _, sub := range propertyOrder(inner) {
		writeRows(b, prefix+sub, inner.Properties[sub], "", withReq)
	}
}

// typeName words a schema's type: "string", "array of object", "string or null".
func typeName(s *jsonschema.Schema) string {
	types := s.Types
	if s.Type != "" {
		types = []string{s.Type}
	}
	if len(types) == 0 {
		return "any"
	}
	words := make([]string, len(types))
	for i, t := range types {
		words[i] = t
		if t == "array" && s.Items != nil {
			words[i] = "array of " + typeName(s.Items)
		}
	}
	return strings.Join(words, " or ")
}

// newValue returns a pointer to a new zero value of t.
func newValue(t reflect.Type) any { return reflect.New(t).Interface() }
