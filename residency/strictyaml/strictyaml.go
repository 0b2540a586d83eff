// Package strictyaml decodes the YAML files inferscale reads (the residency catalog, the fake
// Triton's config, admission records) into Go values through their json tags, strictly, and
// keeps every scalar as written:
//
//   - YAML 1.2 core schema (go.yaml.in/yaml/v3): only true/false are booleans, so a model named
//     on, y, no or off stays that string — where sigs.k8s.io/yaml, which follows YAML 1.1
//     through yaml.v2, turns it into "true" or "false";
//
//   - a scalar decoded into a string field is its text as written ("1.10" stays "1.10", not
//     "1.1"), whatever YAML would resolve it to; a boolean field takes only true or false;
//
//   - unknown and duplicate fields are errors — a key names its field as encoding/json matches
//     it (exactly, else case-insensitively), so two spellings of one field (name and Name) are a
//     duplicate too; with Options.ExactKeys (UnmarshalWith) only the exact name matches — and
//     every failure is reported in the file's own terms, each bad field by its YAML path and
//     line:
//
//     models[0].peakMemoryBytez: unknown field (line 7)
//     models[2].loadTime: time: invalid duration "banana" (line 15)
//     models[1].Name: duplicate field (first at line 9 as "name"; keys name fields case-insensitively) (line 10)
//
// The document is parsed into yaml.v3 nodes, converted to JSON guided by the target type, and
// decoded with encoding/json (so json.Unmarshaler types such as metav1.Duration and
// resource.Quantity decode as they do in Kubernetes manifests). Aliases are followed up to
// MaxNodes converted nodes (a few aliases can name exponentially many); merge keys (<<) are
// applied, explicit keys winning: each merged mapping's pairs are worked out once however many
// merge keys name it (40 mappings each merging the one before twice name 2^40 copies of one
// pair: that is one pair, not a hang), and every pair a merge key copies counts towards
// MaxNodes too, so merges cannot take time without bound either.
package strictyaml

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/inferscale/inferscale/internal/errtext"
)

// MaxNodes bounds the nodes one document converts to, aliases expanded, and the key/value
// pairs its merge keys (<<) copy: a document that expands past it is refused (a *FieldError
// naming the line where it did, and MaxNodes) rather than allowed to take memory or time
// without bound.
const MaxNodes = 1 << 20

// Options change how UnmarshalWith matches keys.
type Options struct {
	// ExactKeys matches a key only to the field whose json name it is, byte for byte: a key
	// that differs from a field's name in case alone (SLOTHROUGHPUTRPS for sloThroughputRPS)
	// is an unknown field, its message naming the field meant. Without it a key matches
	// case-insensitively, as encoding/json matches keys.
	ExactKeys bool
	// RefuseNull makes a null value (null, ~ or nothing after the colon) of any field, map
	// entry or list element an error naming its path and line; without it a null leaves the
	// field at its zero value or default, as encoding/json does, without a word.
	RefuseNull bool
}

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
// their json tags (as encoding/json matches them), an unknown or duplicate field is an error,
// and scalars keep their written text where a string is expected (see the package doc). On
// failure the error joins one *FieldError per bad field; a syntax error keeps
// go.yaml.in/yaml/v3's "yaml: line N: …" form. An empty document leaves out unchanged; a
// second non-empty document is an error (*FieldError naming its line), never ignored.
func Unmarshal(data []byte, out any) error { return UnmarshalWith(data, out, Options{}) }

