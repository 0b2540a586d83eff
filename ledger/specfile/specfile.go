// Package specfile reads the ledger's spec file (YAML, strict keys; the
// schema is in docs/ledger.md) and the admission records it names, and
// reports every invalid field with its YAML line.
package specfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/inferscale/inferscale/capacity/record"
	"github.com/inferscale/inferscale/internal/boundedfile"
	"github.com/inferscale/inferscale/internal/errtext"
	"github.com/inferscale/inferscale/ledger"
)

// MaxBytes bounds a spec or admission record file.
const MaxBytes = 16 << 20

// MaxErrors bounds the errors one Parse or Load returns: the first MaxErrors, then one saying
// how many more there were.
const MaxErrors = 100

// recordRead reads one admission record (record.Read); a test counts the reads through it.
var recordRead = record.Read

// ErrInvalid wraps every error Parse and Load return for bad input, so a
// caller can tell bad input (exit 2) from other failures.
var ErrInvalid = errors.New("invalid spec")

// FieldError is one invalid field: its path in the spec, its line in the
// file (0 when unknown) and what is wrong.
type FieldError struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e *FieldError) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc += ":" + strconv.Itoa(e.Line)
	}
	return fmt.Sprintf("%s: %s: %s", loc, e.Field, e.Msg)
}

func (e *FieldError) Unwrap() error { return ErrInvalid }

