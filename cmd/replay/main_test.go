package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunRejectsBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"slots", []string{"--slots=0"}, "slots = 0: want 1..1024"},
		{"cold start", []string{"--cold-start=soon"}, `cold-start "soon"`},
		{"policy", []string{"--policies=magic"}, `policy "magic"`},
		// Flags that did nothing.
		{"rate scale on the Azure trace", []string{"--rate-scale=2"}, "rate-scale: applies to servegen traces (binned mode) only; this trace is azure-llm"},
		{"tune flags without tune", []string{"--traces=/x"}, "--traces and --write apply to replay tune only"},
		// Each of its rows was printed twice.
		{"policy twice", []string{"--policies=static,inferscale,static"}, `policies: "static" is listed twice; list each family once`},
		{"format", []string{"--format=parquet"}, `format "parquet"`},
		// Kept no model and replayed every model as one pool, without a word.
		{"model only a comma", []string{"--model=,"}, `model "," (--model): an empty model name; want comma-separated model names, or no --model to replay every model as one pool`},
		{"model empty", []string{"--model="}, `model "" (--model): an empty model name`},
		{"model with an empty name", []string{"--model=m-large,,m-small"}, `model "m-large,,m-small" (--model): an empty model name`},
		{"decode", []string{"--decode-tps=0"}, "decode-tps 0: want a finite rate of at least 1/3600 tokens per second"},
		// +Inf passed "> 0" and replayed with free prefill.
		{"prefill infinite", []string{"--prefill-tps=Inf"}, "prefill-tps +Inf: want a finite rate of at least 1/3600 tokens per second"},
		{"prefill NaN", []string{"--prefill-tps=NaN"}, "prefill-tps NaN: want a finite rate"},
		// Reported as "service model PerOutputTokenS = 1e+300", no flag name.
		{"decode tiny", []string{"--decode-tps=1e-300"}, "decode-tps 1e-300: want a finite rate"},
		// Also reported "BaseS, PerInputTokenS and PerOutputTokenS are all 0", which they were not.
		{"base negative", []string{"--base-service=-1s"}, "base-service -1s: want 0..1h"},
		{"base past an hour", []string{"--base-service=2h"}, "base-service 2h0m0s: want 0..1h"},
		{"stray argument", []string{"trace.csv"}, "unexpected arguments"},
		// Read without end before: out of memory.
		{"endless settings", []string{"--settings=/dev/zero"}, "settings /dev/zero: larger than 1048576 bytes (1 MiB)"},
		// More flags that did nothing.
		{"format on the embedded trace", []string{"--format=servegen"}, `format "servegen" (--format): the embedded trace is azure-llm; a format applies to a trace file (--trace)`},
		{"dlrm format on the embedded trace", []string{"--format=dlrm-instances"}, `format "dlrm-instances" (--format): the embedded trace is azure-llm`},
		{"residency budget with residency off", []string{"--residency-budget-models=5", "--residency=false"}, "residency budget 5 models (--residency-budget-models): the residency replay is off (--residency=false); drop one"},
		{"residency budget on a single-model trace", []string{"--residency-budget-models=5"}, "residency budget 5 models (--residency-budget-models): the residency replay runs on multi-model traces only, and AzureLLMInferenceTrace_code.csv (embedded; Patel et al., Splitwise, ISCA 2024, CC BY 4.0) has 1 model"},
		{"tune with one trace's flags", []string{"tune", "--trace=x.csv", "--policies=static"}, "--out, --policies, --trace: not used by replay tune, which replays every policy family on each shared trace under --traces"},
		// tune logs a line per trace and draws no bar.
		{"tune with a progress bar", []string{"tune", "--progress=false"}, "--out, --progress: not used by replay tune"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(append(tt.args, "--out", t.TempDir()))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("run(%q) = %v, want an error containing %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestRunEmbeddedTrace(t *testing.T) {
	dir := t.TempDir()
	if err := run([]string{"--out", dir, "--policies=inferscale,static", "--progress=false"}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"table.md", "timeseries.csv", "report.html", "summary.json"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestHelpIsNotAnError(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		if err := run([]string{arg}); err != nil {
			t.Errorf("run(%q) = %v, want nil (usage printed, exit 0)", arg, err)
		}
	}
}

// TestRunUnseenGenericTrace: a trace outside the shared set, in the
// generic format, replays with the committed settings and writes
// summary.json with the bound and optimum rows.
func TestRunUnseenGenericTrace(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("timestamp,input_tokens,output_tokens\n")
	for i := range 600 {
		fmt.Fprintf(&b, "%d.5,%d,%d\n", i, 500+i%7*100, 50+i%5*20)
	}
	trace := filepath.Join(dir, "mine.csv")
	if err := os.WriteFile(trace, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := run([]string{"--trace", trace, "--out", out, "--progress=false", "--hindsight=false"}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"settingSet": "published"`, `"settingSet": "tuned"`, `"settingSet": "optimum"`, `"settingSet": "bound"`, `"requests": 600`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("summary.json lacks %s", want)
		}
	}
}

// TestTuneRejectsMissingTraces: tune names the trace it could not read.
func TestTuneRejectsMissingTraces(t *testing.T) {
	err := run([]string{"tune", "--traces", t.TempDir(), "--write", filepath.Join(t.TempDir(), "s.yaml")})
	if err == nil || !strings.Contains(err.Error(), "tune azure-llm-code") {
		t.Errorf("tune over an empty folder: %v, want an error naming azure-llm-code", err)
	}
}

// TestRunRefusesUnwritableOutFirst: an --out below a file is refused before the replay runs
// (it was found after the whole run), and nothing is created.
func TestRunRefusesUnwritableOutFirst(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(file, "out")
	err := run([]string{"--out", out, "--progress=false"})
	if want := fmt.Sprintf("out %q: %s is not a folder", out, file); err == nil || err.Error() != want {
		t.Errorf("run = %v, want %q", err, want)
	}
	if err := run([]string{"--out", filepath.Join(dir, "new", "deeper"), "--policies=static", "--progress=false", "--optimum=false", "--hindsight=false"}); err != nil {
		t.Errorf("a new folder below a writable one: %v", err)
	}
}

// TestTuneRefusesUnwritableWriteFirst: --write is checked before the sweep (it was found
// after it, 18 minutes on the shared machine).
func TestTuneRefusesUnwritableWriteFirst(t *testing.T) {
	dir := t.TempDir()
	if err := run([]string{"tune", "--traces", dir, "--write", dir}); err == nil || err.Error() != fmt.Sprintf("write %q: is a folder; want the settings file to write", dir) {
		t.Errorf("--write=<folder>: %v", err)
	}
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w := filepath.Join(file, "settings.yaml")
	if err := run([]string{"tune", "--traces", dir, "--write", w}); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("write %q: %s is not a folder", file, file)) {
		t.Errorf("--write below a file: %v", err)
	}
}

func TestTraceFormat(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sg.csv")
	if err := os.WriteFile(p, []byte("category,model,client_id,window_start_s,window_len_s,rate_rps,iat_cv,arrival_dist,dist_p1,dist_p2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ trace, format, want string }{
		{p, "", "servegen"},
		{"", "servegen", "servegen"},
		{"", "", "azure-llm"},
	} {
		if f, err := traceFormat(c.trace, c.format); err != nil || string(f) != c.want {
			t.Errorf("traceFormat(%q, %q) = %q, %v; want %q", c.trace, c.format, f, err, c.want)
		}
	}
}

// TestEmptyTraceWithPoolFlags: a zero-byte trace is "file is empty" with a pool flag too (the
// format check before the run had said "unknown trace format").
func TestEmptyTraceWithPoolFlags(t *testing.T) {
	p := filepath.Join(t.TempDir(), "empty.csv")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--trace", p}, {"--trace", p, "--policies=static"}} {
		err := run(append(args, "--out", t.TempDir()))
		if want := p + ": file is empty"; err == nil || err.Error() != want {
			t.Errorf("run(%q) = %v, want %q", args, err, want)
		}
	}
}

// TestInstancesTraceRefusesUnreadFlags: on the DLRM instance trace, which is reported whole,
// --policies, --slo and the pool's flags did nothing; they are refused, by name.
func TestInstancesTraceRefusesUnreadFlags(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "dlrm.csv")
	if err := os.WriteFile(trace, []byte("instance_sn,role,app_name,gpu_request,creation_time,deletion_time\ni0,HN,app_0,1,0,3600\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	err := run([]string{"--trace", trace, "--policies=static", "--slo=1s", "--progress=false", "--out", out})
	want := `--policies, --progress, --slo: not used on a dlrm-instances trace, which has no requests and is reported whole as its recorded replica trajectories (docs/replay.md, "Alibaba DLRM 2025 instances"); it reads only --trace, --format and --out`
	if err == nil || err.Error() != want {
		t.Errorf("run = %v, want %q", err, want)
	}
	if _, statErr := os.Stat(out); !os.IsNotExist(statErr) {
		t.Errorf("out folder %s exists after a refused run (stat: %v)", out, statErr)
	}
}

// TestModelOnInstancesTrace: --model on the DLRM instance trace was ignored
// (Prepare returned before filtering).
func TestModelOnInstancesTrace(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "dlrm.csv")
	if err := os.WriteFile(trace, []byte("instance_sn,role,app_name,gpu_request,creation_time,deletion_time\ni0,HN,app_0,1,,\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := run([]string{"--trace", trace, "--model=zzz", "--out", filepath.Join(dir, "out")})
	if want := "model zzz (--model): dlrm.csv is a dlrm-instances trace, with services (app_name) and no request models; it is reported whole"; err == nil || err.Error() != want {
		t.Errorf("run = %v, want %q", err, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
		t.Error("--out was created by a refused run")
	}
}

// TestUsageNamesSubcommands: replay --help lists tune and retry with a line
// each; tune --help and retry --help print their own usage (tune printed
// the replay's), and tune's lists only the flags it reads.
func TestUsageNamesSubcommands(t *testing.T) {
	tests := []struct {
		args          []string
		want, notWant []string
	}{
		{[]string{"--help"}, []string{"Usage:\n  replay [flags]", "\n  replay tune [flags]    sweep each policy family's one setting", "\n  replay retry [flags]   a synthetic burst", "Flags of replay:\n", "-trace string"}, []string{"-traces string", "-write string"}},
		{[]string{"tune", "--help"}, []string{"Usage:\n  replay tune [flags]    sweep", "Flags of replay tune", "-traces string", "-write string", "-slots int"}, []string{"replay retry", "-trace string", "-out string", "-policies", "-hindsight"}},
		{[]string{"retry", "--help"}, []string{"Usage:\n  replay retry [flags]   replay a synthetic burst", "Flags of replay retry:\n", "-layers int"}, []string{"replay tune", "-trace string"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var b strings.Builder
			if err := runIO(tt.args, &b); err != nil {
				t.Fatalf("runIO = %v, want nil", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("usage lacks %q:\n%s", w, b.String())
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(b.String(), w) {
					t.Errorf("usage has %q:\n%s", w, b.String())
				}
			}
		})
	}
}
