package publish

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/inferscale/inferscale/ledger"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func report() ledger.Report {
	return ledger.Report{
		Check: ledger.CheckResult{OK: true,
			Services: []ledger.ServiceResult{{Name: "chat", Tier: ledger.P1, PeakRPS: 24, CapacityRPS: 36, CapacityAfterWorstLossRPS: 24, Verdict: ledger.VerdictPass}},
			Layouts:  []ledger.LayoutResult{{Node: "gpu-a", GPU: 0, Valid: true}, {Node: "gpu-a", GPU: 1, Valid: false, Reason: "compute"}},
		},
		Audit: ledger.AuditResult{Release: []ledger.NodeRelease{{Node: "gpu-a"}, {Node: "gpu-b", Release: true, SavingsPerMonth: 2679.1}}, SavingsPerMonth: 2679.1},
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.Set(report())
	want := `
# HELP inferscale_ledger_layout_valid 1 when the GPU's MIG layout is valid for its product.
# TYPE inferscale_ledger_layout_valid gauge
inferscale_ledger_layout_valid{gpu="0",node="gpu-a"} 1
inferscale_ledger_layout_valid{gpu="1",node="gpu-a"} 0
# HELP inferscale_ledger_node_releasable 1 when the release audit finds the node can stop billing.
# TYPE inferscale_ledger_node_releasable gauge
inferscale_ledger_node_releasable{node="gpu-a"} 0
inferscale_ledger_node_releasable{node="gpu-b"} 1
# HELP inferscale_ledger_savings_per_month_usd What releasing every releasable node saves per month, USD (price per hour × 730).
# TYPE inferscale_ledger_savings_per_month_usd gauge
inferscale_ledger_savings_per_month_usd 2679.1
# HELP inferscale_ledger_service_capacity_after_worst_loss_rps Capacity after losing the worst failure domain or node, requests per second.
# TYPE inferscale_ledger_service_capacity_after_worst_loss_rps gauge
inferscale_ledger_service_capacity_after_worst_loss_rps{service="chat"} 24
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"inferscale_ledger_layout_valid", "inferscale_ledger_node_releasable", "inferscale_ledger_savings_per_month_usd",
		"inferscale_ledger_service_capacity_after_worst_loss_rps"); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(m.OK); got != 1 {
		t.Errorf("ok %v, want 1", got)
	}
}

// TestPush checks the request the Pushgateway receives: a PUT of the job's
// group carrying the gauges (client_golang's push client, protocol of
// the Pushgateway's README).
func TestPush(t *testing.T) {
	var method, path, body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		method, path, body = r.Method, r.URL.Path, string(b)
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	if err := Push(context.Background(), srv.URL, "inferscale-ledger", report()); err != nil {
		t.Fatal(err)
	}
	if method != http.MethodPut || path != "/metrics/job/inferscale-ledger" || !strings.Contains(body, "inferscale_ledger_ok") {
		t.Errorf("got %s %s (%d bytes), want PUT /metrics/job/inferscale-ledger with inferscale_ledger_ok", method, path, len(body))
	}
}

// TestPushErrorRedacted: a failed push's error shows the --pushgateway address without its
// password or query values, for a Pushgateway that answers an error status (client_golang
// quotes the push URL whole: the password was in clear) and for one that is unreachable
// (net/http hides only the password), and is bounded though the answer is not.
func TestPushErrorRedacted(t *testing.T) {
	const secret, token = "s3cretPassw0rd", "t0kenValue"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, strings.Repeat("x", 4096))
	}))
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	withSecrets := func(base string) string {
		return strings.Replace(base, "http://", "http://pusher:"+secret+"@", 1) + "/?token=" + token
	}
	shown := func(base string) string {
		return strings.Replace(base, "http://", "http://pusher:xxxxx@", 1) + "/?token=xxxxx"
	}
	tests := []struct {
		name, url, want string
	}{
		{"error status", withSecrets(srv.URL),
			"push to " + shown(srv.URL) + ": unexpected status code 500 while pushing to " + shown(srv.URL) + "/metrics/job/inferscale-ledger: xxx"},
		{"unreachable", withSecrets(down.URL),
			"push to " + shown(down.URL) + `: Put "` + shown(down.URL) + `": dial tcp `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Push(context.Background(), tt.url, "inferscale-ledger", report())
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("Push = %v\nwant prefix %s", err, tt.want)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), token) {
				t.Errorf("Push = %v: shows the secret", err)
			}
			if n := len(err.Error()); n > 1200 {
				t.Errorf("Push error is %d bytes, want it cut to about 1 KiB", n)
			}
		})
	}
	srv.Close()
}

// TestPushErrorAnswerBounded: client_golang reads an error status's answer whole into its
// error; a 1 GiB answer to a push allocated 4.6 GiB. The push's client passes MaxAnswerBytes
// of it, and the error says the answer was cut.
func TestPushErrorAnswerBounded(t *testing.T) {
	const answer = 256 << 20
	chunk := []byte(strings.Repeat("x", 64<<10))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		for sent := 0; sent < answer; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return // the client stopped reading
			}
		}
	}))
	defer srv.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err := Push(context.Background(), srv.URL, "inferscale-ledger", report())
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Errorf("allocated %d MiB for a %d MiB answer, want under 16 MiB (the answer is read up to %d bytes)", got>>20, answer>>20, MaxAnswerBytes)
	}
	wantPrefix := "push to " + srv.URL + ": unexpected status code 500 while pushing to " + srv.URL + "/metrics/job/inferscale-ledger: xxx"
	wantSuffix := "xxx … (answer cut at 65536 bytes)"
	if err == nil || !strings.HasPrefix(err.Error(), wantPrefix) || !strings.HasSuffix(err.Error(), wantSuffix) || len(err.Error()) > 1200 {
		t.Errorf("Push = %.2000v\nwant prefix %s, suffix %q, at most 1200 bytes", err, wantPrefix, wantSuffix)
	}
}

// TestCappedBody: an answer of at most the cap passes whole, with no note; a longer one
// passes the cap's bytes and the note.
func TestCappedBody(t *testing.T) {
	tests := []struct {
		size int
		want string
	}{
		{0, ""},
		{10, strings.Repeat("a", 10)},
		{16, strings.Repeat("a", 16)},
		{17, strings.Repeat("a", 16) + " … (answer cut at 16 bytes)"},
		{1 << 20, strings.Repeat("a", 16) + " … (answer cut at 16 bytes)"},
	}
	for _, tt := range tests {
		b := &cappedBody{rc: io.NopCloser(strings.NewReader(strings.Repeat("a", tt.size))), left: 16, max: 16}
		got, err := io.ReadAll(iotest.OneByteReader(b))
		if err != nil || string(got) != tt.want {
			t.Errorf("%d bytes: read %q, %v; want %q", tt.size, got, err, tt.want)
		}
	}
}
