package opencost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// pod is one allocation entry as OpenCost writes it with aggregate=pod. minutes and cost are
// JSON texts, so a test can write null or leave one out ("").
type pod struct {
	key, namespace, kind, controller string
	minutes, cost                    string
}

// allocationJSON writes OpenCost's envelope around one accumulated set of pods.
func allocationJSON(pods ...pod) string {
	var entries []string
	for _, p := range pods {
		fields := []string{
			fmt.Sprintf(`"name":%q`, p.key),
			fmt.Sprintf(`"properties":{"cluster":"default-cluster","node":"gpu-node-1","namespace":%q,"controllerKind":%q,"controller":%q,"pod":%q}`,
				p.namespace, p.kind, p.controller, p.key),
			`"window":{"start":"2026-03-01T11:00:00Z","end":"2026-03-01T12:00:00Z"}`,
			`"start":"2026-03-01T11:00:00Z"`, `"end":"2026-03-01T12:00:00Z"`,
			`"cpuCost":0.1`, `"gpuCost":0.8`, `"ramCost":0.05`, `"pvCost":0`, `"networkCost":0`,
		}
		if p.minutes != "" {
			fields = append(fields, `"minutes":`+p.minutes)
		}
		if p.cost != "" {
			fields = append(fields, `"totalCost":`+p.cost)
		}
		entries = append(entries, fmt.Sprintf("%q:{%s}", p.key, strings.Join(fields, ",")))
	}
	return `{"code":200,"data":[{` + strings.Join(entries, ",") + `}]}`
}

// fakeOpenCost answers every request with status and body and records the requests.
type fakeOpenCost struct {
	mu     sync.Mutex
	status int
	body   string
	got    []*url.URL
}

func (f *fakeOpenCost) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.got = append(f.got, r.URL)
	status, body := f.status, f.body
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprint(w, body)
}

