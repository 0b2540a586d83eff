package deploy

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"time"
)

// The chart writes command lines for cmd/scaler and cmd/residency. To check them against the
// real flags without starting either process, the tests read each main.go and bind every
// `fs.<Type>Var(&c.<Field>, "<name>", …)` it declares to the same Config field by reflection,
// then parse the rendered arguments with that FlagSet. A flag the chart writes that the command
// does not declare is an error ("flag provided but not defined"), and the parsed Config goes
// through the package's own Validate.

var flagDeclRE = regexp.MustCompile(`fs\.(String|Duration|Int|Int64|Uint|Uint64|Bool|Float64)Var\(&\w+\.(\w+),\s*"([^"]+)"`)

// flagDecl is one flag a command declares: its name, Config field and flag type.
type flagDecl struct{ typ, field, name string }

// errNoMain marks a command whose main.go has not landed.
var errNoMain = errors.New("main.go not found")

// readFlagDecls extracts the flag declarations of a command's main.go.
func readFlagDecls(mainGo string) ([]flagDecl, error) {
	src, err := os.ReadFile(mainGo)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", mainGo, errNoMain)
	}
	if err != nil {
		return nil, err
	}
	var out []flagDecl
	for _, m := range flagDeclRE.FindAllStringSubmatch(string(src), -1) {
		out = append(out, flagDecl{typ: m[1], field: m[2], name: m[3]})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no fs.<Type>Var(&c.Field, \"name\", …) declarations found", mainGo)
	}
	return out, nil
}

// parseFlags parses args into cfg (a pointer to a Config struct, already holding the defaults)
// using the command's own flag names and fields.
func parseFlags(cfg any, decls []flagDecl, args []string) error {
	fs := flag.NewFlagSet("chart", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	v := reflect.ValueOf(cfg).Elem()
	for _, d := range decls {
		f := v.FieldByName(d.field)
		if !f.IsValid() {
			return fmt.Errorf("flag --%s names field %s, which %s does not have", d.name, d.field, v.Type())
		}
		p := f.Addr().Interface()
		var ok bool
		switch d.typ {
		case "String":
			var q *string
			q, ok = p.(*string)
			if ok {
				fs.StringVar(q, d.name, *q, "")
			}
		case "Duration":
			var q *time.Duration
			q, ok = p.(*time.Duration)
			if ok {
				fs.DurationVar(q, d.name, *q, "")
			}
		case "Int":
			var q *int
			q, ok = p.(*int)
			if ok {
				fs.IntVar(q, d.name, *q, "")
			}
		case "Int64":
			var q *int64
			q, ok = p.(*int64)
			if ok {
				fs.Int64Var(q, d.name, *q, "")
			}
		case "Uint":
			var q *uint
			q, ok = p.(*uint)
			if ok {
				fs.UintVar(q, d.name, *q, "")
			}
		case "Uint64":
			var q *uint64
			q, ok = p.(*uint64)
			if ok {
				fs.Uint64Var(q, d.name, *q, "")
			}
		case "Bool":
			var q *bool
			q, ok = p.(*bool)
			if ok {
				fs.BoolVar(q, d.name, *q, "")
			}
		case "Float64":
			var q *float64
			q, ok = p.(*float64)
			if ok {
				fs.Float64Var(q, d.name, *q, "")
			}
		}
		if !ok {
			return fmt.Errorf("flag --%s: field %s is %s, not %s", d.name, d.field, f.Type(), d.typ)
		}
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return nil
}
