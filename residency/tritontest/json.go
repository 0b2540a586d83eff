package tritontest

import "encoding/json"

// jsonValid reports whether s is a JSON object, as Triton's config override
// must be.
func jsonValid(s string) bool {
	var v map[string]any
	return json.Unmarshal([]byte(s), &v) == nil
}
