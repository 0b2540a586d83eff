package kube_test

import (
	"strings"
	"testing"
	"time"

	"github.com/inferscale/inferscale/scaler"
	"github.com/inferscale/inferscale/scaler/kube"
)

// TestMaxColdStartIsTheKeysBound: the longest measured start taken as a sample is the upper
// end of the coldStart metadata key's range, so a measured H is always a value the key accepts.
func TestMaxColdStartIsTheKeysBound(t *testing.T) {
	parse := func(d time.Duration) error {
		_, err := scaler.ParseMetadata(map[string]string{"engine": "vllm", "model": "llama", scaler.KeyColdStart: d.String()}, scaler.Defaults{PrometheusAddress: "http://127.0.0.1:9090"})
		return err
	}
	if err := parse(kube.MaxColdStart); err != nil {
		t.Errorf("coldStart %v (MaxColdStart) refused: %v", kube.MaxColdStart, err)
	}
	if err := parse(kube.MaxColdStart + time.Nanosecond); err == nil || !strings.Contains(err.Error(), "coldStart must be a duration in (0s, 1h]") {
		t.Errorf("coldStart %v (past MaxColdStart) = %v, want refused naming coldStart", kube.MaxColdStart+time.Nanosecond, err)
	}
}
