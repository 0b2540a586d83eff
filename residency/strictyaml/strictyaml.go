// Package strictyaml decodes YAML files the way sigs.k8s.io/yaml.UnmarshalStrict does (through
// the json tags; unknown and duplicate fields are errors), but reports a failure in the file's
// own terms: each bad field by its YAML path and line, e.g.
//
//	models[0].peakMemoryBytez: unknown field (line 7)
//	models[2].loadTime: time: invalid duration "banana" (line 15)
//
// instead of sigs.k8s.io/yaml's `error unmarshaling JSON: while decoding JSON: json: unknown
// field "peakMemoryBytez"`, which names neither the field's place nor the line.
//
// The decoding itself is sigs.k8s.io/yaml's; only when it fails is the document parsed again
// into go.yaml.in/yaml/v3 nodes (which carry line numbers) and walked alongside the target
// type, decoding each leaf on its own with sigs.k8s.io/yaml to find the ones that fail.
package strictyaml

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// FieldError is one field that does not decode.
type FieldError struct {
	// Path is the field's YAML path (models[0].peakMemoryBytes["1g.10gb"]); empty for the
	// document itself.
	Path string
	// Line is the 1-based line of the field in the file (its key for an unknown or duplicate
	// field, its value otherwise); 0 when unknown.
	Line int
	// Msg says what is wrong: "unknown field", `time: invalid duration "banana"`, ….
	Msg string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Msg)
	if e.Line > 0 {
		fmt.Fprintf(&b, " (line %d)", e.Line)
	}
	return b.String()
}

// Unmarshal decodes data into out (a non-nil pointer) strictly: fields are matched through
// their json tags as sigs.k8s.io/yaml.UnmarshalStrict matches them, and an unknown or
// duplicate field is an error. On failure the error joins one *FieldError per bad field found;
// a syntax error keeps go.yaml.in/yaml/v3's "yaml: line N: …" form.
func Unmarshal(data []byte, out any) error {
	orig := yaml.UnmarshalStrict(data, out)
	if orig == nil {
		return nil
	}
	var root yamlv3.Node
	if err := yamlv3.Unmarshal(data, &root); err != nil {
		return err
	}
	t := reflect.TypeOf(out)
	if len(root.Content) == 0 || t.Kind() != reflect.Pointer {
		return errors.New(clean(orig))
	}
	var errs []error
	walk(root.Content[0], t.Elem(), "", &errs)
	if len(errs) == 0 {
		// The walk decodes leaves one by one; a failure only the whole document shows (none
		// known) is reported as sigs.k8s.io/yaml words it.
		return errors.New(clean(orig))
	}
	return errors.Join(errs...)
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// walk checks node against type t at path, appending every field that does not decode.
func walk(node *yamlv3.Node, t reflect.Type, path string, errs *[]error) {
	// Aliases are not followed (a few aliases can name exponentially many nodes); an error
	// only inside one leaves the walk empty-handed and Unmarshal reports the plain error.
	if node.Kind == yamlv3.AliasNode || (node.Kind == yamlv3.ScalarNode && node.Tag == "!!null") {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	pt := reflect.PointerTo(t)
	if pt.Implements(jsonUnmarshaler) || pt.Implements(textUnmarshaler) {
		leaf(node, t, path, errs)
		return
	}
	switch {
	case t.Kind() == reflect.Struct && node.Kind == yamlv3.MappingNode:
		fields := jsonFields(t)
		eachPair(node, path, errs, func(key, val *yamlv3.Node) {
			f, ok := fields[key.Value]
			if !ok {
				for name, ft := range fields {
					if strings.EqualFold(name, key.Value) { // encoding/json matches case-insensitively
						f, ok = ft, true
						break
					}
				}
			}
			if !ok {
				*errs = append(*errs, &FieldError{Path: join(path, key.Value), Line: key.Line, Msg: "unknown field"})
				return
			}
			walk(val, f, join(path, key.Value), errs)
		})
	case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && t.Elem().Kind() != reflect.Uint8 && node.Kind == yamlv3.SequenceNode:
		for i, el := range node.Content {
			walk(el, t.Elem(), fmt.Sprintf("%s[%d]", path, i), errs)
		}
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && node.Kind == yamlv3.MappingNode:
		eachPair(node, path, errs, func(key, val *yamlv3.Node) {
			walk(val, t.Elem(), fmt.Sprintf("%s[%q]", path, key.Value), errs)
		})
	default:
		leaf(node, t, path, errs)
	}
}

// eachPair calls f for every key and value of a mapping node, reporting repeated keys.
func eachPair(node *yamlv3.Node, path string, errs *[]error, f func(key, val *yamlv3.Node)) {
	seen := map[string]int{}
	for i := 0; i+1 < len(node.Content); i += 2 {
		key, val := node.Content[i], node.Content[i+1]
		if first, dup := seen[key.Value]; dup {
			*errs = append(*errs, &FieldError{Path: join(path, key.Value), Line: key.Line,
				Msg: fmt.Sprintf("duplicate field (first at line %d)", first)})
			continue
		}
		seen[key.Value] = key.Line
		f(key, val)
	}
}

// leaf decodes node alone into a fresh t with sigs.k8s.io/yaml and reports its error.
func leaf(node *yamlv3.Node, t reflect.Type, path string, errs *[]error) {
	b, err := yamlv3.Marshal(node)
	if err != nil {
		return
	}
	if err := yaml.UnmarshalStrict(b, reflect.New(t).Interface()); err != nil {
		msg := clean(err)
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			switch node.Kind {
			case yamlv3.MappingNode:
				msg = "a mapping: want " + typeName(ute.Type)
			case yamlv3.SequenceNode:
				msg = "a list: want " + typeName(ute.Type)
			default:
				msg = fmt.Sprintf("%q: want %s", node.Value, typeName(ute.Type))
			}
		}
		*errs = append(*errs, &FieldError{Path: path, Line: node.Line, Msg: msg})
	}
}

// typeName words a Go type for a YAML author.
func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return t.String()
}

// jsonFields maps the json names of t's fields (embedded structs flattened) to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for n, typ := range jsonFields(ft) {
					if _, ok := out[n]; !ok {
						out[n] = typ
					}
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// clean drops sigs.k8s.io/yaml's JSON wording from an error message.
func clean(err error) string {
	s := err.Error()
	for _, p := range []string{"error unmarshaling JSON: ", "while decoding JSON: ", "error converting YAML to JSON: ", "json: "} {
		s = strings.ReplaceAll(s, p, "")
	}
	return s
}
