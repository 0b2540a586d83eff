package replay

import (
	"math"
	"testing"
)

// TestServiceModelValidate: each bad field is its own error with its range;
// "all 0" only when all three are 0 (a negative BaseS reported it too).
func TestServiceModelValidate(t *testing.T) {
	with := func(f func(*ServiceModel)) ServiceModel {
		m := DefaultServiceModel()
		f(&m)
		return m
	}
	tests := []struct {
		name string
		give ServiceModel
		want string
	}{
		{"negative base", with(func(m *ServiceModel) { m.BaseS, m.PerInputTokenS, m.PerOutputTokenS = -1, 0, 0 }),
			"service model BaseS = -1: want a number of seconds in [0, 3600]"},
		{"all 0", with(func(m *ServiceModel) { m.BaseS, m.PerInputTokenS, m.PerOutputTokenS = 0, 0, 0 }),
			"service model: BaseS, PerInputTokenS and PerOutputTokenS are all 0; want at least one > 0 (a positive service time)"},
		{"NaN and past an hour", with(func(m *ServiceModel) { m.PerInputTokenS, m.PerOutputTokenS = math.NaN(), 3601 }),
			"service model PerInputTokenS = NaN: want a number of seconds in [0, 3600]\nservice model PerOutputTokenS = 3601: want a number of seconds in [0, 3600]"},
		{"negative token defaults", with(func(m *ServiceModel) { m.DefaultInputTokens, m.DefaultOutputTokens = -1, -2 }),
			"service model DefaultInputTokens = -1: want a token count ≥ 0\nservice model DefaultOutputTokens = -2: want a token count ≥ 0"},
		{"negative output default only", with(func(m *ServiceModel) { m.DefaultOutputTokens = -5 }),
			"service model DefaultOutputTokens = -5: want a token count ≥ 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.give.Validate(); err == nil || err.Error() != tt.want {
				t.Errorf("Validate() = %v, want %q", err, tt.want)
			}
		})
	}
	if err := DefaultServiceModel().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}