func start(t *testing.T, status int, body string) (*fakeOpenCost, *Client, string) {
	t.Helper()
	f := &fakeOpenCost{status: status, body: body}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := New(Config{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return f, c, srv.URL
}

var (
	llm    = Controller{Namespace: "team-a", Kind: "deployment", Name: "llm"}
	llmSet = Controller{Namespace: "team-a", Kind: "statefulset", Name: "llm"}
)

// Two pods of one Deployment: 3.0 over 90 minutes and 1.0 over 30 minutes are 4.0 over two
// pod-hours, $2 per replica-hour. The query is the documented one, exactly.
func TestPricesTwoPods(t *testing.T) {
	f, c, _ := start(t, http.StatusOK, allocationJSON(
		pod{"llm-7d9f-a", "team-a", "deployment", "llm", "90", "3.0"},
		pod{"llm-7d9f-b", "team-a", "deployment", "llm", "30", "1.0"},
		pod{"__idle__", "", "", "", "60", "100"},
		pod{"__unallocated__", "team-a", "", "", "60", "50"},
	))
	p, err := c.Prices(context.Background(), "team-a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := p.PerReplicaHour[llm]; !ok || got != 2 {
		t.Errorf("price of %s = %v, %v; want 2 (4.0 over 120 pod-minutes)", llm, got, ok)
	}
	if len(p.PerReplicaHour) != 1 || len(p.Bad) != 0 || p.Minutes[llm] != 120 {
		t.Errorf("prices %v, bad %v, minutes %v; want only %s at 120 minutes (__idle__ and __unallocated__ skipped)", p.PerReplicaHour, p.Bad, p.Minutes, llm)
	}
	if len(f.got) != 1 {
		t.Fatalf("%d requests, want 1", len(f.got))
	}
	u := f.got[0]
	if u.Path != "/allocation" {
		t.Errorf("path %q, want /allocation", u.Path)
	}
	want := url.Values{"window": {"1h"}, "aggregate": {"pod"}, "accumulate": {"true"}, "filter": {`namespace:"team-a"`}}
	if got := u.Query(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("query %v, want %v", got, want)
	}
}

// A base URL's path and query are kept: a proxy prefix and a token.
func TestRequestKeepsBasePathAndQuery(t *testing.T) {
	f := &fakeOpenCost{status: http.StatusOK, body: allocationJSON()}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, err := New(Config{Address: srv.URL + "/opencost/?token=s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Prices(context.Background(), `we"ird`, 90*time.Minute); err != nil {
		t.Fatal(err)
	}
	u := f.got[0]
	if u.Path != "/opencost/allocation" || u.Query().Get("token") != "s3cret" || u.Query().Get("window") != "90m" ||
		u.Query().Get("filter") != `namespace:"we\"ird"` {
		t.Errorf("request %v: want /opencost/allocation with token, window 90m and the namespace quoted", u)
	}
	if strings.Contains(c.Address(), "s3cret") {
		t.Errorf("Address() %q shows the token", c.Address())
	}
}

// Below MinMinutes a controller has no price (absent, not 0); at it, a price.
func TestPricesMinimumMinutes(t *testing.T) {
	_, c, _ := start(t, http.StatusOK, allocationJSON(
		pod{"young-0", "team-a", "statefulset", "young", "29", "1"},
		pod{"edge-0", "team-a", "statefulset", "edge", "30", "1.5"},
	))
	p, err := c.Prices(context.Background(), "team-a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	young := Controller{"team-a", "statefulset", "young"}
	edge := Controller{"team-a", "statefulset", "edge"}
	if v, ok := p.PerReplicaHour[young]; ok {
		t.Errorf("29 pod-minutes: price %v, want none", v)
	}
	if p.Minutes[young] != 29 {
		t.Errorf("minutes of %s = %v, want 29", young, p.Minutes[young])
	}
	if v, ok := p.PerReplicaHour[edge]; !ok || v != 3 {
		t.Errorf("30 pod-minutes, cost 1.5: price %v, %v; want 3", v, ok)
	}
}

// A Deployment and a StatefulSet of the same name are two prices.
func TestPricesKindsApart(t *testing.T) {
	_, c, _ := start(t, http.StatusOK, allocationJSON(
		pod{"llm-7d9f-a", "team-a", "deployment", "llm", "60", "2"},
		pod{"llm-0", "team-a", "statefulset", "llm", "60", "5"},
		pod{"llm-1", "team-a", "StatefulSet", "llm", "60", "3"}, // kinds compare in lower case
	))
	p, err := c.Prices(context.Background(), "team-a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if p.PerReplicaHour[llm] != 2 || p.PerReplicaHour[llmSet] != 4 || len(p.PerReplicaHour) != 2 {
		t.Errorf("prices %v; want deployment llm 2, statefulset llm 4", p.PerReplicaHour)
	}
}

// A null (NaN or ±Inf in OpenCost), negative or missing number fails its controller, naming
// the pod and the field; the other controllers keep their prices.
func TestPricesBadEntries(t *testing.T) {
	tests := []struct {
		name, minutes, cost, want string
	}{
		{"NaN cost", "60", "null", `deployment team-a/llm: pod "llm-b": totalCost is null (OpenCost writes NaN and ±Inf as null)`},
		{"negative cost", "60", "-0.5", `deployment team-a/llm: pod "llm-b": totalCost -0.5: must be ≥ 0`},
		{"negative minutes", "-1", "1", `deployment team-a/llm: pod "llm-b": minutes -1: must be ≥ 0`},
		{"missing minutes", "", "1", `deployment team-a/llm: pod "llm-b": minutes is missing`},
		// Out of float64's range: json.Unmarshal's error failed the whole namespace.
		{"cost out of range", "60", "1e400", `deployment team-a/llm: pod "llm-b": totalCost "1e400": must be a finite number ≥ 0`},
		{"minutes out of range", "-1e400", "1", `deployment team-a/llm: pod "llm-b": minutes "-1e400": must be a finite number ≥ 0`},
		{"cost a string", "60", `"2.5"`, `deployment team-a/llm: pod "llm-b": totalCost "\"2.5\"": must be a finite number ≥ 0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, c, _ := start(t, http.StatusOK, allocationJSON(
				pod{"llm-a", "team-a", "deployment", "llm", "60", "2"},
				pod{"llm-b", "team-a", "deployment", "llm", tt.minutes, tt.cost},
				pod{"llm-0", "team-a", "statefulset", "llm", "60", "5"},
			))
			p, err := c.Prices(context.Background(), "team-a", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if v, ok := p.PerReplicaHour[llm]; ok {
				t.Errorf("price of %s = %v, want none", llm, v)
			}
			if err := p.Bad[llm]; err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("bad[%s] = %v, want %q", llm, err, tt.want)
			}
			if p.PerReplicaHour[llmSet] != 5 || len(p.Bad) != 1 {
				t.Errorf("prices %v, bad %v: the StatefulSet keeps its price 5", p.PerReplicaHour, p.Bad)
			}
		})
	}
}

// A value OpenCost's answer repeats is cut to 64 bytes in an error, with its length: a 4 MiB
// pod key made a 4 MiB error (for an entry of another namespace, failing the refresh) and a
// 2 MiB pod and controller name a 4 MiB one (kept per refused controller).
func TestPricesErrorsBounded(t *testing.T) {
	big := strings.Repeat("x", 4<<20)
	_, c, _ := start(t, http.StatusOK, allocationJSON(pod{big, "other", "deployment", "llm", "60", "1"}))
	_, err := c.Prices(context.Background(), "team-a", time.Hour)
	want := `opencost: entry "` + big[:64] + `"… (4194304 bytes) is in namespace "other", not "team-a"`
	if err == nil || !strings.Contains(err.Error(), want) || len(err.Error()) > 512 {
		t.Errorf("entry of another namespace keyed with 4 MiB: error of %d bytes, want at most 512 containing %q", len(fmt.Sprint(err)), want)
	}

	half := big[:2<<20]
	_, c, _ = start(t, http.StatusOK, allocationJSON(pod{half, "team-a", "deployment", half, "null", "1"}))
	p, err := c.Prices(context.Background(), "team-a", time.Hour)
	if err != nil || len(p.Bad) != 1 {
		t.Fatalf("Prices = %v, %v; want one refused controller", p, err)
	}
	bad := p.Bad[Controller{Namespace: "team-a", Kind: "deployment", Name: half}]
	want = `opencost: deployment team-a/` + half[:64] + `… (2097152 bytes): pod "` + half[:64] + `"… (2097152 bytes): minutes is null`
	if bad == nil || !strings.HasPrefix(bad.Error(), want) {
		t.Errorf("refused entry with a 2 MiB pod and controller: %.300v, want it to start %q", bad, want)
	}
}

// An answer with code 500 is an error quoting OpenCost's message; so is an HTTP error with
// OpenCost's envelope, and a code 500 inside an HTTP 200.
func TestPricesErrorAnswers(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"HTTP 500", http.StatusInternalServerError, `{"code":500,"message":"Error: boundary error: requested [2026-03-01, 2026-03-02); supported [2026-02-20, 2026-03-01)"}`,
			`HTTP 500, code 500: "Error: boundary error: requested [2026-03-01, 2026-03-02); supported [2026-02-20, 2026-03-01)"`},
		{"code 500 in 200", http.StatusOK, `{"code":500,"message":"Error: failed to query Prometheus"}`, `HTTP 200, code 500: "Error: failed to query Prometheus"`},
		{"HTTP 400 text", http.StatusBadRequest, "Invalid window\n", `HTTP 400, code 400: "Invalid window"`},
		{"not JSON", http.StatusOK, `<html>proxy login</html>`, `the answer is not OpenCost's allocation JSON`},
		{"no code", http.StatusOK, `{"data":[]}`, `the answer has no code`},
		{"other namespace", http.StatusOK, allocationJSON(pod{"x-0", "team-b", "deployment", "x", "60", "1"}),
			`entry "x-0" is in namespace "team-b", not "team-a": this OpenCost does not apply the v2 filter`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, c, addr := start(t, tt.status, tt.body)
			p, err := c.Prices(context.Background(), "team-a", time.Hour)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Prices = %v, %v; want an error containing %q", p, err, tt.want)
			}
			if tt.name != "other namespace" && !strings.Contains(err.Error(), "opencost "+addr+`, namespace "team-a"`) {
				t.Errorf("error %q does not name the address and namespace", err)
			}
		})
	}
}