// checkUTF8 names the line and byte of the first byte that is not UTF-8 (yaml.v3 says only
// "yaml: invalid leading UTF-8 octet", with no line); a file that starts with a UTF-16 byte
// order mark is left to yaml.v3, which reads UTF-16.
func checkUTF8(data []byte) error {
	if utf8.Valid(data) || bytes.HasPrefix(data, []byte{0xfe, 0xff}) || bytes.HasPrefix(data, []byte{0xff, 0xfe}) {
		return nil
	}
	off := 0
	for off < len(data) {
		r, n := utf8.DecodeRune(data[off:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		off += n
	}
	return &FieldError{Line: 1 + bytes.Count(data[:off], []byte{'\n'}),
		Msg: fmt.Sprintf("byte 0x%02x at offset %d is not UTF-8; want a UTF-8 file", data[off], off)}
}

// UnmarshalWith is Unmarshal with keys matched as opts says.
func UnmarshalWith(data []byte, out any, opts Options) error {
	rv := reflect.ValueOf(out)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("strictyaml: Unmarshal needs a non-nil pointer, got %T", out)
	}
	if err := checkUTF8(data); err != nil {
		return err
	}
	var root yamlv3.Node
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // no document at all
		}
		return err
	}
	// A stream of several documents is refused rather than read in part: a second
	// document (after "---") would otherwise be dropped without a word.
	var next yamlv3.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return err
	case len(next.Content) > 0 && !(next.Content[0].Kind == yamlv3.ScalarNode && next.Content[0].Tag == "!!null" && next.Content[0].Value == ""):
		return &FieldError{Line: next.Content[0].Line, Msg: "a second YAML document; the file must hold exactly one"}
	}
	if len(root.Content) == 0 {
		return nil
	}
	c := converter{opts: opts, fields: map[reflect.Type]map[string]reflect.Type{}}
	var buf bytes.Buffer
	c.value(&buf, root.Content[0], rv.Type().Elem(), "")
	var err error
	if len(c.errs) == 0 {
		dec := json.NewDecoder(&buf)
		dec.DisallowUnknownFields()
		if err = dec.Decode(out); err == nil {
			return nil
		}
	}
	// Convert again, decoding every leaf on its own, to name each field that fails.
	c = converter{opts: opts, fields: c.fields, check: true}
	buf.Reset()
	c.value(&buf, root.Content[0], rv.Type().Elem(), "")
	if len(c.errs) > 0 {
		return errors.Join(c.errs...)
	}
	// A failure only the whole document shows (none known) is reported as encoding/json
	// words it.
	if err == nil {
		err = errors.New("does not decode")
	}
	return errors.New(clean(err))
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// converter writes a node tree as JSON for a target type, collecting every field error.
type converter struct {
	// check decodes every leaf on its own to report it (the second pass, after a failure).
	check  bool
	opts   Options
	fields map[reflect.Type]map[string]reflect.Type // jsonFields, per struct type
	errs   []error
	nodes  int
	stop   bool // MaxNodes reached: reported once, the rest skipped
	// merged holds the pairs of each mapping a merge key named, per target type (whose keys
	// canon compares): worked out once however many merge keys name the mapping.
	merged map[mergeKey][][2]*yamlv3.Node
}

// mergeKey is a merged mapping and the type its keys are matched against.
type mergeKey struct {
	node *yamlv3.Node
	t    reflect.Type
}

// tooLarge stops the conversion at MaxNodes, reported once at line.
func (c *converter) tooLarge(path string, line int) {
	c.stop = true
	c.fail(path, line, fmt.Sprintf("document expands to more than %d nodes through aliases and merge keys (<<) (strictyaml.MaxNodes)", MaxNodes))
}

func (c *converter) fail(path string, line int, msg string) {
	c.errs = append(c.errs, &FieldError{Path: path, Line: line, Msg: msg})
}