// Load reads and validates the spec at path; admission records are read
// relative to the spec's folder.
func Load(path string) (ledger.Spec, error) {
	data, err := readBounded(path)
	if err != nil {
		return ledger.Spec{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return Parse(data, path)
}

func readBounded(path string) ([]byte, error) {
	data, err := boundedfile.Read(path, MaxBytes)
	if errors.Is(err, boundedfile.ErrTooLarge) {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, MaxBytes)
	}
	return data, err
}

// Parse decodes and validates a spec; name is the file's path, used in
// errors and to resolve admission record paths. Unknown keys, wrong types
// and every Validate violation are errors naming the field and line
// (joined, at most MaxErrors and then how many more; each unwraps to
// ErrInvalid). A spec past ledger.MaxServices is refused on that count
// alone (and the node count, when past ledger.MaxNodes too), before any
// admission record is read; each distinct record path (a relative one
// joined to the spec's folder, an absolute one as written) is read once
// however many services name it.
func Parse(data []byte, name string) (ledger.Spec, error) {
	spec, errs := parse(data, name)
	if n := len(errs) - MaxErrors; n > 0 {
		errs = append(errs[:MaxErrors:MaxErrors], &FieldError{File: name, Field: omitted(errs[MaxErrors:]), Msg: fmt.Sprintf("%d more errors not shown (at most %d are reported)", n, MaxErrors)})
	}
	if len(errs) == 1 {
		return spec, errs[0] // as it is, not joined
	}
	return spec, errors.Join(errs...)
}

// omitted is the field of the error standing for errs, those past MaxErrors: "nodes" when
// they are all about nodes, "nodes and placements" when about nodes and services' placements
// (which the ledger's live mode replaces, so such errors do not count there), else "spec".
func omitted(errs []error) string {
	if !AboutNodes(errs) {
		return "spec"
	}
	for _, err := range errs {
		if fe := (*FieldError)(nil); errors.As(err, &fe) && !strings.HasPrefix(fe.Field, "nodes") {
			return "nodes and placements"
		}
	}
	return "nodes"
}

// parse is Parse with every error, unbounded.
func parse(data []byte, name string) (ledger.Spec, []error) {
	var spec ledger.Spec
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return spec, []error{fmt.Errorf("%w: %s: %w", ErrInvalid, name, err)}
	}
	if len(root.Content) == 0 {
		return spec, []error{&FieldError{File: name, Field: "spec", Msg: "empty file; want nodes: and services:"}}
	}
	// The service count, on the parsed nodes: a spec past it is not decoded a second time.
	if errs := counts(&root, name, listLen(&root, "nodes"), listLen(&root, "services")); errs != nil {
		return spec, errs
	}
	var numErrs []error
	var unread []*yaml.Node // the scalars numberWalk reported
	w := numberWalk{name: name, errs: &numErrs, bad: &unread, merged: map[mergedVisit]bool{}}
	w.fields(&root, reflect.TypeFor[ledger.Spec](), "")
	// Errors about the nodes alone do not stop the services from being read: `ledger --live`
	// replaces the spec's nodes and ignores such errors (cmd/ledger), and returning no services
	// there would report every node releasable.
	sanitized := false
	if len(numErrs) > 0 && !AboutNodes(numErrs) {
		if len(unread) == 0 || unknownField(numErrs) || hasAlias(&root) {
			// A misspelt key, whose field Validate would report missing: a second error for
			// the same fault. Or an alias: a value set to null under an anchor is null wherever
			// it is merged (its other paths would read "required"), and numberWalk does not look
			// for unknown keys in an aliased mapping, which the decoding below would skip
			// without a word.
			return spec, numErrs
		}
		// One error per fault, all at once: the values numberWalk reported read as null (a
		// pointer nil, a number 0; Validate's errors on their paths are not repeated below) so
		// that the rest of the spec is decoded and checked in the same pass. Unknown fields,
		// reported too, are skipped by Node.Decode.
		for _, n := range unread {
			n.Kind, n.Tag, n.Value, n.Style = yaml.ScalarNode, "!!null", "", 0
		}
		sanitized = true
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	nodesUnread := false
	decode := func() error { return dec.Decode(&spec) }
	if sanitized {
		decode = func() error {
			var first yaml.Node // the decoder past the first document, for the check below
			if err := dec.Decode(&first); err != nil {
				return err
			}
			return root.Decode(&spec)
		}
	}
	if err := decode(); err != nil {
		if sanitized {
			return spec, numErrs
		}
		if len(numErrs) == 0 {
			return spec, []error{fmt.Errorf("%w: %s: %w", ErrInvalid, name, boundYAML(err))}
		}
		// A node value yaml cannot decode (1e400 into float64), already reported: read the
		// services alone, the nodes left raw. Validate is skipped then (it would report every
		// placement's node unknown); `ledger --live` validates after replacing the nodes.
		var rest struct {
			Nodes    yaml.Node        `yaml:"nodes"`
			Services []ledger.Service `yaml:"services"`
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&rest); err != nil {
			return ledger.Spec{}, append(numErrs, fmt.Errorf("%w: %s: %w", ErrInvalid, name, boundYAML(err)))
		}
		spec, nodesUnread = ledger.Spec{Services: rest.Services}, true
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return spec, []error{fmt.Errorf("%w: %s: after the spec: %w", ErrInvalid, name, err)}
	default:
		line := extra.Line
		if len(extra.Content) > 0 {
			line = extra.Content[0].Line
		}
		return spec, []error{&FieldError{File: name, Line: line, Field: "spec", Msg: "a second YAML document; a spec is one document (nodes: and services:)"}}
	}
	// Again on the decoded spec (a list written other than as a plain sequence, e.g. merged).
	if errs := counts(&root, name, len(spec.Nodes), len(spec.Services)); errs != nil {
		return spec, errs
	}
	missingPeaks(data, &spec)
	var errs []error
	dir := filepath.Dir(name)
	records := recordCache{}
	// badRecord: services whose record was reported; Validate's "safeRPSPerReplica: required"
	// for them only restated that error, at the service's first line.
	badRecord := map[string]bool{}
	for i := range spec.Services {
		s := &spec.Services[i]
		if s.Record == "" {
			continue
		}
		field := fmt.Sprintf("services[%d].record", i)
		fail := func(format string, a ...any) {
			errs = append(errs, &FieldError{File: name, Line: lineOf(&root, field), Field: field, Msg: fmt.Sprintf(format, a...)})
			badRecord[fmt.Sprintf("services[%d].safeRPSPerReplica", i)] = true
		}
		if s.SafeRPSPerReplica != 0 {
			fail("give safeRPSPerReplica or record, not both")
			continue
		}
		// The path read: an absolute one as written (a symlink under a/../ resolves where the
		// OS takes it), a relative one joined to the spec's folder.
		path := s.Record
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		rec, err := records.read(path)
		if err != nil {
			fail("%v", err)
			continue
		}
		if rec.Profile != s.Profile {
			fail("the record measured profile %q, the service asks for %q", rec.Profile, s.Profile)
			continue
		}
		s.SafeRPSPerReplica = rec.SLOThroughputRPS
		s.Refused = !rec.Verdict.Allowed
	}
	reported := map[string]bool{} // fields numberWalk already reported
	for _, err := range numErrs {
		if fe, ok := err.(*FieldError); ok {
			reported[fe.Field] = true
		}
	}
	for _, fe := range spec.Validate() {
		if !reported[fe.Path] && !nodesUnread && !(badRecord[fe.Path] && strings.HasPrefix(fe.Msg, "required for")) {
			errs = append(errs, &FieldError{File: name, Line: lineOf(&root, fe.Path), Field: fe.Path, Msg: fe.Msg})
		}
	}
	return spec, append(numErrs, errs...)
}

// hasAlias reports whether the document under n holds an alias (*name, or a merge <<: *name).
func hasAlias(n *yaml.Node) bool {
	if n.Kind == yaml.AliasNode {
		return true
	}
	for _, c := range n.Content {
		if hasAlias(c) {
			return true
		}
	}
	return false
}

// unknownField reports whether errs hold numberWalk's error for a key the spec does not have.
func unknownField(errs []error) bool {
	for _, err := range errs {
		if fe := (*FieldError)(nil); errors.As(err, &fe) && strings.HasPrefix(fe.Msg, unknownFieldMsg) {
			return true
		}
	}
	return false
}

// recordCache holds each admission record read, so that a file is read and parsed once
// however many services name it, in whatever spelling (/r/x.yaml, /r/./././x.yaml, //r/x.yaml,
// a symlink to it): by the path as given, and by the file the path names (os.SameFile, as the
// OS resolves the path; a lexical filepath.Clean would take /r/lnk/../x.yaml for /r/x.yaml,
// which through a symlink lnk it is not).
type recordCache struct {
	byPath map[string]*recordResult
	bySize map[int64][]*recordResult // those whose file was found, by its size
}

type recordResult struct {
	info fs.FileInfo // nil when the path did not stat
	rec  record.Record
	err  error
}

// read returns the record at path, reading it only when no path read before names its file.
func (c *recordCache) read(path string) (record.Record, error) {
	if c.byPath == nil {
		c.byPath, c.bySize = map[string]*recordResult{}, map[int64][]*recordResult{}
	}
	r, done := c.byPath[path]
	if !done {
		r = c.byFile(path)
		c.byPath[path] = r
	}
	return r.rec, r.err
}

func (c *recordCache) byFile(path string) *recordResult {
	info, err := os.Stat(path)
	if err != nil || !info.Mode().IsRegular() {
		// Not a file that can be matched (missing, a device such as /dev/zero): read as
		// given; the reader's error, or its size bound, ends it cheaply.
		r := &recordResult{}
		r.rec, r.err = readRecord(path)
		return r
	}
	for _, r := range c.bySize[info.Size()] {
		if os.SameFile(r.info, info) {
			return r
		}
	}
	r := &recordResult{info: info}
	r.rec, r.err = readRecord(path)
	c.bySize[info.Size()] = append(c.bySize[info.Size()], r)
	return r
}

// missingPeaks sets the PeakRPS of each P0 and P1 service whose spec leaves peakRPS out (or
// null) to ledger.PeakUnset, which Validate reports as required unless it is replaced first
// (`ledger --live --prometheus-address` reads it). The spec's decoder gives 0 for an absent
// peakRPS, the same as `peakRPS: 0`, which is a valid demand: so the keys are read again,
// merge keys applied by yaml.v3 (its alias bound holds).
func missingPeaks(data []byte, spec *ledger.Spec) {
	var given struct {
		Services []struct {
			PeakRPS *float64 `yaml:"peakRPS"`
		} `yaml:"services"`
	}
	// An error here is one the strict decode has reported (or a value yaml.v3 cannot take,
	// reported by numberWalk): the services it leaves unread are not called missing.
	if err := yaml.Unmarshal(data, &given); err != nil || len(given.Services) != len(spec.Services) {
		return
	}
	for i, g := range given.Services {
		if s := &spec.Services[i]; g.PeakRPS == nil && (s.Tier == ledger.P0 || s.Tier == ledger.P1) {
			s.PeakRPS = ledger.PeakUnset
		}
	}
}

// boundYAML bounds yaml.v3's decode error, one error listing a line per failure (5,000 nodes
// with gpus: 5 printed 5,000): past MaxErrors lines, the rest is one saying how many more.
func boundYAML(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) || len(te.Errors) <= MaxErrors {
		return err
	}
	lines := append(te.Errors[:MaxErrors:MaxErrors], fmt.Sprintf("%d more not shown (at most %d are reported)", len(te.Errors)-MaxErrors, MaxErrors))
	return &yaml.TypeError{Errors: lines}
}

