package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/inferscale/inferscale/internal/promtest"
	"github.com/inferscale/inferscale/ledger"
	"github.com/inferscale/inferscale/ledger/peak"
	"github.com/prometheus/common/model"
)

const testdata = "../../ledger/specfile/testdata/"

func TestExitCodes(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		out  string // substring of stdout
		err  string // substring of stderr
	}{
		{"source case passes", []string{"--spec=" + testdata + "source-case.yaml"}, 0, "**PASS — every check holds**", ""},
		{"eight whole nodes fail N+1 today", []string{"--spec=" + testdata + "eight-whole.yaml"}, 1, "5 of 8 nodes can stop billing, saving $13395.50 per month", ""},
		{"invalid layouts", []string{"--spec=" + testdata + "invalid-layouts.yaml"}, 1, "compute slices: the layout needs 8, A100-SXM4-80GB has 7", ""},
		{"P0 on one node", []string{"--spec=" + testdata + "p0-one-node.yaml"}, 1, "N+1: losing gpu-a leaves 0 × 40 = 0 RPS < peak 60", ""},
		{"bad flag", []string{"--spec=x", "--format=xml"}, 2, "", `--format "xml": want markdown or json`},
		{"no spec", nil, 2, "", "--spec: required"},
		{"prometheus without live", []string{"--spec=x", "--prometheus-address=http://127.0.0.1:9090"}, 2, "", "--prometheus-address: needs --live"},
		{"bad window", []string{"--spec=x", "--peak-window=10s"}, 2, "", "--peak-window 10s: want [1m, 2160h]"},
		{"missing file", []string{"--spec=/nonexistent.yaml"}, 2, "", "no such file"},
		// Live-only flags were accepted and ignored offline (--node-selector=!!! gave exit 0).
		{"node selector without live", []string{"--spec=" + testdata + "source-case.yaml", "--node-selector=!!!"}, 2, "", "--node-selector: needs --live"},
		{"empty failure-domain label without live", []string{"--spec=" + testdata + "source-case.yaml", "--failure-domain-label="}, 2, "", "--failure-domain-label: needs --live"},
		{"kubeconfig without live", []string{"--spec=" + testdata + "source-case.yaml", "--kubeconfig=/tmp/k"}, 2, "", "--kubeconfig: needs --live"},
		{"peak step without live", []string{"--spec=" + testdata + "source-case.yaml", "--peak-step=2m"}, 2, "", "--peak-step: needs --live"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(tt.args, &out, &errb)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr %s", code, tt.code, errb.String())
			}
			if !strings.Contains(out.String(), tt.out) {
				t.Errorf("stdout lacks %q:\n%s", tt.out, out.String())
			}
			if !strings.Contains(errb.String(), tt.err) {
				t.Errorf("stderr %q lacks %q", errb.String(), tt.err)
			}
		})
	}
}

func TestBadInputNamesFieldAndLine(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "spec.yaml")
	body := "nodes:\n  - name: a\n    gpus:\n      - product: A100-SXM4-80GB\n        mig: [3g.40gb]\nservices:\n  - name: chat\n    tier: P1\n    profile: 3g.40gb\n    peakRPS: 24\n    safeRPSPerReplica: -12\n"
	if err := os.WriteFile(spec, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"--spec=" + spec}, &out, &errb); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	if want := spec + ":11: services[0].safeRPSPerReplica: -12 is outside (0, 1e+09], required for P1 (or record: an admission record)\n"; errb.String() != "ledger: "+want {
		t.Errorf("stderr %q, want %q (one error)", errb.String(), "ledger: "+want)
	}
}

