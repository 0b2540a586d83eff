package plan_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/inferscale/inferscale/residency/plan"
	"github.com/inferscale/inferscale/residency/plan/plantest"
)

func TestAdmit(t *testing.T) {
	const gib = 1 << 30
	base := plan.Model{Name: "m", Digest: plantest.DigestA, Tier: plan.TierP1,
		PeakMemoryBytes: map[string]int64{"2g.20gb": 2 * gib}, LoadTime: plan.DefaultLoadTime}
	rec := plan.Admission{Record: "records/m.1g.10gb.yaml", Model: "m", Digest: plantest.DigestA, Profile: "1g.10gb", Allowed: true,
		PeakBytes: 1100 << 20, SwapOverheadBytes: 1000 << 20, LoadTime: 3200 * time.Millisecond}
	with := func(f func(*plan.Model)) plan.Model {
		m := base
		m.PeakMemoryBytes = map[string]int64{"2g.20gb": 2 * gib}
		f(&m)
		return m
	}
	tests := []struct {
		name    string
		m       plan.Model
		typed   plan.Typed
		a       plan.Admission
		want    plan.Model
		wantErr []string
	}{
		{name: "record fills peak, swap and load time", m: base, a: rec,
			want: with(func(m *plan.Model) {
				m.PeakMemoryBytes["1g.10gb"] = 1100 << 20
				m.SwapOverheadBytes, m.LoadTime = 1000<<20, 3200*time.Millisecond
			})},
		{name: "equal hand-typed values agree", typed: plan.Typed{Peak: true, LoadTime: true},
			m: with(func(m *plan.Model) { m.PeakMemoryBytes["1g.10gb"] = 1100 << 20; m.LoadTime = 3200 * time.Millisecond }), a: rec,
			want: with(func(m *plan.Model) {
				m.PeakMemoryBytes["1g.10gb"] = 1100 << 20
				m.SwapOverheadBytes, m.LoadTime = 1000<<20, 3200*time.Millisecond
			})},
		{name: "conflicts name both", typed: plan.Typed{Peak: true, SwapOverhead: true, LoadTime: true},
			m: with(func(m *plan.Model) {
				m.PeakMemoryBytes["1g.10gb"] = gib
				m.SwapOverheadBytes = gib
				m.LoadTime = 3 * time.Second
			}), a: rec,
			wantErr: []string{
				`models[4].peakMemoryBytes["1g.10gb"]: 1073741824 typed, record records/m.1g.10gb.yaml measured 1153433600`,
				`models[4].swapOverheadBytes: 1073741824 typed, record records/m.1g.10gb.yaml measured 1048576000`,
				`models[4].loadTime: 3s typed, record records/m.1g.10gb.yaml measured 3.2s`,
			}},
		// A --skip-memory record (memorySource none) has peak, swap peak and load time 0 for
		// unknown: admitted, they made the model take no memory (the catalog then refused
		// "peakMemoryBytes: 0 out of range", or a typed peak "1073741824 typed, record measured 0").
		{name: "unmeasured memory keeps the typed peak", typed: plan.Typed{Peak: true, LoadTime: true},
			m:    with(func(m *plan.Model) { m.PeakMemoryBytes["1g.10gb"] = gib; m.LoadTime = 3 * time.Second }),
			a:    plan.Admission{Record: "r.yaml", Model: "m", Digest: plantest.DigestA, Profile: "1g.10gb", Allowed: true, MemoryUnmeasured: true},
			want: with(func(m *plan.Model) { m.PeakMemoryBytes["1g.10gb"] = gib; m.LoadTime = 3 * time.Second })},
		{name: "unmeasured memory without a typed peak", m: base,
			a:       plan.Admission{Record: "r.yaml", Model: "m", Digest: plantest.DigestA, Profile: "1g.10gb", Allowed: true, MemoryUnmeasured: true},
			wantErr: []string{`models[4].record: r.yaml measured no memory (memorySource none: cmd/capacity --skip-memory or an OpenAI-compatible server), so it gives no peak for profile 1g.10gb; measure it again without --skip-memory, or type peakMemoryBytes["1g.10gb"]`}},
		{name: "another model, digest, refused", m: base,
			a: plan.Admission{Record: "r.yaml", Model: "n", Digest: plantest.DigestB, Profile: "1g.10gb"},
			wantErr: []string{`models[4].record: r.yaml is the record of model "n", not "m"`,
				"models[4].digest: " + plantest.DigestA + " differs from record r.yaml's digest " + plantest.DigestB,
				"models[4].record: r.yaml refuses the model on profile 1g.10gb"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.m.Admit("models[4]", tt.typed, tt.a)
			if len(tt.wantErr) > 0 {
				for _, w := range tt.wantErr {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Errorf("err = %v, want it to contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("model (-want +got):\n%s", diff)
			}
		})
	}
}