// value writes node as JSON for type t at path.
func (c *converter) value(buf *bytes.Buffer, node *yamlv3.Node, t reflect.Type, path string) {
	if c.stop {
		buf.WriteString("null")
		return
	}
	if c.nodes++; c.nodes > MaxNodes {
		c.tooLarge(path, node.Line)
		buf.WriteString("null")
		return
	}
	for node.Kind == yamlv3.AliasNode && node.Alias != nil {
		node = node.Alias
	}
	if node.Kind == yamlv3.DocumentNode && len(node.Content) == 1 {
		node = node.Content[0]
	}
	if node.Kind == yamlv3.ScalarNode && node.Tag == "!!null" {
		if c.opts.RefuseNull && path != "" {
			c.fail(path, node.Line, "null: remove the key to take its default, or give a value")
		}
		buf.WriteString("null")
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	pt := reflect.PointerTo(t)
	switch {
	case pt.Implements(jsonUnmarshaler):
		c.leaf(buf, node, t, path, c.anyJSON)
	case pt.Implements(textUnmarshaler) || t.Kind() == reflect.String:
		c.leaf(buf, node, t, path, c.text)
	case isNumber(t.Kind()):
		c.number(buf, node, t, path)
	case t.Kind() == reflect.Bool:
		c.leaf(buf, node, t, path, c.anyJSON)
	case t.Kind() == reflect.Struct && node.Kind == yamlv3.MappingNode:
		c.object(buf, node, t, path)
	case t.Kind() == reflect.Map && node.Kind == yamlv3.MappingNode:
		c.mapping(buf, node, t, path)
	case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && t.Elem().Kind() != reflect.Uint8 && node.Kind == yamlv3.SequenceNode:
		buf.WriteByte('[')
		for i, el := range node.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			c.value(buf, el, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
		buf.WriteByte(']')
	case t.Kind() == reflect.Interface:
		c.anyJSON(buf, node, path)
	default:
		c.leaf(buf, node, t, path, c.anyJSON)
	}
}

// leaf writes node with write and checks that it decodes into a fresh t on its own, reporting
// the error worded for a YAML author.
func (c *converter) leaf(buf *bytes.Buffer, node *yamlv3.Node, t reflect.Type, path string, write func(*bytes.Buffer, *yamlv3.Node, string)) {
	var b bytes.Buffer
	write(&b, node, path)
	buf.Write(b.Bytes())
	if !c.check {
		return
	}
	err := json.Unmarshal(b.Bytes(), reflect.New(t).Interface())
	if err == nil {
		return
	}
	msg := clean(err)
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) {
		want := typeName(ute.Type)
		if isMetav1Duration(t) { // its UnmarshalJSON wants a JSON string: say which
			want = durationWant(node)
		}
		switch node.Kind {
		case yamlv3.MappingNode:
			msg = "a mapping: want " + want
		case yamlv3.SequenceNode:
			msg = "a list: want " + want
		default:
			msg = fmt.Sprintf("%s: want %s", errtext.Quote(node.Value, 64), want)
		}
	}
	c.fail(path, node.Line, msg)
}

// isMetav1Duration reports whether t is k8s.io/apimachinery's metav1.Duration (the catalog's and
// the fake Triton's durations), told by its package path and name so that this package, which
// capacity's admission records use too, does not import apimachinery for it.
func isMetav1Duration(t reflect.Type) bool {
	return t.PkgPath() == "k8s.io/apimachinery/pkg/apis/meta/v1" && t.Name() == "Duration"
}

// durationWant words what a metav1.Duration field takes, for a node that is not a string: a Go
// duration with its unit, the example being the node's own number with "s" when it is a short
// plain number Go reads with that unit (loadTime: 3 → "3s"; 1e3 and -3 get "3s").
func durationWant(node *yamlv3.Node) string {
	example := "3s"
	if node.Kind == yamlv3.ScalarNode && (node.Tag == "!!int" || node.Tag == "!!float") && len(node.Value) <= 20 {
		// Only where that is a duration Go reads (not 1e3s) and not negative.
		if d, err := time.ParseDuration(node.Value + "s"); err == nil && d >= 0 {
			example = node.Value + "s"
		}
	}
	return fmt.Sprintf("a Go duration with its unit, such as %q (s, m, h, ms)", example)
}

// text writes a scalar as the JSON string of its text as written; other nodes as anyJSON.
func (c *converter) text(buf *bytes.Buffer, node *yamlv3.Node, path string) {
	if node.Kind != yamlv3.ScalarNode {
		c.anyJSON(buf, node, path)
		return
	}
	writeString(buf, node.Value)
}

// anyJSON writes node by the YAML 1.2 core schema: !!int and !!float as numbers (.inf and .nan,
// which JSON lacks, as strings, so that a numeric field reports them), !!bool as true/false,
// everything else scalar as a string, mappings as objects keyed by the keys' text, sequences
// as arrays.
func (c *converter) anyJSON(buf *bytes.Buffer, node *yamlv3.Node, path string) {
	for node.Kind == yamlv3.AliasNode && node.Alias != nil {
		node = node.Alias
	}
	switch node.Kind {
	case yamlv3.ScalarNode:
		switch node.Tag {
		case "!!null":
			buf.WriteString("null")
		case "!!bool":
			var v bool
			if node.Decode(&v) == nil {
				buf.WriteString(strconv.FormatBool(v))
				return
			}
			writeString(buf, node.Value)
		case "!!int", "!!float":
			buf.WriteString(numberJSON(node))
		default:
			writeString(buf, node.Value)
		}
	case yamlv3.MappingNode:
		c.mapping(buf, node, reflect.TypeFor[map[string]any](), path)
	case yamlv3.SequenceNode:
		buf.WriteByte('[')
		for i, el := range node.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			c.value(buf, el, reflect.TypeFor[any](), fmt.Sprintf("%s[%d]", path, i))
		}
		buf.WriteByte(']')
	default:
		buf.WriteString("null")
	}
}

