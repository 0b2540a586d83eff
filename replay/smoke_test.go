package replay

import (
	"os"
	"testing"
)

func TestSmokeDemo(t *testing.T) {
	tr, err := DemoTrace()
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultPoolConfig()
	c, err := Compare(cfg, Workloads{Name: "demo", Requests: NewWorkload(tr, cfg.Service)}, Families(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c.WriteTable(os.Stdout)
	for _, r := range c.All {
		t.Logf("%s %s gpuh=%.2f slo=%.4f", r.Policy, r.Setting, r.GPUHours(1), r.Attainment())
	}
}
