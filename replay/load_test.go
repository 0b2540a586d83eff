package replay

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLoadBadFilesNameTheFile: a binary file, a header-only CSV and an empty
// file each give a short error naming the file and what is wrong with it.
func TestLoadBadFilesNameTheFile(t *testing.T) {
	dir := t.TempDir()
	binary := make([]byte, 11<<10)
	for i := range binary {
		if binary[i] = byte(i * 7); binary[i] == '\n' { // NULs and invalid UTF-8, one 11 KB line
			binary[i] = 0
		}
	}
	tests := []struct {
		name    string
		data    []byte
		wantErr error
		want    []string
	}{
		{"image.bin", binary, ErrUnknownFormat, []string{"image.bin", "not a recognised CSV trace", "binary", `"\x00\a\x0e`, "…"}},
		{"notes.csv", []byte(strings.Repeat("word ", 100) + "\n1,2\n"), ErrUnknownFormat, []string{"notes.csv", "not a recognised CSV trace", `"word word`, "…"}},
		{"header.csv", []byte("TIMESTAMP,ContextTokens,GeneratedTokens\n"), ErrEmptyTrace, []string{"header.csv", "trace has no requests", "header and no rows"}},
		{"empty.csv", nil, ErrEmptyFile, []string{"empty.csv", "file is empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeFile(t, dir, tt.name, tt.data)
			_, err := Load(p, "", 1)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Load = %v, want %v", err, tt.wantErr)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if n := len(err.Error()); n > 400 {
				t.Errorf("error is %d bytes, want a short one: %.200q", n, err)
			}
		})
	}
}

// TestRunBadTraceWritesNothing: a trace that cannot be replayed leaves no
// --out folder behind.
func TestRunBadTraceWritesNothing(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultRunConfig()
	trace := writeFile(t, dir, "header.csv", []byte("TIMESTAMP,ContextTokens,GeneratedTokens\n"))
	cfg.TracePath = dir // the folder: its one trace is used, and named
	cfg.OutDir = filepath.Join(dir, "out")
	var out, errOut bytes.Buffer
	cfg.Stdout, cfg.Stderr = &out, &errOut
	err := Run(cfg)
	if !errors.Is(err, ErrEmptyTrace) || !strings.Contains(err.Error(), "header.csv") {
		t.Fatalf("Run = %v, want ErrEmptyTrace naming header.csv", err)
	}
	if _, err := os.Stat(cfg.OutDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--out %s exists after a failed run (stat: %v)", cfg.OutDir, err)
	}
	if want := "trace: " + trace + " (the one trace in " + dir + ")"; !strings.Contains(errOut.String(), want) {
		t.Errorf("stderr %q lacks %q", errOut.String(), want)
	}
}

