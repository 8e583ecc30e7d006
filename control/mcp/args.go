package mcp

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// explainArgs checks args against the top level of a tool's input schema
// and words the first problem for people and models: a missing or unknown
// argument, a value of the wrong type, a number under its minimum. It
// returns "" when it finds none (the schema validator still runs).
func explainArgs(args map[string]any, s *jsonschema.Schema) string {
	names := make([]string, 0, len(args))
	for name := range args {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, ok := s.Properties[name]; !ok {
			known := make([]string, 0, len(s.Properties))
			for k := range s.Properties {
				known = append(known, k)
			}
			sort.Strings(known)
			return fmt.Sprintf("unknown argument %q; the arguments are %s", name, strings.Join(known, ", "))
		}
	}
	for _, name := range s.Required {
		if _, ok := args[name]; !ok {
			return fmt.Sprintf("%q is required", name)
		}
	}
	for _, name := range names {
		if msg := explainValue(name, args[name], s.Properties[name]); msg != "" {
			return msg
		}
	}
	return ""
}

// explainValue words what is wrong with one argument value ("" if nothing
// at this level).
func explainValue(name string, v any, p *jsonschema.Schema) string {
	types := p.Types
	if p.Type != "" {
		types = []string{p.Type}
	}
	got := jsonType(v)
	if len(types) > 0 && !slices.Contains(types, got) && !(got == "integer" && slices.Contains(types, "number")) {
		want := make([]string, 0, len(types))
		for _, t := range types {
			if t != "null" {
				want = append(want, article(t))
			}
		}
		return fmt.Sprintf("%q must be %s, not %s", name, strings.Join(want, " or "), describeJSON(v))
	}
	if n, ok := v.(float64); ok && p.Minimum != nil && n < *p.Minimum {
		return fmt.Sprintf("%q must be at least %v, not %v", name, *p.Minimum, n)
	}
	return ""
}

// jsonType names the JSON type of a decoded value, "integer" for a whole
// number.
func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case float64:
		if x == math.Trunc(x) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// describeJSON renders a wrong value briefly: null, 42, "ten", an array.
func describeJSON(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool, float64:
		return fmt.Sprint(x)
	case string:
		if len(x) > 40 {
			x = x[:40] + "…"
		}
		return fmt.Sprintf("the string %q", x)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%v", v)
}

// article prefixes a JSON type name with "a" or "an".
func article(t string) string {
	switch t {
	case "integer", "array", "object":
		return "an " + t
	}
	return "a " + t
}
