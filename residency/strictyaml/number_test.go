package strictyaml

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
)

// numbers has a field of each numeric kind the callers use.
type numbers struct {
	I64 int64   `json:"i64,omitempty"`
	I8  int8    `json:"i8,omitempty"`
	U32 uint32  `json:"u32,omitempty"`
	F64 float64 `json:"f64,omitempty"`
	F32 float32 `json:"f32,omitempty"`
}

// TestNumbers: a number field takes plain decimal or exponent notation at its value exactly;
// go.yaml.in/yaml/v3 alone turned .5 into 0 for an integer, -.inf into MinInt64 and 1.5 into
// 1, each without an error. Now a fraction for an integer, ±inf, nan, another notation and a
// value out of the field's range are each an error naming the field, its line and the range.
func TestNumbers(t *testing.T) {
	tests := []struct {
		name    string
		give    string
		want    numbers
		wantErr string
	}{
		{name: "plain forms", give: "i64: 42\ni8: -128\nu32: 4294967295\nf64: .5\nf32: 2.\n",
			want: numbers{I64: 42, I8: -128, U32: 4294967295, F64: 0.5, F32: 2}},
		{name: "exponent and whole fractions into integers", give: "i64: 1e3\ni8: 2.0\nu32: 12.5e1\nf64: -1.5e-3\n",
			want: numbers{I64: 1000, I8: 2, U32: 125, F64: -0.0015}},
		{name: "exact past float64 precision", give: "i64: 9007199254740993\n", want: numbers{I64: 9007199254740993}},
		{name: "int64 limits", give: "i64: -9223372036854775808\n", want: numbers{I64: -9223372036854775808}},
		{name: "plus sign and leading zeros are decimal", give: "i64: +007\nf64: +0.25\n", want: numbers{I64: 7, F64: 0.25}},
		{name: "zero with a huge exponent", give: "i64: 0e999999999999\n", want: numbers{}},

		{name: "fraction into an integer", give: "i64: 1.5\n", wantErr: `i64: "1.5": want a whole number (line 1)`},
		{name: "leading-dot fraction into an integer", give: "\ni64: .5\n", wantErr: `i64: ".5": want a whole number (line 2)`},
		{name: "tiny fraction is not rounded away", give: "i64: 1.0000000000000000000001\n", wantErr: `i64: "1.0000000000000000000001": want a whole number (line 1)`},
		{name: "negative exponent", give: "i64: 15e-1\n", wantErr: `i64: "15e-1": want a whole number (line 1)`},
		{name: "-.inf into an integer", give: "i64: -.inf\n", wantErr: `i64: "-.inf": want a finite number (line 1)`},
		{name: ".nan into a float", give: "f64: .NaN\n", wantErr: `f64: ".NaN": want a finite number (line 1)`},
		{name: ".inf into a float", give: "f64: .inf\n", wantErr: `f64: ".inf": want a finite number (line 1)`},
		{name: "hex", give: "i64: 0x10\n", wantErr: `i64: "0x10": write numbers in plain decimal or exponent notation (e.g. 1000, 2.5, 1e3) (line 1)`},
		{name: "underscores", give: "u32: 1_000\n", wantErr: `u32: "1_000": write numbers in plain decimal or exponent notation (e.g. 1000, 2.5, 1e3) (line 1)`},
		{name: "octal", give: "f64: 0o17\n", wantErr: `f64: "0o17": write numbers in plain decimal or exponent notation (e.g. 1000, 2.5, 1e3) (line 1)`},
		{name: "int64 overflow", give: "i64: 9223372036854775808\n", wantErr: `i64: "9223372036854775808": out of range [-9223372036854775808, 9223372036854775807] (line 1)`},
		{name: "int8 overflow is not wrapped", give: "i8: 200\n", wantErr: `i8: "200": out of range [-128, 127] (line 1)`},
		{name: "huge exponent", give: "i64: 1e999999999999\n", wantErr: `i64: "1e999999999999": out of range [-9223372036854775808, 9223372036854775807] (line 1)`},
		{name: "negative unsigned", give: "u32: -1\n", wantErr: `u32: "-1": out of range [0, 4294967295] (line 1)`},
		{name: "float64 overflow", give: "f64: 1e400\n", wantErr: `f64: "1e400": out of range [-1.7976931348623157e+308, 1.7976931348623157e+308] (line 1)`},
		{name: "float32 overflow", give: "f32: -1e39\n", wantErr: `f32: "-1e39": out of range [-3.4028234663852886e+38, 3.4028234663852886e+38] (line 1)`},
		{name: "quoted number stays a string", give: "i64: \"5\"\n", wantErr: `i64: "5": want an integer (line 1)`},
		{name: "every bad field reported", give: "i64: .5\ni8: -.inf\n", wantErr: "i64: \".5\": want a whole number (line 1)\ni8: \"-.inf\": want a finite number (line 2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got numbers
			err := Unmarshal([]byte(tt.give), &got)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tt.wantErr {
				t.Fatalf("error = %q, want %q", gotErr, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decoded (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNumbersNotNumberFields: where the target is not a number field a YAML number keeps its
// value (.5 is 0.5 for a resource.Quantity and an interface), and a form nobody writes for a
// value (0x1F, -.inf) stays its text, never a converted or saturated figure.
func TestNumbersNotNumberFields(t *testing.T) {
	var got struct {
		Q   resource.Quantity `json:"q"`
		Any map[string]any    `json:"any"`
	}
	if err := Unmarshal([]byte("q: .5\nany: {a: .5, b: 0x1F, c: -.inf, d: 12}\n"), &got); err != nil {
		t.Fatal(err)
	}
	if got.Q.String() != "500m" {
		t.Errorf("q = %s, want 500m", got.Q.String())
	}
	want := map[string]any{"a": 0.5, "b": "0x1F", "c": "-.inf", "d": 12.0}
	if diff := cmp.Diff(want, got.Any); diff != "" {
		t.Errorf("any (-want +got):\n%s", diff)
	}
	var q struct {
		Q resource.Quantity `json:"q"`
	}
	if err := Unmarshal([]byte("q: -.inf\n"), &q); err == nil {
		t.Errorf("q: -.inf decoded as %s, want an error", q.Q.String())
	}
}
