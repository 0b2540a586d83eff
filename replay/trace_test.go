package replay

import (
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func readAll(t *testing.T, src Source, err error) ([]Request, error) {
	t.Helper()
	if err != nil {
		return nil, err
	}
	var out []Request
	for {
		r, err := src.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
}

func TestAzureLLM(t *testing.T) {
	in := "TIMESTAMP,ContextTokens,GeneratedTokens\n" +
		"2023-11-16 18:17:03.9799600,4808,10\n" +
		"2023-11-16 18:17:04.0319600,3180,8\n" +
		"2023-11-16 18:18:04.0319601,1,0\n"
	src, err := NewAzureLLM(strings.NewReader(in))
	got, err := readAll(t, src, err)
	if err != nil {
		t.Fatal(err)
	}
	want := []Request{
		{At: 0, InputTokens: 4808, OutputTokens: 10, ExecSeconds: Unknown},
		{At: 52 * time.Millisecond, InputTokens: 3180, OutputTokens: 8, ExecSeconds: Unknown},
		{At: 60*time.Second + 52*time.Millisecond + 100, InputTokens: 1, OutputTokens: 0, ExecSeconds: Unknown},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestReaderErrors(t *testing.T) {
	const az = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,10,1\n"
	tests := []struct {
		name    string
		open    func(io.Reader) (Source, error)
		give    string
		wantErr string
		wantIs  error
	}{
		{"azure bad tokens", NewAzureLLM, az + "2023-11-16 18:17:04.0,abc,1\n", "line 3, column ContextTokens, value \"abc\"", ErrBadValue},
		{"azure negative output", NewAzureLLM, az + "2023-11-16 18:17:04.0,5,-1\n", "line 3, column GeneratedTokens", ErrBadValue},
		{"azure bad timestamp", NewAzureLLM, az + "yesterday,5,1\n", "line 3, column TIMESTAMP, value \"yesterday\"", ErrBadValue},
		{"azure backwards", NewAzureLLM, az + "2023-11-16 18:17:02.0,5,1\n", "line 3, column TIMESTAMP", ErrUnsorted},
		{"azure missing field", NewAzureLLM, az + "2023-11-16 18:17:04.0,5\n", "line 3", ErrBadValue},
		{"azure header", NewAzureLLM, "time,in,out\n", "missing column TIMESTAMP,ContextTokens,GeneratedTokens", ErrBadHeader},
		{"generic bad model-less tokens", NewGeneric, "timestamp,input_tokens\n1.5,7\n2.5,x\n", "line 3, column input_tokens", ErrBadValue},
		{"generic bad timestamp", NewGeneric, "timestamp\n2024-13-45\n", "line 2, column timestamp", ErrBadValue},
		{"gentd26 negative exec", NewGenTD26, "gmt_create,exec_time_seconds,checkpoint_model_version_id\n2024-11-15 16:57:50,-3,M0\n", "line 2, column exec_time_seconds", ErrBadValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := tt.open(strings.NewReader(tt.give))
			_, err = readAll(t, src, err)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, tt.wantIs) {
				t.Errorf("error = %v; want it to contain %q and wrap %v", err, tt.wantErr, tt.wantIs)
			}
		})
	}
}

func TestGenericTimestampsAndOptionalColumns(t *testing.T) {
	in := "model,timestamp,output_tokens\n" +
		"a,2024-01-01T00:00:00Z,5\n" +
		",2024-01-01 00:00:01.5,\n" +
		"b,1704067202,7\n" +
		"a,2024-01-01T00:00:03.25+00:00,1\n"
	src, err := NewGeneric(strings.NewReader(in))
	got, err := readAll(t, src, err)
	if err != nil {
		t.Fatal(err)
	}
	want := []Request{
		{At: 0, Model: 0, InputTokens: Unknown, OutputTokens: 5, ExecSeconds: Unknown},
		{At: 1500 * time.Millisecond, Model: 1, InputTokens: Unknown, OutputTokens: Unknown, ExecSeconds: Unknown},
		{At: 2 * time.Second, Model: 2, InputTokens: Unknown, OutputTokens: 7, ExecSeconds: Unknown},
		{At: 3250 * time.Millisecond, Model: 0, InputTokens: Unknown, OutputTokens: 1, ExecSeconds: Unknown},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a", "default", "b"}, src.Models()); diff != "" {
		t.Errorf("models (-want +got):\n%s", diff)
	}
}

func TestGenTD26SkipsRowsWithoutModel(t *testing.T) {
	in := "gmt_create,predict_type,predict_status,exec_time_seconds,groupId,prompt_length,negative_prompt_length,num_images_per_prompt,num_inference_steps,checkpoint_model_version_id,num_lora\n" +
		"2024-11-15 16:57:50,TXT_2_IMG,SUCCEED,32.0,G0000,63.0,26.0,1.0,30.0,M0000,0\n" +
		"2024-11-15 17:00:00,TXT_2_IMG,PENDING,0.0,G0325,,,,,,0\n" +
		"2024-11-15 18:16:14,TXT_2_IMG,SUCCEED,43.0,G0001,93.0,,1.0,40.0,M0001,0\n"
	src, err := NewGenTD26(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := ReadAll("td", FormatGenTD26, src)
	if err != nil {
		t.Fatal(err)
	}
	want := []Request{
		{At: 0, Model: 0, InputTokens: Unknown, OutputTokens: Unknown, ExecSeconds: 32},
		{At: 78*time.Minute + 24*time.Second, Model: 1, InputTokens: Unknown, OutputTokens: Unknown, ExecSeconds: 43},
	}
	if diff := cmp.Diff(want, tr.Requests); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if tr.Skipped != 1 {
		t.Errorf("Skipped = %d, want 1", tr.Skipped)
	}
}

func TestFunctionsMatrix(t *testing.T) {
	in := "HashFunction,HashOwner,HashApp,minute_1,minute_2,minute_3\n" +
		"f1,f1,f1,2,0,1\n" +
		"f2,f2,f2,0,3,0\n" +
		"f1,f1,f1,1,0,0\n"
	fm, err := ReadFunctionsMatrix(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"f1", "f2", "f1#4"}, fm.Names); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	a, err := ReadAll("fn", FormatAzureFunctions, fm.Requests(7))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ReadAll("fn", FormatAzureFunctions, fm.Requests(7))
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("same seed, different arrivals (-a +b):\n%s", diff)
	}
	perMinute := map[int]int{}
	perModel := map[int32]int{}
	for i, r := range a.Requests {
		perMinute[int(r.At/time.Minute)]++
		perModel[r.Model]++
		if i > 0 && r.At < a.Requests[i-1].At {
			t.Fatalf("arrivals out of order at %d", i)
		}
	}
	if diff := cmp.Diff(map[int]int{0: 3, 1: 3, 2: 1}, perMinute); diff != "" {
		t.Errorf("arrivals per minute (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[int32]int{0: 3, 1: 3, 2: 1}, perModel); diff != "" {
		t.Errorf("arrivals per model (-want +got):\n%s", diff)
	}
	_, err = ReadFunctionsMatrix(strings.NewReader("HashFunction,minute_1,minute_3\nf,1,2\n"))
	if !errors.Is(err, ErrBadHeader) || !strings.Contains(err.Error(), `"minute_2"`) {
		t.Errorf("gap in minutes: error = %v, want ErrBadHeader naming minute_2", err)
	}
	_, err = ReadFunctionsMatrix(strings.NewReader("HashFunction,minute_1\nf,1.5\n"))
	if !errors.Is(err, ErrBadValue) || !strings.Contains(err.Error(), "line 2, column minute_1") {
		t.Errorf("fractional count: error = %v, want line 2 column minute_1", err)
	}
}

const servegenHeader = "category,model,client_id,window_start_s,window_len_s,rate_rps,iat_cv,arrival_dist,dist_p1,dist_p2,mean_input_tokens,mean_output_tokens\n"

func TestServeGen(t *testing.T) {
	in := servegenHeader +
		"language,m-large,0,0,600,2,1,Gamma,1,0.5,100,10\n" +
		"language,m-large,1,600,600,1,2,Weibull,0.6,1.0,,\n" +
		"language,m-small,0,0,600,0.5,1,Gamma,1,2,50,5\n"
	sg, err := ReadServeGen(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := sg.ExpectedRequests(), 2.0*600+600+300; got != want {
		t.Errorf("ExpectedRequests = %g, want %g", got, want)
	}
	tr, err := ReadAll("sg", FormatServeGen, sg.Requests(3))
	if err != nil {
		t.Fatal(err)
	}
	n := float64(len(tr.Requests))
	if n < 1800 || n > 2400 {
		t.Errorf("synthesized %g requests, want about 2100", n)
	}
	counts := map[int32]int{}
	for i, r := range tr.Requests {
		counts[r.Model]++
		if i > 0 && r.At < tr.Requests[i-1].At {
			t.Fatalf("arrivals out of order at %d", i)
		}
	}
	if c := counts[1]; c < 200 || c > 400 {
		t.Errorf("m-small got %d requests, want about 300", c)
	}
	b := sg.Binned(DefaultServiceModel(), 3, 1)
	if len(b.Arrivals) != 1200 {
		t.Fatalf("binned length %d, want 1200 s", len(b.Arrivals))
	}
	if got := b.TotalRequests(); got < 1800 || got > 2400 {
		t.Errorf("binned total %g, want about 2100", got)
	}
	tests := []struct{ name, row, want string }{
		{"bad dist", "language,m,0,0,600,1,1,Pareto,1,1,,\n", "line 2, column arrival_dist"},
		{"zero shape", "language,m,0,0,600,1,1,Gamma,0,1,,\n", "line 2, column dist_p1"},
		{"misaligned window", "language,m,0,30,600,1,1,Gamma,1,1,,\n", "line 2, column window_start_s"},
		{"negative rate", "language,m,0,0,600,-1,1,Gamma,1,1,,\n", "line 2, column rate_rps"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadServeGen(strings.NewReader(servegenHeader + tt.row))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestReadLoadTimes(t *testing.T) {
	got, err := ReadLoadTimes(strings.NewReader("timestamp_anon,value,container_ip\n1662859290.0,2639.0,a\n1662859404.0,22718.5,b\n"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]time.Duration{2639 * time.Millisecond, 22718500 * time.Microsecond}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := ReadLoadTimes(strings.NewReader("timestamp_anon,value,container_ip\n1,NaN,a\n")); !errors.Is(err, ErrBadValue) {
		t.Errorf("NaN latency: error = %v, want ErrBadValue", err)
	}
}

// TestReadLoadTimesRefusesOtherMonitoringFiles: GenTD26's monitoring CSVs
// share the load-latency header. qps.csv (request rates, 0.09 req/s) read
// as 0.09 ms loads ("cold start … p50 0s"); its request_type column names
// it. A value of 0 ms is not a load (pipeline_update_latency_anon.csv has
// 2,622); bytes (the GPU-memory file) are past 24 h. A header without rows
// said "line 1, column value: bad value".
func TestReadLoadTimesRefusesOtherMonitoringFiles(t *testing.T) {
	const h = "timestamp_anon,value,container_ip\n"
	tests := []struct {
		name, give, want string
		is               error
	}{
		{"qps.csv", "timestamp_anon,value,container_ip,request_type\n1662859176.0,0.09000000000000001,,API Requests\n",
			"not load times: column request_type: this is GenTD26's qps.csv (request rates, req/s); a load-latency CSV such as basemodel_update_latency_anon.csv has only timestamp_anon, value (ms) and container_ip", ErrNotLoadTimes},
		{"another column", "timestamp_anon,value,pod\n1,2,a\n", `not load times: column "pod": a load-latency CSV such as basemodel_update_latency_anon.csv has only timestamp_anon, value (ms) and container_ip`, ErrNotLoadTimes},
		{"zero", h + "1,2639.0,a\n2,0.0,b\n", `line 3, column value, value "0.0": bad value: want a load time in (0, 8.64e+07] ms (24 h): a load takes time, and no load takes a day`, ErrBadValue},
		{"bytes", h + "1,33879490560.0,a\n", `line 2, column value, value "33879490560.0": bad value: want a load time in (0, 8.64e+07] ms (24 h): a load takes time, and no load takes a day`, ErrBadValue},
		{"no rows", h, "not load times: no rows: the file has a header and no load times", ErrNotLoadTimes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadLoadTimes(strings.NewReader(tt.give))
			if err == nil || err.Error() != tt.want || !errors.Is(err, tt.is) {
				t.Errorf("ReadLoadTimes = %v;\nwant %q (%v)", err, tt.want, tt.is)
			}
		})
	}
}

func TestDetectFormat(t *testing.T) {
	tests := []struct {
		give string
		want Format
	}{
		{"TIMESTAMP,ContextTokens,GeneratedTokens", FormatAzureLLM},
		{"gmt_create,predict_type,predict_status,exec_time_seconds,groupId,prompt_length,negative_prompt_length,num_images_per_prompt,num_inference_steps,checkpoint_model_version_id,num_lora", FormatGenTD26},
		{"HashFunction,HashOwner,HashApp,minute_1,minute_2", FormatAzureFunctions},
		{strings.TrimSpace(servegenHeader), FormatServeGen},
		{"instance_sn,role,app_name,cpu_request,creation_time,deletion_time", FormatDLRMInstances},
		{"\ufefftimestamp,model", FormatGeneric},
	}
	for _, tt := range tests {
		got, err := DetectFormat(tt.give)
		if err != nil || got != tt.want {
			t.Errorf("DetectFormat(%.30q) = %q, %v; want %q", tt.give, got, err, tt.want)
		}
	}
	if _, err := DetectFormat("timestamp_anon,value,container_ip"); !errors.Is(err, ErrNotRequests) || !strings.Contains(err.Error(), "--cold-start") {
		t.Errorf("monitoring file: error = %v, want ErrNotRequests pointing to --cold-start", err)
	}
	if _, err := DetectFormat("a,b,c"); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("unknown header: error = %v, want ErrUnknownFormat", err)
	}
}

func TestReadInstances(t *testing.T) {
	in := "instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,rdma_request,rdma_limit,memory_request,memory_limit,disk_request,disk_limit,max_instance_per_node,creation_time,scheduled_time,deletion_time\n" +
		"i0,HN,app_0,12,12,1,1,25,25,120,120,640,800,8,,,\n" +
		"i1,HN,app_0,12,12,1,1,25,25,120,120,640,800,8,100,101,300\n" +
		"i2,CN,app_0,12,12,0,0,25,25,120,120,640,800,8,0,1,400\n" +
		"i3,HN,app_1,12,12,2,2,25,25,120,120,640,800,8,,,400\n"
	in2, err := ReadInstances(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []AppTrajectory{
		{App: "app_1", GPUSeconds: 800, Peak: 1, Min: 0, Mean: 1, Changes: 1, Steps: []Step{{0, 1}, {400, 0}}},
		{App: "app_0", GPUSeconds: 600, Peak: 2, Min: 1, Mean: 1.5, Changes: 2, Steps: []Step{{0, 1}, {100, 2}, {300, 1}}},
	}
	if diff := cmp.Diff(want, in2.Apps); diff != "" {
		t.Errorf("apps (-want +got):\n%s", diff)
	}
	if in2.SkippedCN != 1 {
		t.Errorf("SkippedCN = %d, want 1 (row i2)", in2.SkippedCN)
	}
	_, err = ReadInstances(strings.NewReader(strings.Replace(in, "100,101,300", "100,101,50", 1)))
	if err == nil || !strings.Contains(err.Error(), "line 3, column deletion_time") {
		t.Errorf("deletion before creation: error = %v", err)
	}
}

// TestReadInstancesRoles: a role other than the README's HN and CN is
// refused with its line and the accepted values (rows of any other role
// were dropped without a word), and a trace without HN rows is
// ErrEmptyTrace (it replayed as "all 0 apps").
func TestReadInstancesRoles(t *testing.T) {
	const header = "instance_sn,role,app_name,gpu_request,creation_time,deletion_time\n"
	tests := []struct {
		name, give, want string
		empty            bool
	}{
		{"unknown role", header + "i0,HN,a,1,,\ni1,GPU,a,1,,\n", `line 3, column role, value "GPU": bad value: want HN (GPU instance) or CN (CPU instance)`, false},
		{"lower case", header + "i0,hn,a,1,,\n", `line 2, column role, value "hn": bad value: want HN (GPU instance) or CN (CPU instance)`, false},
		{"empty role", header + "i0,,a,1,,\n", `line 2, column role: bad value: want HN (GPU instance) or CN (CPU instance)`, false},
		{"CN only", header + "i0,CN,a,0,,\ni1,CN,b,0,,\n", "trace has no requests: no HN (GPU instance) rows; all 2 rows are CN (CPU instance) rows", true},
		{"header only", header, "trace has no requests: the file has a header and no rows", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadInstances(strings.NewReader(tt.give))
			if err == nil || err.Error() != tt.want || errors.Is(err, ErrEmptyTrace) != tt.empty {
				t.Errorf("ReadInstances = %v; want %q (ErrEmptyTrace: %v)", err, tt.want, tt.empty)
			}
		})
	}
}

func FuzzAzureLLM(f *testing.F) {
	f.Add("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,4808,10\n")
	f.Add("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03,1e3,\"x\"\n")
	f.Fuzz(func(t *testing.T, in string) {
		src, err := NewAzureLLM(strings.NewReader(in))
		if err != nil {
			return
		}
		for range 1000 {
			r, err := src.Next()
			if err != nil {
				return
			}
			if r.At < 0 || r.InputTokens < 0 || r.OutputTokens < 0 {
				t.Fatalf("accepted invalid request %+v", r)
			}
		}
	})
}

func FuzzGeneric(f *testing.F) {
	f.Add("timestamp,model,input_tokens,output_tokens\n1.5,a,1,2\n2,b,,\n")
	f.Fuzz(func(t *testing.T, in string) {
		src, err := NewGeneric(strings.NewReader(in))
		if err != nil {
			return
		}
		for range 1000 {
			r, err := src.Next()
			if err != nil {
				return
			}
			if r.At < 0 || int(r.Model) >= len(src.Models()) {
				t.Fatalf("accepted invalid request %+v", r)
			}
		}
	})
}

// TestHostileTraces: input a few bytes long that asked for tens of GB, a
// stack overflow or a wrapped number is refused with the line, column and
// limit (or, for a skipped-row flood, read in constant stack).
func TestHostileTraces(t *testing.T) {
	const td = "gmt_create,exec_time_seconds,checkpoint_model_version_id\n"
	const fn = "HashOwner,HashApp,HashFunction,Trigger,minute_1,minute_2\n"
	const sg = "category,model,client_id,window_start_s,window_len_s,rate_rps,iat_cv,arrival_dist,dist_p1,dist_p2\n"
	readMatrix := func(r io.Reader) (Source, error) {
		fm, err := ReadFunctionsMatrix(r)
		if err != nil {
			return nil, err
		}
		return fm.Requests(1), nil
	}
	tests := []struct {
		name    string
		open    func(io.Reader) (Source, error)
		give    string
		wantErr string
		wantIs  error
	}{
		// 8 GB per-second arrays before: 0 and 1e9 s.
		{"generic span of 31 years", NewGeneric, "timestamp\n0\n1000000000\n", "line 3, column timestamp, value \"1000000000\": trace too large: 11574.1 days after the first row's timestamp; want a trace span of at most 2208h0m0s", ErrTooLarge},
		{"generic span one second past 92 days", NewGeneric, "timestamp\n0\n7948801\n", "want a trace span of at most 2208h0m0s", ErrTooLarge},
		// abs - origin overflowed int64 into a negative offset.
		{"generic span overflowing int64", NewGeneric, "timestamp\n-9000000000\n9000000000\n", "more than 292 years", ErrTooLarge},
		// UnixNano wrapped 2300 into 1715, reported as out of order.
		{"generic year 2300", NewGeneric, "timestamp\n2024-01-01T00:00:00Z\n2300-01-01T00:00:00Z\n", "line 3, column timestamp, value \"2300-01-01T00:00:00Z\": bad value", ErrBadValue},
		{"generic duplicate column", NewGeneric, "timestamp,model,timestamp\n1,a,2\n", `column "timestamp" appears twice (columns 1 and 3)`, ErrBadHeader},
		{"generic huge value quoted short", NewGeneric, "timestamp\n" + strings.Repeat("9", 1<<20) + "\n", `value "99999999999`, ErrBadValue},
		// A file without newlines was one line held whole by encoding/csv (2 GB of NULs: OOM).
		{"header past MaxLineBytes", NewGeneric, strings.Repeat("\x00", MaxLineBytes+1), "line 1: bad value: line longer than 4194304 bytes (MaxLineBytes, 4 MiB)", ErrLineTooLong},
		{"row past MaxLineBytes", NewGeneric, "timestamp\n1\n" + strings.Repeat("9", MaxLineBytes+1) + "\n", "line 3: bad value: line longer than 4194304 bytes", ErrLineTooLong},
		{"load times past MaxLineBytes", func(r io.Reader) (Source, error) { _, err := ReadLoadTimes(r); return nil, err }, strings.Repeat("\x00", MaxLineBytes+1), "line 1: bad value: line longer than", ErrLineTooLong},
		// 2^31 invocations in one cell: 51 GB of requests before.
		{"functions count past MaxRequests", readMatrix, fn + "o,a,f1,http,2147483647,0\n", "line 2, column minute_1, value \"2147483647\": bad value: trace too large: the matrix's invocations pass 50000000", ErrTooLarge},
		{"functions total past MaxRequests", readMatrix, fn + "o,a,f1,http,30000000,0\no,a,f2,http,0,20000001\n", "line 3, column minute_2", ErrTooLarge},
		{"functions too many minutes", readMatrix, "HashFunction," + minuteCols(132481) + "\n", "132481 minute columns; want at most 132480", ErrTooLarge},
		{"servegen window past 92 days", readServeGen, sg + "language,m,0,1000000000,600,1,1,Gamma,1,1\n", "line 2, column window_start_s, value \"1000000000\": bad value: trace too large: the window ends at 1.0000006e+09 s; want window_start_s + window_len_s ≤ 7.9488e+06 s", ErrTooLarge},
		{"servegen fractional window", readServeGen, sg + "language,m,0,0,1.5,1,1,Gamma,1,1\n", "column window_len_s, value \"1.5\": bad value: want a whole number of seconds", ErrBadValue},
		// 1e7 req/s for 1e6 s: 10^13 requests buffered before.
		{"servegen expected requests past MaxRequests", readServeGen, sg + "language,m,0,0,1000000,10000000,1,Gamma,1,1\n", "Σ rate_rps × window_len_s is 1e+13 requests; want at most MaxRequests (50000000)", ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := tt.open(strings.NewReader(tt.give))
			_, err = readAll(t, src, err)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, tt.wantIs) {
				t.Errorf("error = %.300v; want it to contain %q and wrap %v", err, tt.wantErr, tt.wantIs)
			}
			if err != nil && len(err.Error()) > 400 {
				t.Errorf("error is %d bytes, want a short one", len(err.Error()))
			}
		})
	}

	// Six million rows without a checkpoint overflowed the goroutine stack
	// (one recursive call per row); a loop reads them in constant stack.
	t.Run("gentd26 skipped-row flood", func(t *testing.T) {
		const n = 6_000_000
		var b strings.Builder
		b.WriteString(td)
		for range n {
			b.WriteString("2024-01-01 00:00:00,1,\n")
		}
		b.WriteString("2024-01-01 00:00:01,1,M0\n")
		src, err := NewGenTD26(strings.NewReader(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		tr, err := ReadAll("td", FormatGenTD26, src)
		if err != nil {
			t.Fatal(err)
		}
		want := []Request{{At: time.Second, Model: 0, InputTokens: Unknown, OutputTokens: Unknown, ExecSeconds: 1}}
		if diff := cmp.Diff(want, tr.Requests); diff != "" || tr.Skipped != n {
			t.Errorf("Skipped = %d, want %d; requests (-want +got):\n%s", tr.Skipped, n, diff)
		}
	})
}

func minuteCols(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("minute_" + strconv.Itoa(i+1))
	}
	return b.String()
}

// TestServeGenTokensSaturate: a draw past MaxInt32 saturates instead of
// wrapping into a negative count.
func TestServeGenTokensSaturate(t *testing.T) {
	tests := []struct {
		give float64
		want int32
	}{{-1, Unknown}, {0.4, 0}, {2.5e9, math.MaxInt32}, {math.Inf(1), math.MaxInt32}}
	for _, tt := range tests {
		if got := tokens(tt.give); got != tt.want {
			t.Errorf("tokens(%g) = %d, want %d", tt.give, got, tt.want)
		}
	}
}

// TestFilterModelsTwice: a model named twice is an error; kept, it became a second, empty
// model (the residency replay counted 2 models for --model=a,a).
func TestFilterModelsTwice(t *testing.T) {
	tr := &Trace{Models: []string{"a", "b"}, Requests: []Request{{Model: 0}, {At: time.Second, Model: 1}}}
	if _, err := tr.FilterModels([]string{"a", "a"}); err == nil || err.Error() != `model "a" is listed twice; list each model once` {
		t.Errorf("Trace.FilterModels(a, a) = %v", err)
	}
	sg := &ServeGen{Models: []string{"a", "b"}, LenS: 60}
	if _, err := sg.FilterModels([]string{"b", "b"}); err == nil || err.Error() != `model "b" is listed twice; list each model once` {
		t.Errorf("ServeGen.FilterModels(b, b) = %v", err)
	}
	got, err := tr.FilterModels([]string{"b", "a"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"b", "a"}, got.Models); diff != "" {
		t.Errorf("models (-want +got):\n%s", diff)
	}
}

// readServeGen opens a ServeGen table as the request source a run replays (seed 1).
func readServeGen(r io.Reader) (Source, error) {
	s, err := ReadServeGen(r)
	if err != nil {
		return nil, err
	}
	return s.Requests(1), nil
}