// An answer past DefaultMaxResponseBytes fails naming the limit.
func TestPricesOversize(t *testing.T) {
	big := `{"code":200,"data":[{"pad":{"name":"` + strings.Repeat("x", DefaultMaxResponseBytes) + `"}}]}`
	_, c, _ := start(t, http.StatusOK, big)
	_, err := c.Prices(context.Background(), "team-a", time.Hour)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "more than 16777216 bytes") {
		t.Fatalf("Prices = %v; want ErrTooLarge naming 16777216 bytes", err)
	}
}

// Addresses are validated as Prometheus addresses are, and shown redacted.
func TestNewValidatesAddress(t *testing.T) {
	for _, addr := range []string{"", "opencost:9003", "ftp://opencost:9003", "http://169.254.169.254/", "http://[fe80::1]:9003"} {
		if _, err := New(Config{Address: addr}); err == nil {
			t.Errorf("New(%q) = nil error, want refused", addr)
		}
	}
	_, err := New(Config{Address: "http://user:hunter2@169.254.169.254:9003"})
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "user:xxxxx@") {
		t.Errorf("New with a password = %v; want refused, the password redacted", err)
	}
	if _, err := New(Config{Address: "http://opencost.opencost.svc:9003"}); err != nil {
		t.Errorf("in-cluster address: %v", err)
	}
}