// AboutNodes reports whether every error is a *FieldError about the nodes (a field under
// nodes), a service's placement, or a P0/P1 service's peakRPS left out: what `ledger --live`
// replaces from the cluster (the peak from Prometheus, with --prometheus-address; the live
// run validates the spec again once it has, so a peak still missing is reported then).
func AboutNodes(errs []error) bool {
	for _, err := range errs {
		var fe *FieldError
		if !errors.As(err, &fe) || !strings.HasPrefix(fe.Field, "nodes") && !strings.Contains(fe.Field, ".placement") && !PeakMissing(fe) {
			return false
		}
	}
	return true
}

// PeakMissing reports whether err is (or wraps) Validate's error for a P0/P1 peakRPS left
// out, which only `ledger --live --prometheus-address` can fill.
func PeakMissing(err error) bool {
	var fe *FieldError
	return errors.As(err, &fe) && strings.HasSuffix(fe.Field, ".peakRPS") && strings.HasPrefix(fe.Msg, ledger.PeakRequired)
}

// counts reports a spec past ledger.MaxServices services, as Validate words it (with the node
// count when that is past ledger.MaxNodes too), nil when the services are within the limit:
// past it nothing else is checked and no record is read (each service may name one, each up
// to record.MaxBytes).
func counts(root *yaml.Node, name string, nodes, services int) []error {
	if services <= ledger.MaxServices {
		return nil
	}
	var errs []error
	if nodes > ledger.MaxNodes {
		errs = append(errs, &FieldError{File: name, Line: lineOf(root, "nodes"), Field: "nodes", Msg: fmt.Sprintf("%d nodes; at most %d", nodes, ledger.MaxNodes)})
	}
	return append(errs, &FieldError{File: name, Line: lineOf(root, "services"), Field: "services", Msg: fmt.Sprintf("%d services; at most %d", services, ledger.MaxServices)})
}