// plainNumberRE is a number in plain decimal or exponent notation: YAML 1.2 core schema's
// decimal integer ([-+]?[0-9]+) and float forms without .inf and .nan. go.yaml.in/yaml/v3 also
// reads 0x1F, 0o17, 1_000 (YAML 1.1 and Go literal forms) and truncates 1.5, .5 and -.inf when
// decoding into an integer; no number field takes any of them.
var plainNumberRE = regexp.MustCompile(`^([-+]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([-+]?[0-9]+))?$`)

// number writes a numeric scalar for a number field of type t (an integer or float kind), or
// reports why it is not one: a notation other than plain decimal or exponent ("0x1F"), .inf
// or .nan, a fraction for an integer field ("1.5": want a whole number; 1e3 and 2.0 are whole),
// or a value outside t's range (named, never saturated or wrapped). Other nodes (a quoted
// string, a mapping) go to anyJSON, whose decoding reports them.
func (c *converter) number(buf *bytes.Buffer, node *yamlv3.Node, t reflect.Type, path string) {
	for node.Kind == yamlv3.AliasNode && node.Alias != nil {
		node = node.Alias
	}
	// yaml.v3 resolves a plain number past float64 (1e400) as a string: it is still a number
	// as written, and out of range.
	plainStr := node.Tag == "!!str" && node.Style == 0 && plainNumberRE.MatchString(node.Value) && strings.ContainsAny(node.Value, "0123456789")
	if node.Kind != yamlv3.ScalarNode || (node.Tag != "!!int" && node.Tag != "!!float" && !plainStr) {
		c.leaf(buf, node, t, path, c.anyJSON)
		return
	}
	out, msg := numberFor(node.Value, t)
	if msg != "" {
		c.fail(path, node.Line, echo(node.Value)+": "+msg)
		buf.WriteString("null")
		return
	}
	buf.WriteString(out)
}

// numberFor is the JSON of text (a YAML !!int or !!float) as a value of t, or why it is not.
func numberFor(text string, t reflect.Type) (out, msg string) {
	switch strings.ToLower(strings.TrimLeft(text, "+-")) {
	case ".inf", ".nan":
		return "", "want a finite number"
	}
	m := plainNumberRE.FindStringSubmatch(text)
	if m == nil || m[2] == "" && m[3] == "" {
		return "", "write numbers in plain decimal or exponent notation (e.g. 1000, 2.5, 1e3)"
	}
	switch t.Kind() {
	case reflect.Float32, reflect.Float64:
		bits := t.Bits()
		f, err := strconv.ParseFloat(text, bits)
		if err != nil || math.IsInf(f, 0) {
			maxf := math.MaxFloat64
			if bits == 32 {
				maxf = math.MaxFloat32
			}
			return "", fmt.Sprintf("out of range [%g, %g]", -maxf, maxf)
		}
		return strconv.FormatFloat(f, 'g', -1, bits), ""
	}
	// An integer kind: the digits and the power of ten they are scaled by, exactly (no
	// float rounding: 9007199254740993 stays itself, 1.0000000000000000001 is a fraction).
	lo, hi := intRange(t)
	outOfRange := fmt.Sprintf("out of range [%s, %s]", lo, hi)
	digits := strings.TrimLeft(m[2]+m[3], "0")
	exp := -len(m[3])
	if m[4] != "" {
		e, err := strconv.Atoi(m[4])
		switch {
		case err != nil && digits == "":
			e = 0 // 0e999999999999 is 0
		case err != nil && m[4][0] == '-':
			return "", "want a whole number"
		case err != nil:
			return "", outOfRange
		}
		exp += e
	}
	if digits == "" {
		return "0", ""
	}
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	switch {
	case exp < 0:
		return "", "want a whole number"
	case len(trimmed)+exp > 20: // past every 64-bit integer
		return "", outOfRange
	}
	whole := m[1] + trimmed + strings.Repeat("0", exp)
	var err error
	if isUnsigned(t.Kind()) {
		if m[1] == "-" {
			return "", outOfRange
		}
		_, err = strconv.ParseUint(strings.TrimPrefix(whole, "+"), 10, t.Bits())
	} else {
		_, err = strconv.ParseInt(whole, 10, t.Bits())
	}
	if err != nil {
		return "", outOfRange
	}
	return strings.TrimPrefix(whole, "+"), ""
}

