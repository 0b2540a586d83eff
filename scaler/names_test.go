package scaler

import (
	"regexp"
	"strings"
	"testing"
)

var validName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

func TestMetricName(t *testing.T) {
	meta := map[string]string{"engine": "triton", "model": "resnet50"}
	tests := []struct {
		name       string
		a, b       [2]string
		ma, mb     map[string]string
		wantSame   bool
		wantPrefix string
	}{
		{"same object same trigger", [2]string{"team-a", "pool"}, [2]string{"team-a", "pool"}, meta, map[string]string{"model": "resnet50", "engine": "triton"}, true, "team-a-pool-"},
		{"two namespaces", [2]string{"team-a", "pool"}, [2]string{"team-b", "pool"}, meta, meta, false, "team-a-pool-"},
		{"field boundary", [2]string{"a-b", "c"}, [2]string{"a", "b-c"}, meta, meta, false, "a-b-c-"},
		{"two triggers", [2]string{"team-a", "pool"}, [2]string{"team-a", "pool"}, meta, map[string]string{"engine": "triton", "model": "bert"}, false, "team-a-pool-"},
		{"key/value boundary", [2]string{"n", "p"}, [2]string{"n", "p"}, map[string]string{"ab": "c"}, map[string]string{"a": "bc"}, false, "n-p-"},
		{"odd characters", [2]string{"Team.A", "GPU_Pool:x"}, [2]string{"team-a", "gpu-pool-x"}, nil, nil, false, "team-a-gpu-pool-x-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			na := MetricName(tt.a[0], tt.a[1], tt.ma)
			nb := MetricName(tt.b[0], tt.b[1], tt.mb)
			if (na == nb) != tt.wantSame {
				t.Errorf("MetricName %q vs %q: same=%v, want %v", na, nb, na == nb, tt.wantSame)
			}
			if !strings.HasPrefix(na, tt.wantPrefix) || !validName.MatchString(na) || len(na) > 56 {
				t.Errorf("MetricName = %q, want prefix %q, [a-z0-9-], ≤ 56 bytes", na, tt.wantPrefix)
			}
		})
	}
}

func TestMetricNameLong(t *testing.T) {
	long := strings.Repeat("x", 253)
	a := MetricName(long, long+"a", nil)
	b := MetricName(long, long+"b", nil)
	if a == b || len(a) != 56 || !validName.MatchString(a) {
		t.Fatalf("long names %q %q: want distinct, 56 bytes, valid", a, b)
	}
	if n := MetricName("", "", nil); !validName.MatchString(n) {
		t.Fatalf("empty inputs give %q", n)
	}
}

func FuzzMetricName(f *testing.F) {
	f.Add("team-a", "pool", "model", "m")
	f.Add("-", "_", "", "")
	f.Fuzz(func(t *testing.T, ns, name, k, v string) {
		n := MetricName(ns, name, map[string]string{k: v})
		if len(n) > 56 || !validName.MatchString(n) {
			t.Fatalf("MetricName(%q, %q) = %q", ns, name, n)
		}
	})
}
