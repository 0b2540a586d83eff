package ledger

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Names reach Markdown tables, a mig-parted YAML file and a node label, so a
// spec with a name Kubernetes could not hold is bad input, not a report
// whose tables break ("x|y", a newline) or whose label the API server refuses.
func TestValidateRejectsNamesKubernetesCannotHold(t *testing.T) {
	gpu := []GPU{{Product: "A100-SXM4-80GB"}}
	cases := []struct {
		spec Spec
		path string
	}{
		{Spec{Nodes: []Node{{Name: "n|2", GPUs: gpu}}}, "nodes[0].name"},
		{Spec{Nodes: []Node{{Name: "a\n  evil: [x]", GPUs: gpu}}}, "nodes[0].name"},
		{Spec{Nodes: []Node{{Name: strings.Repeat("a", 254), GPUs: gpu}}}, "nodes[0].name"},
		{Spec{Nodes: []Node{{Name: "a", FailureDomain: "rack 1|x", GPUs: gpu}}}, "nodes[0].failureDomain"},
		{Spec{Services: []Service{{Name: "x|y\n# injected", Tier: P2, Profile: "1g.10gb"}}}, "services[0].name"},
		{Spec{Services: []Service{{Name: "Chat", Tier: P2, Profile: "1g.10gb"}}}, "services[0].name"},
	}
	for _, c := range cases {
		errs := c.spec.Validate()
		found := false
		for _, e := range errs {
			if e.Path == c.path {
				found = true
			}
		}
		if !found {
			t.Errorf("%+v: want an error at %s, got %v", c.spec, c.path, errs)
		}
	}
	ok := Spec{
		Nodes:    []Node{{Name: "ip-10-0-1-23.us-west-2.compute.internal", FailureDomain: "us-west-2a", GPUs: gpu}},
		Services: []Service{{Name: "embedding-v3", Tier: P2, Profile: "1g.10gb"}},
	}
	if errs := ok.Validate(); errs != nil {
		t.Errorf("valid names refused: %v", errs)
	}
}

// The mig-parted config name is also the value of the node label
// nvidia.com/mig.config, at most 63 characters; a long (valid) node name
// must still give a valid, distinct label value.
func TestMigConfigNameIsALabelValue(t *testing.T) {
	long := strings.Repeat("a", 60) + ".example.com"
	long2 := strings.Repeat("a", 60) + ".example.org"
	for _, n := range []string{"team-1", long, long2, strings.Repeat("b", 253)} {
		v := MigConfigName(n)
		if errs := validation.IsValidLabelValue(v); errs != nil {
			t.Errorf("MigConfigName(%q) = %q: %v", n, v, errs)
		}
	}
	if got := MigConfigName("team-1"); got != "ledger-team-1" {
		t.Errorf("MigConfigName(team-1) = %q, want ledger-team-1", got)
	}
	if MigConfigName(long) == MigConfigName(long2) {
		t.Errorf("two node names share the config name %q", MigConfigName(long))
	}
	cfg := MigPartedConfig(Spec{Nodes: []Node{{Name: long, GPUs: []GPU{{Product: "A100-SXM4-80GB"}}}}})
	if !strings.Contains(cfg, "\""+MigConfigName(long)+"\":") {
		t.Errorf("config does not use MigConfigName:\n%s", cfg)
	}
}