// intRange words the range of an integer kind.
func intRange(t reflect.Type) (lo, hi string) {
	bits := t.Bits()
	if isUnsigned(t.Kind()) {
		return "0", strconv.FormatUint(math.MaxUint64>>(64-bits), 10)
	}
	return strconv.FormatInt(math.MinInt64>>(64-bits), 10), strconv.FormatInt(math.MaxInt64>>(64-bits), 10)
}

func isUnsigned(k reflect.Kind) bool {
	switch k {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return true
	}
	return false
}

// echo quotes v for an error, at most 64 bytes of it.
func echo(v string) string { return errtext.Quote(v, 64) }

// numberJSON is a YAML number as JSON for a target that is not a number field (an interface,
// a json.Unmarshaler such as resource.Quantity): the text itself when it is a JSON number, a
// plain decimal or exponent number JSON cannot write as such (+1, .5, 2.) as its float64
// value, anything else (0x1F, 1_000, .inf, a number past float64) as a string, so that it
// is never read as a value nobody wrote and a numeric decoder reports it.
func numberJSON(node *yamlv3.Node) string {
	if json.Valid([]byte(node.Value)) && strings.Trim(node.Value, "-0123456789.eE") == "" {
		return node.Value
	}
	if plainNumberRE.MatchString(node.Value) {
		if f, err := strconv.ParseFloat(node.Value, 64); err == nil {
			return strconv.FormatFloat(f, 'g', -1, 64)
		}
	}
	return strconv.Quote(node.Value)
}

func writeString(buf *bytes.Buffer, s string) {
	b, _ := json.Marshal(s) // a string always marshals
	buf.Write(b)
}

// pairs returns a mapping's key/value pairs with merge keys (<<) applied: the merged
// mappings' pairs first, so that an explicit key overrides them (YAML's merge semantics).
// Keys are compared by canon(key) — the struct field a key names, or a map key as written — so
// that two spellings of one field (name and Name, which encoding/json both match to "name")
// are a repeated key like the same spelling twice. A repeated explicit key is reported, naming
// both spellings and the first one's line. t is the type canon matches keys for: a merged
// mapping's pairs are worked out once per t (c.merged), and each pair merged in counts towards
// MaxNodes.
func (c *converter) pairs(node *yamlv3.Node, t reflect.Type, path string, canon func(string) string) [][2]*yamlv3.Node {
	if c.stop {
		return nil
	}
	var merged, explicit [][2]*yamlv3.Node
	seen := map[string]*yamlv3.Node{}
	for i := 0; i+1 < len(node.Content); i += 2 {
		key, val := node.Content[i], node.Content[i+1]
		if key.Tag == "!!merge" {
			for val.Kind == yamlv3.AliasNode && val.Alias != nil {
				val = val.Alias
			}
			sources := []*yamlv3.Node{val}
			if val.Kind == yamlv3.SequenceNode {
				sources = val.Content
			}
			for _, src := range sources {
				for src.Kind == yamlv3.AliasNode && src.Alias != nil {
					src = src.Alias
				}
				if src.Kind != yamlv3.MappingNode {
					c.fail(path, key.Line, "merge key (<<) needs a mapping or a list of mappings")
					continue
				}
				k := mergeKey{src, t}
				ps, done := c.merged[k]
				if !done {
					ps = c.pairs(src, t, path, canon)
					if c.merged == nil {
						c.merged = map[mergeKey][][2]*yamlv3.Node{}
					}
					c.merged[k] = ps
				}
				if c.stop {
					return nil
				}
				if c.nodes += len(ps); c.nodes > MaxNodes {
					c.tooLarge(path, key.Line)
					return nil
				}
				merged = append(merged, ps...)
			}
			continue
		}
		k := canon(key.Value)
		if first, dup := seen[k]; dup {
			msg := fmt.Sprintf("duplicate field (first at line %d)", first.Line)
			if first.Value != key.Value {
				msg = fmt.Sprintf("duplicate field (first at line %d as %s; keys name fields case-insensitively)", first.Line, echo(first.Value))
			}
			c.fail(join(path, key.Value), key.Line, msg)
			continue
		}
		seen[k] = key
		explicit = append(explicit, [2]*yamlv3.Node{key, val})
	}
	if len(merged) == 0 {
		return explicit
	}
	var out [][2]*yamlv3.Node
	taken := map[string]bool{}
	for _, p := range explicit {
		taken[canon(p[0].Value)] = true
	}
	for _, p := range merged {
		if k := canon(p[0].Value); !taken[k] {
			taken[k] = true
			out = append(out, p)
		}
	}
	return append(out, explicit...)
}