// listLen is the length of the document's top-level list key (a sequence, or an alias of
// one); 0 when there is none.
func listLen(root *yaml.Node, key string) int {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	if n.Kind != yaml.MappingNode {
		return 0
	}
	for k := 0; k+1 < len(n.Content); k += 2 {
		if n.Content[k].Value != key {
			continue
		}
		v := n.Content[k+1]
		if v.Kind == yaml.AliasNode && v.Alias != nil {
			v = v.Alias
		}
		if v.Kind == yaml.SequenceNode {
			return len(v.Content)
		}
		return 0
	}
	return 0
}

// readRecord reads the admission record at path with the capacity package's own strict reader
// (capacity/record: unknown keys, a bad profile name or out-of-range figures are errors) and
// checks what the ledger relies on: sloThroughputRPS, the highest rate one replica sustains
// within its SLO, in (0, ledger.MaxRPS] requests per second when the verdict allows the model;
// in [0, ledger.MaxRPS] when it does not (cmd/capacity writes 0 for a model with no passing
// level, and such a service fails its admission check, not the input).
func readRecord(path string) (record.Record, error) {
	r, err := recordRead(path)
	if err != nil {
		return record.Record{}, fmt.Errorf("admission record: %w", err)
	}
	switch v := r.SLOThroughputRPS; {
	case r.Verdict.Allowed && !(v > 0 && v <= ledger.MaxRPS):
		return record.Record{}, fmt.Errorf("admission record %s: sloThroughputRPS %v is outside (0, %g] (verdict.allowed: true)", path, v, ledger.MaxRPS)
	case !r.Verdict.Allowed && !(v >= 0 && v <= ledger.MaxRPS):
		return record.Record{}, fmt.Errorf("admission record %s: sloThroughputRPS %v is outside [0, %g]", path, v, ledger.MaxRPS)
	}
	return r, nil
}

