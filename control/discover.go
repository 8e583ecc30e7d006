package control

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
)

// MethodDiscover is OpenRPC's service discovery method: it returns the
// OpenRPC document of the socket, built from the method table.
const MethodDiscover = "rpc.discover"

// openRPCVersion is the OpenRPC specification version the document follows.
const openRPCVersion = "1.3.2"

// OpenRPC is the result of rpc.discover: an OpenRPC document listing every
// socket method with the JSON Schema of its params and result.
type OpenRPC struct {
	OpenRPC string          `json:"openrpc"`
	Info    OpenRPCInfo     `json:"info"`
	Methods []OpenRPCMethod `json:"methods"`
}

// OpenRPCInfo names the API the document describes.
type OpenRPCInfo struct {
	Title   string `json:"title"`
	Version string `json:"version"`
}

// OpenRPCMethod is one method of an OpenRPC document. Params are by name:
// one entry per member of the params object.
type OpenRPCMethod struct {
	Name           string         `json:"name"`
	Summary        string         `json:"summary"`
	ParamStructure string         `json:"paramStructure"`
	Params         []OpenRPCParam `json:"params"`
	Result         OpenRPCParam   `json:"result"`
}

// OpenRPCParam is a named value (a param or the result) with its schema.
type OpenRPCParam struct {
	Name     string             `json:"name"`
	Required bool               `json:"required,omitempty"`
	Schema   *jsonschema.Schema `json:"schema"`
}

// apiVersion is the version of the socket API rpc.discover reports; it
// changes when a method or a member is removed or changes meaning.
const apiVersion = "1"

// Discover builds the OpenRPC document of the socket from the method table.
func Discover() (OpenRPC, error) {
	doc := OpenRPC{OpenRPC: openRPCVersion,
		Info: OpenRPCInfo{Title: "dshmount control socket", Version: apiVersion}}
	opts := &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		typeOf[json.RawMessage]():   {Description: "any JSON value"},
		typeOf[jsonschema.Schema](): {Type: "object", Description: "a JSON Schema"},
		typeOf[ChangesCursor]():     {Types: []string{"string", "integer"}, Description: "a token from an earlier answer, or a bare seq"},
	}}
	for _, m := range methodTable() {
		params, err := jsonschema.ForType(m.params, opts)
		if err != nil {
			return OpenRPC{}, fmt.Errorf("schema of %s params: %w", m.name, err)
		}
		result, err := jsonschema.ForType(m.result, opts)
		if err != nil {
			return OpenRPC{}, fmt.Errorf("schema of %s result: %w", m.name, err)
		}
		om := OpenRPCMethod{Name: m.name, Summary: m.doc, ParamStructure: "by-name",
			Params: []OpenRPCParam{}, Result: OpenRPCParam{Name: "result", Schema: result}}
		for _, name := range propertyOrder(params) {
			om.Params = append(om.Params, OpenRPCParam{Name: name,
				Required: slices.Contains(params.Required, name), Schema: params.Properties[name]})
		}
		doc.Methods = append(doc.Methods, om)
	}
	return doc, nil
}

// propertyOrder returns s's property names in declaration order.
func propertyOrder(s *jsonschema.Schema) []string {
	if len(s.PropertyOrder) == len(s.Properties) {
		return s.PropertyOrder
	}
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// discover serves rpc.discover.
func (s *Server) discover(_ context.Context, _ *conn, params json.RawMessage) (any, error) {
	var p Empty
	if err := decodeParams(MethodDiscover, params, &p); err != nil {
		return nil, err
	}
	return Discover()
}