// asWritten is the canon of a map's keys: encoding/json matches them exactly.
func asWritten(key string) string { return key }

// fieldName is the json field name of fields that key names: the exact name, else (unless
// exact) one equal to it case-insensitively, as encoding/json accepts (the least such name when
// several are, so that the choice does not depend on map order); ok false when none is.
func fieldName(fields map[string]reflect.Type, key string, exact bool) (name string, ok bool) {
	if _, ok := fields[key]; ok {
		return key, true
	}
	if exact {
		return "", false
	}
	for fn := range fields {
		if strings.EqualFold(fn, key) && (!ok || fn < name) {
			name, ok = fn, true
		}
	}
	return name, ok
}

// object writes a mapping as the JSON object of struct t, each key matched to a json field
// name (exactly, else case-insensitively as encoding/json does; see fieldName); keys naming the
// same field are reported by pairs, never decoded last-wins.
func (c *converter) object(buf *bytes.Buffer, node *yamlv3.Node, t reflect.Type, path string) {
	fields, ok := c.fields[t]
	if !ok {
		fields = jsonFields(t)
		c.fields[t] = fields
	}
	// A key names its field (two spellings of one field are one key to pairs); an unknown key
	// stands for itself.
	canon := func(key string) string {
		if name, ok := fieldName(fields, key, c.opts.ExactKeys); ok {
			return name
		}
		return key
	}
	buf.WriteByte('{')
	n := 0
	for _, p := range c.pairs(node, t, path, canon) {
		key, val := p[0], p[1]
		name, ok := fieldName(fields, key.Value, c.opts.ExactKeys)
		ft := fields[name]
		if !ok {
			msg := "unknown field"
			if meant, ok := fieldName(fields, key.Value, false); ok {
				msg = fmt.Sprintf("unknown field; keys are case-sensitive: want %s", meant)
			}
			c.fail(join(path, key.Value), key.Line, msg)
			continue
		}
		if n > 0 {
			buf.WriteByte(',')
		}
		n++
		writeString(buf, name)
		buf.WriteByte(':')
		c.value(buf, val, ft, join(path, key.Value))
	}
	buf.WriteByte('}')
}

// mapping writes a mapping as a JSON object for map type t, keys as written.
func (c *converter) mapping(buf *bytes.Buffer, node *yamlv3.Node, t reflect.Type, path string) {
	if t.Key().Kind() != reflect.String {
		c.fail(path, node.Line, "a mapping: want "+typeName(t))
		buf.WriteString("null")
		return
	}
	buf.WriteByte('{')
	for i, p := range c.pairs(node, t, path, asWritten) {
		key, val := p[0], p[1]
		if key.Kind != yamlv3.ScalarNode {
			c.fail(path, key.Line, "a key that is not a scalar: want a string")
			continue
		}
		if i > 0 {
			buf.WriteByte(',')
		}
		writeString(buf, key.Value)
		buf.WriteByte(':')
		c.value(buf, val, t.Elem(), fmt.Sprintf("%s[%q]", path, key.Value))
	}
	buf.WriteByte('}')
}

func isNumber(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
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

// clean drops encoding/json's wording from an error message.
func clean(err error) string {
	return strings.ReplaceAll(err.Error(), "json: ", "")
}