// yamlNotation reports whether v, a plain scalar, is a number in a notation other than plain
// decimal or exponent: go.yaml.in/yaml/v3 also reads 1_000 as 1000 and 0x10 as 16 (YAML 1.1
// and Go literal forms no operator writes for a rate or a price), as 0o17 and 0b11. numberWalk
// reports such a value in a numeric field at its path, with the field's range; a string field
// keeps the text as written (name: 0x10 is the name "0x10"), so it is no fault there.
func yamlNotation(v string) bool {
	v = strings.ToLower(strings.TrimLeft(v, "+-"))
	return strings.Contains(v, "_") || strings.HasPrefix(v, "0x") || strings.HasPrefix(v, "0o") || strings.HasPrefix(v, "0b")
}

// fieldRange words the accepted range of each numeric field, as Validate does.
var fieldRange = map[string]string{
	"pricePerHour":      "[0, 1e6] USD per hour",
	"peakRPS":           fmt.Sprintf("[0, %g]", ledger.MaxRPS),
	"safeRPSPerReplica": fmt.Sprintf("[0, %g]", ledger.MaxRPS),
	"readyReplicas":     fmt.Sprintf("[0, %d]", ledger.MaxReplicas),
}

// unknownFieldMsg opens numberWalk's error for a key the spec's types do not have.
const unknownFieldMsg = "unknown field"

// numberWalk walks the document along the spec's types (yaml tags) and reports each number
// go.yaml.in/yaml/v3 would not read as written: another notation than plain decimal or
// exponent (pricePerHour: 1_000 or 0x10, read as 1000 and 16; yamlNotation), a leading zero
// (pricePerHour: 0367, which yaml.v3 reads as octal 247), a fraction in an integer field
// (readyReplicas: 1.5 became 1), and a value past float64 (pricePerHour: 1e400, which yaml.v3 resolves as a string and then
// refuses without naming the field). Each error names the field, its line, and the field's
// range.
//
// A mapping that merge keys (<<) name is walked once per type however many name it, its
// errors under the path where it was first merged: 40 mappings each merging the one before
// twice name 2^40 copies, which were walked one by one (yaml.v3's own alias bound applies
// only when it decodes, after this walk).
type numberWalk struct {
	name   string // the spec file, for errors
	errs   *[]error
	bad    *[]*yaml.Node // the scalars reported
	merged map[mergedVisit]bool
}

// mergedVisit is a merged mapping walked as type t.
type mergedVisit struct {
	node *yaml.Node
	t    reflect.Type
}

func (w *numberWalk) fields(n *yaml.Node, t reflect.Type, path string) {
	name, errs := w.name, w.errs
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			w.fields(c, t, path)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			if key.Tag == "!!merge" { // <<: the merged mappings' keys are this mapping's fields
				for _, m := range mergedMappings(val) {
					if v := (mergedVisit{m, t}); !w.merged[v] {
						w.merged[v] = true
						w.fields(m, t, path)
					}
				}
				continue
			}
			var ft reflect.Type
			p := key.Value
			if path != "" {
				p = path + "." + key.Value
			}
			if t != nil && t.Kind() == reflect.Struct {
				if ft = yamlField(t, key.Value); ft == nil {
					// yaml.v3's own text names the Go type, not the field's path.
					*errs = append(*errs, &FieldError{File: name, Line: key.Line, Field: p, Msg: unknownFieldMsg + "; want one of " + strings.Join(yamlFields(t), ", ")})
					continue
				}
			}
			w.fields(val, ft, p)
		}
	case yaml.SequenceNode:
		var et reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			et = t.Elem()
		}
		for i, c := range n.Content {
			w.fields(c, et, fmt.Sprintf("%s[%d]", path, i))
		}
	case yaml.AliasNode:
		if n.Alias != nil && n.Alias.Kind == yaml.ScalarNode { // collections are checked where anchored
			w.fields(n.Alias, t, path)
		}
	case yaml.ScalarNode:
		if t == nil || n.Tag == "!!null" {
			return
		}
		field := path[strings.LastIndexByte(path, '.')+1:]
		rng, ok := fieldRange[field]
		if !ok {
			rng = "the range of " + t.Kind().String()
		}
		fail := func(msg string) {
			*errs = append(*errs, &FieldError{File: name, Line: n.Line, Field: path, Msg: msg})
			*w.bad = append(*w.bad, n)
		}
		numeric := false
		switch t.Kind() {
		case reflect.Float32, reflect.Float64, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			numeric = true
		}
		if numeric && n.Style == 0 && yamlNotation(n.Value) {
			fail(fmt.Sprintf("%s: write numbers in plain decimal or exponent notation (e.g. 1000, 2.5, 1e3); want a number in %s", errtext.Quote(n.Value, 64), rng))
			return
		}
		m := ledger.PlainNumber(n.Value) // the rule ledger/kube's price annotation follows too
		notNumber := n.Style != 0 || !(n.Tag == "!!int" || n.Tag == "!!float" || n.Tag == "!!str") || m == nil
		if notNumber {
			if numeric { // yaml.v3 would say only "cannot unmarshal !!str `5O` into float64", no field
				fail(fmt.Sprintf("%s: want a number in %s", errtext.Quote(n.Value, 64), rng))
			}
			return
		}
		if numeric && ledger.LeadingZero(m) {
			// yaml.v3 reads 0367 as octal (247) and 012 as 10; 09 as 9.
			fail(fmt.Sprintf("%s has a leading zero, which yaml.v3 reads as octal; want a plain decimal number in %s (0 and 0.5 are fine)", n.Value, rng))
			return
		}
		f, err := strconv.ParseFloat(n.Value, 64)
		switch t.Kind() {
		case reflect.Float32, reflect.Float64:
			if err != nil {
				fail(fmt.Sprintf("%s is outside %s", n.Value, rng))
			}
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			switch {
			case !isWhole(m):
				fail(fmt.Sprintf("%s: want a whole number", n.Value))
			case err != nil || f < math.MinInt64 || f > math.MaxInt64:
				fail(fmt.Sprintf("%s is outside %s", n.Value, rng))
			}
		}
	}
}