// The client's dialer refuses a link-local address after resolution (prom.RefuseDial), as it
// would the address a hostname resolves to; New refuses only literal ones, so the test
// points a valid client at the literal address afterwards (no DNS needed).
func TestDialerRefusesMetadata(t *testing.T) {
	c, err := New(Config{Address: "http://metadata.example.invalid:9003"})
	if err != nil {
		t.Fatal(err)
	}
	c.base, _ = url.Parse("http://169.254.169.254:9")
	_, err = c.Prices(context.Background(), "team-a", time.Hour)
	if err == nil || !strings.Contains(err.Error(), "refusing to connect to 169.254.169.254:9") {
		t.Fatalf("Prices = %v; want the dialer's refusal", err)
	}
}

func TestFormatWindow(t *testing.T) {
	for d, want := range map[time.Duration]string{10 * time.Minute: "10m", time.Hour: "1h", 90 * time.Minute: "90m", 48 * time.Hour: "2d", 168 * time.Hour: "7d", 36 * time.Hour: "36h"} {
		if got, err := FormatWindow(d); err != nil || got != want {
			t.Errorf("FormatWindow(%v) = %q, %v; want %q", d, got, err, want)
		}
	}
	for _, d := range []time.Duration{0, 30 * time.Second, 90 * time.Second} {
		if _, err := FormatWindow(d); err == nil {
			t.Errorf("FormatWindow(%v): want an error", d)
		}
	}
}

// The fake's answer is OpenCost's JSON (a self-check of the test helper).
func TestAllocationJSONIsJSON(t *testing.T) {
	var v any
	if err := json.Unmarshal([]byte(allocationJSON(pod{"a", "n", "deployment", "d", "1", "null"})), &v); err != nil {
		t.Fatal(err)
	}
}
