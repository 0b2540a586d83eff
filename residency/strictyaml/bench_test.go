package strictyaml

import (
	"os"
	"testing"

	"sigs.k8s.io/yaml"
)

// BenchmarkUnmarshalCatalog decodes the example catalog with this package and, as the
// baseline in the same run, with sigs.k8s.io/yaml.UnmarshalStrict (the decoder it replaced).
func BenchmarkUnmarshalCatalog(b *testing.B) {
	data, err := os.ReadFile("../../cmd/residency/example-catalog.yaml")
	if err != nil {
		b.Fatal(err)
	}
	type catalog struct {
		ReserveBytes string `json:"reserveBytes"`
		IdleTimeout  string `json:"idleTimeout"`
		MinResidency string `json:"minResidency"`
		Models       []struct {
			Name              string            `json:"name"`
			Digest            string            `json:"digest"`
			Tier              string            `json:"tier"`
			PeakMemoryBytes   map[string]string `json:"peakMemoryBytes"`
			SwapOverheadBytes string            `json:"swapOverheadBytes"`
			LoadTime          string            `json:"loadTime"`
		} `json:"models"`
	}
	b.Run("strictyaml", func(b *testing.B) {
		for b.Loop() {
			var c catalog
			if err := Unmarshal(data, &c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("baseline=sigs.k8s.io-yaml", func(b *testing.B) {
		for b.Loop() {
			var c catalog
			if err := yaml.UnmarshalStrict(data, &c); err != nil {
				b.Fatal(err)
			}
		}
	})
}