// mergedMappings are the mappings a merge key's value names: a mapping, an alias of one, or a
// sequence of those (YAML's merge key); anything else names none (yaml.v3 refuses it).
func mergedMappings(v *yaml.Node) []*yaml.Node {
	switch {
	case v.Kind == yaml.AliasNode && v.Alias != nil:
		return mergedMappings(v.Alias)
	case v.Kind == yaml.MappingNode:
		return []*yaml.Node{v}
	case v.Kind == yaml.SequenceNode:
		var out []*yaml.Node
		for _, c := range v.Content {
			if c.Kind == yaml.AliasNode && c.Alias != nil {
				c = c.Alias
			}
			if c.Kind == yaml.MappingNode {
				out = append(out, c)
			}
		}
		return out
	}
	return nil
}

// yamlFields are t's yaml field names, in declaration order.
func yamlFields(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// yamlField is the type of t's field with that yaml name, nil when there is none.
func yamlField(t reflect.Type, key string) reflect.Type {
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name == key {
			return f.Type
		}
	}
	return nil
}

// isWhole reports whether a number split by ledger.PlainNumber is an integer, exactly: the digits
// scaled by the exponent leave no fraction (2.0, 1e3 and 15e-1… are decided on the digits,
// not on a rounded float, so 1.0000000000000000001 is not whole).
func isWhole(m []string) bool {
	digits := strings.TrimLeft(m[2]+m[3], "0")
	if digits == "" {
		return true // zero
	}
	exp := -len(m[3])
	if m[4] != "" {
		e, err := strconv.Atoi(m[4])
		if err != nil {
			return m[4][0] != '-' // a huge positive exponent is whole (and out of range)
		}
		exp += e
	}
	trailing := len(digits) - len(strings.TrimRight(digits, "0"))
	return exp+trailing >= 0
}

// lineOf finds the YAML line of a field path such as
// "services[2].placement[0]": the deepest node on the path that exists.
func lineOf(root *yaml.Node, path string) int {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := n.Line
	for _, part := range strings.Split(path, ".") {
		name, idx := part, -1
		if i := strings.IndexByte(part, '['); i >= 0 && strings.HasSuffix(part, "]") {
			name = part[:i]
			idx, _ = strconv.Atoi(part[i+1 : len(part)-1])
		}
		next := (*yaml.Node)(nil)
		if n.Kind == yaml.MappingNode {
			for k := 0; k+1 < len(n.Content); k += 2 {
				if n.Content[k].Value == name {
					next = n.Content[k+1]
					line = n.Content[k].Line
					break
				}
			}
		}
		if next == nil {
			return line
		}
		n = next
		if idx >= 0 {
			if n.Kind != yaml.SequenceNode || idx >= len(n.Content) {
				return line
			}
			n = n.Content[idx]
			line = n.Line
		}
	}
	return line
}