// TestJSONSchema checks the documented --format=json keys, exactly, and
// the source case's numbers.
func TestJSONSchema(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"--spec=" + testdata + "source-case.yaml", "--format=json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var doc map[string]any
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]any) []string {
		var k []string
		for key := range m {
			k = append(k, key)
		}
		sort.Strings(k)
		return k
	}
	if d := cmp.Diff([]string{"layouts", "ok", "release", "services"}, keys(doc)); d != "" {
		t.Errorf("top-level keys (-want +got):\n%s", d)
	}
	want := map[string][]string{
		"services": {"capacityAfterWorstLossRPS", "capacityRPS", "name", "peakRPS", "profile", "tier", "verdict", "worstLoss"},
		"layouts":  {"gpu", "node", "reason", "valid"},
		"release":  {"node", "reason", "release", "savingsPerMonth"},
	}
	for arr, wantKeys := range want {
		items, _ := doc[arr].([]any)
		if len(items) == 0 {
			t.Fatalf("%s is empty", arr)
		}
		for i, it := range items {
			if d := cmp.Diff(wantKeys, keys(it.(map[string]any))); d != "" {
				t.Errorf("%s[%d] keys (-want +got):\n%s", arr, i, d)
			}
		}
	}
	var typed struct {
		OK       bool `json:"ok"`
		Services []struct {
			Name      string  `json:"name"`
			AfterLoss float64 `json:"capacityAfterWorstLossRPS"`
			Verdict   string  `json:"verdict"`
		} `json:"services"`
	}
	if err := json.Unmarshal(out.Bytes(), &typed); err != nil {
		t.Fatal(err)
	}
	var got []float64
	for _, s := range typed.Services[:4] {
		got = append(got, s.AfterLoss)
	}
	if !typed.OK || cmp.Diff([]float64{80, 30, 70, 24}, got) != "" || typed.Services[4].Verdict != "exempt" {
		t.Errorf("ok %v, after loss %v, P2 verdict %s; want true, [80 30 70 24], exempt", typed.OK, got, typed.Services[4].Verdict)
	}
}

func TestMigConfigOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mig.yaml")
	var out, errb bytes.Buffer
	run([]string{"--spec=" + testdata + "eight-whole.yaml", "--mig-config-out=" + path, "--audit=heuristic"}, &out, &errb)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "version: v1\nmig-configs:\n") || strings.Count(string(data), "ledger-team-") != 3 {
		t.Errorf("mig-parted config:\n%s", data)
	}
}

// TestReadPeaks reads a service's peak from a real Prometheus through the
// ScaledObject of the same name; a service without one keeps its spec peak.
func TestReadPeaks(t *testing.T) {
	exp := promtest.NewExporter(t)
	srv := promtest.Start(t, exp.Target())
	exp.Gauge("ledger_cmd_rps", "namespace").WithLabelValues("ml").Set(31)
	// A few scrapes, so that the subquery's aligned steps see a sample.
	srv.WaitFor(t, `count_over_time(ledger_cmd_rps{namespace="ml"}[1m])`, func(v model.Vector) bool { return len(v) == 1 && v[0].Value >= 3 }, 30*time.Second)
	c := Config{PrometheusAddress: srv.URL(), PeakWindow: time.Minute, PeakStep: time.Second, Timeout: 10 * time.Second}
	services := []ledger.Service{{Name: "chat", PeakRPS: 24}, {Name: "asr", PeakRPS: 50}}
	notes, err := readPeaks(c, services, []peak.Source{{Namespace: "ml", ScaledObject: "chat", RateQuery: "ledger_cmd_rps"}})
	if err != nil {
		t.Fatal(err)
	}
	if services[0].PeakRPS != 31 || services[1].PeakRPS != 50 {
		t.Errorf("peaks %v and %v, want 31 (Prometheus) and 50 (spec)", services[0].PeakRPS, services[1].PeakRPS)
	}
	want := []ledger.PeakNote{
		{Service: "chat", Source: "ml/chat", Query: `max_over_time(((sum((ledger_cmd_rps{namespace="ml"})) unless on () ((ledger_cmd_rps{namespace="ml"}) < 0)) < +Inf)[1m:1s])`, PeakRPS: 31},
		{Service: "asr", Err: "no ScaledObject named asr with a rate source"},
	}
	if d := cmp.Diff(want, notes); d != "" {
		t.Errorf("notes (-want +got):\n%s", d)
	}
}