// TestResolvePathFolders: a folder with one trace (beside monitoring and
// load-latency CSVs) resolves to it; one with two traces is an error
// listing both, never a silent pick; one with none lists its CSVs.
func TestResolvePathFolders(t *testing.T) {
	azure := []byte("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n")
	mon := []byte("timestamp_anon,value,container_ip\n1,2,x\n")

	one := t.TempDir()
	want := writeFile(t, one, "lora_request_trace.csv", []byte("timestamp,model\n1,a\n"))
	writeFile(t, one, "basemodel_update_latency_anon.csv", mon)
	writeFile(t, one, "qps.csv", []byte("timestamp_anon,value,container_ip,request_type\n1,2,x,y\n"))
	writeFile(t, one, "README.md", []byte("# not a csv\n"))
	if got, err := ResolvePath(one); err != nil || got != want {
		t.Errorf("ResolvePath(one trace) = %q, %v; want %q", got, err, want)
	}

	two := t.TempDir()
	code := writeFile(t, two, "AzureLLMInferenceTrace_code.csv", azure)
	conv := writeFile(t, two, "AzureLLMInferenceTrace_conv.csv", azure)
	_, err := ResolvePath(two)
	if !errors.Is(err, ErrAmbiguousFolder) {
		t.Fatalf("ResolvePath(two traces) = %v, want ErrAmbiguousFolder", err)
	}
	for _, w := range []string{code + " (azure-llm)", conv + " (azure-llm)", "--trace=FILE"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}

	// Only subfolders: it said "no trace among its 0 CSV files ()".
	nested := t.TempDir()
	for i := range 12 {
		if err := os.Mkdir(filepath.Join(nested, fmt.Sprintf("d%02d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, nested, "README.md", []byte("# not a csv\n"))
	if _, err := ResolvePath(nested); err == nil || err.Error() != nested+": the folder has no CSV files, only 12 subfolders (d00, d01, d02, d03, d04, d05, d06, d07, d08, d09 and 2 more); pass a trace file or the subfolder holding one" {
		t.Errorf("ResolvePath(subfolders only) = %v", err)
	}
	if empty := t.TempDir(); true {
		if _, err := ResolvePath(empty); err == nil || err.Error() != empty+": the folder has no CSV files; pass a trace file or a folder holding one" {
			t.Errorf("ResolvePath(empty folder) = %v", err)
		}
	}

	none := t.TempDir()
	writeFile(t, none, "qps.csv", mon)
	if _, err := ResolvePath(none); err == nil || !strings.Contains(err.Error(), "no trace among its 1 CSV files (qps.csv)") {
		t.Errorf("ResolvePath(no trace) = %v, want an error listing qps.csv", err)
	}
}

// TestRunInstancesOutputs: the DLRM instance trace has no time series and
// no summary. Its run names only table.md and report.html (it named all
// four) and removes the timeseries.csv and summary.json an earlier run left
// in --out, which a reader would have taken for this trace's results. An
// app_name with | or a newline stays in its table cell.
func TestRunInstancesOutputs(t *testing.T) {
	dir := t.TempDir()
	trace := writeFile(t, dir, "dlrm.csv", []byte("instance_sn,role,app_name,gpu_request,creation_time,deletion_time\n"+
		"i0,HN,\"a|b\",1,,\n"+
		"i1,HN,\"c\nd\",1,0,100\n"+
		"i2,CN,a,0,,\n"))
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, out, "summary.json", []byte(`{"trace": "an earlier run"}`))
	writeFile(t, out, "timeseries.csv", []byte("policy\n"))
	cfg := DefaultRunConfig()
	cfg.TracePath, cfg.OutDir = trace, out
	var stdout, stderr bytes.Buffer
	cfg.Stdout, cfg.Stderr = &stdout, &stderr
	if err := Run(cfg); err != nil {
		t.Fatal(err)
	}
	p := func(f string) string { return filepath.Join(out, f) }
	want := "wrote " + p("table.md") + " and " + p("report.html") + "\n" +
		"removed " + p("timeseries.csv") + " and " + p("summary.json") + ", left by an earlier run (this trace has no time series or summary)\n"
	if got := stderr.String(); got != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", got, want)
	}
	for _, f := range []string{"summary.json", "timeseries.csv"} {
		if _, err := os.Stat(p(f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still in --out (stat: %v)", f, err)
		}
	}
	for _, row := range []string{"| a\\|b | 0 | 0 | 1.00 | 1.0 | 1 | 1 | 0.00 |", `| "c\nd" | 0 | 0 | 1.00 | 1.0 | 0 | 1 | 36.00 |`} {
		if !strings.Contains(stdout.String(), "\n"+row+"\n") {
			t.Errorf("table lacks the row %q:\n%s", row, stdout.String())
		}
	}
	if !strings.Contains(stdout.String(), "1 CN (CPU instance) rows left out: only HN (GPU instance) rows are counted.") {
		t.Errorf("table does not report the CN row left out:\n%s", stdout.String())
	}
	html, err := os.ReadFile(p("report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), "<td>a|b</td>") {
		t.Errorf("report.html lacks the cell a|b")
	}
}
