package prom

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// lockedBuffer is a bytes.Buffer safe for the poller's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The secrets the credential tests put in an address; none may appear in an error or a log.
const (
	testPassword = "s3cretPassw0rd"
	testToken    = "t0kenValue"
)

func assertNoSecret(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range []string{testPassword, testToken} {
		if strings.Contains(text, s) {
			t.Errorf("%s shows the secret %q: %s", what, s, text)
		}
	}
}

// TestRedactAddress: the password of an address's userinfo reads "xxxxx" (url.URL.Redacted)
// and so does the value of every query parameter, which client_golang sends with each query
// (a token may be there); the user, host, port and path stay. An address that does not parse
// is redacted by the same rule from its text.
func TestRedactAddress(t *testing.T) {
	tests := []struct{ give, want string }{
		{"http://prometheus:9090", "http://prometheus:9090"},
		{"https://thanos.example:10902/prefix", "https://thanos.example:10902/prefix"},
		{"http://user:" + testPassword + "@prometheus:9090", "http://user:xxxxx@prometheus:9090"},
		{"http://user:" + testPassword + "@prometheus:9090/prefix", "http://user:xxxxx@prometheus:9090/prefix"},
		{"http://user@prometheus:9090", "http://user@prometheus:9090"},
		{"https://prometheus/?access_token=" + testToken + "&org=a", "https://prometheus/?access_token=xxxxx&org=xxxxx"},
		{"https://prometheus/?" + testToken, "https://prometheus/?xxxxx"},
		{"http://u:" + testPassword + "@[::1]:9090/p?token=" + testToken, "http://u:xxxxx@[::1]:9090/p?token=xxxxx"},
		// Unparseable: a space in the password, an invalid escape, a bad port.
		{"http://user:pa ss" + testPassword + "@prometheus:9090", "http://user:xxxxx@prometheus:9090"},
		{"http://user:%zz" + testPassword + "@prometheus:9090/p?token=" + testToken, "http://user:xxxxx@prometheus:9090/p?token=xxxxx"},
		{"http://user:pa/" + testPassword + "@prometheus:9090", "http://user:xxxxx@prometheus:9090"},
		// Parses, as host "user", port 123 and the password in the path: redacted from its text.
		{"http://user:123/" + testPassword + "@prometheus:9090", "http://user:xxxxx@prometheus:9090"},
		{"http://user:9091#" + testPassword + "@prometheus:9090", "http://user:xxxxx@prometheus:9090"},
		{"http://user:9091?" + testPassword + "@prometheus:9090", "http://user:xxxxx@prometheus:9090"},
		{"http://prometheus:9090/#" + testToken, "http://prometheus:9090/#xxxxx"},
		// Unparseable with a fragment: the fragment is replaced too (it was kept).
		{"http://prometheus:9090/%zz#" + testToken, "http://prometheus:9090/%zz#xxxxx"},
		{"http://prom etheus:9090/?a=" + testToken + "#" + testToken, "http://prom etheus:9090/?a=xxxxx#xxxxx"},
		{"http://prom etheus:9090/#?a=" + testToken, "http://prom etheus:9090/#xxxxx"},
		{"http://user:pa ss" + testPassword + "@prom etheus:9090/#", "http://user:xxxxx@prom etheus:9090/#"},
		{"prometheus:9090", "prometheus:9090"},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			if got := RedactAddress(tt.give); got != tt.want {
				t.Errorf("RedactAddress(%q) = %q, want %q", tt.give, got, tt.want)
			}
		})
	}
}

// TestValidateAddressRedacts: a refused address is quoted without its password or query
// values, in validateAddress's error and in PollerConfig.Validate's.
func TestValidateAddressRedacts(t *testing.T) {
	tests := []struct{ give, want string }{
		{"http://user:" + testPassword + "@169.254.169.254/latest/?token=" + testToken,
			`bad request: prometheusAddress "http://user:xxxxx@169.254.169.254/latest/?token=xxxxx": 169.254.169.254 is a link-local address (169.254.0.0/16, fe80::/10: cloud instance metadata lives there): refused (the scaler is shared by every namespace, so such an address would let any ScaledObject reach it)`},
		{"ftp://user:" + testPassword + "@prometheus:9090",
			`bad request: prometheusAddress "ftp://user:xxxxx@prometheus:9090": must be an http:// or https:// URL with a host`},
		{"http://user:" + testPassword + "@2852039166",
			`bad request: prometheusAddress "http://user:xxxxx@2852039166": host "2852039166" is a numeric address not in dotted-decimal form; write the IP address as a.b.c.d`},
		// url.Parse's own error would name the bad port ":pa", a piece of the password.
		{"http://user:pa/" + testPassword + "@prometheus:9090",
			`bad request: prometheusAddress "http://user:xxxxx@prometheus:9090": the user or password is not valid in a URL (percent-encode characters such as "/", "?", "#", "@", ":", "%" and spaces in them)`},
		{"http://user:pa ss" + testPassword + "@prometheus:9090",
			`bad request: prometheusAddress "http://user:xxxxx@prometheus:9090": the user or password is not valid in a URL (percent-encode characters such as "/", "?", "#", "@", ":", "%" and spaces in them)`},
		// A password starting with digits and holding a "/" parses, as host "user" and port
		// 123 with the secret in the path: refused, and shown without it.
		{"http://user:123/" + testPassword + "@prometheus:9090",
			`bad request: prometheusAddress "http://user:xxxxx@prometheus:9090": the user or password is not valid in a URL (percent-encode characters such as "/", "?", "#", "@", ":", "%" and spaces in them)`},
		{"http://user:9091#" + testPassword + "@prometheus:9090",
			`bad request: prometheusAddress "http://user:xxxxx@prometheus:9090": the user or password is not valid in a URL (percent-encode characters such as "/", "?", "#", "@", ":", "%" and spaces in them)`},
		{"http://user:9091?" + testPassword + "@prometheus:9090",
			`bad request: prometheusAddress "http://user:xxxxx@prometheus:9090": the user or password is not valid in a URL (percent-encode characters such as "/", "?", "#", "@", ":", "%" and spaces in them)`},
		{"http://prometheus:9090/#" + testToken,
			`bad request: prometheusAddress "http://prometheus:9090/#xxxxx": has a fragment (#…), which HTTP never sends; percent-encode a # in the user or password as %23`},
		{"http://user:" + testPassword + "@prometheus:99999",
			`bad request: prometheusAddress "http://user:xxxxx@prometheus:99999": port "99999" out of range [1, 65535]`},
		// A fault outside the credentials keeps url.Parse's message (of the redacted text).
		{"http://user:" + testPassword + "@prometheus:90x0/?token=" + testToken,
			`bad request: prometheusAddress "http://user:xxxxx@prometheus:90x0/?token=xxxxx": invalid port ":90x0" after host`},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			err := validateAddress(tt.give)
			if err == nil || err.Error() != tt.want {
				t.Errorf("validateAddress = %v,\nwant %s", err, tt.want)
			}
			cfg := DefaultConfig()
			cfg.DefaultAddress = tt.give
			err = cfg.Validate()
			if err == nil || err.Error() != "DefaultAddress: "+tt.want {
				t.Errorf("Validate = %v,\nwant DefaultAddress: %s", err, tt.want)
			}
		})
	}
}

// TestAddressCredentialsUsedNotShown: an address with a user, a password and a query token
// sends them to Prometheus (basic auth, the query parameter), while the poller's errors (its
// own and the HTTP client's, whose url.Error carries the URL), its logs and Key.String show
// the address redacted.
func TestAddressCredentialsUsedNotShown(t *testing.T) {
	var (
		mu             sync.Mutex
		user, pass, tk string
		fail           bool
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		user, pass, _ = r.BasicAuth()
		tk = r.FormValue("token")
		if fail {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"status":"error","errorType":"unavailable","error":"down"}`) // 503: client_golang reads only the code
			return
		}
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1767225600,"7"]}]}}`)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	addr := "http://reader:" + testPassword + "@" + host + "/?token=" + testToken
	shown := "http://reader:xxxxx@" + host + "/?token=xxxxx"

	var logs lockedBuffer
	cfg := DefaultConfig()
	cfg.DefaultAddress = addr
	p, err := NewPoller(cfg, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	k := subscribe(t, p, Request{Namespace: "a", Kind: KindQueue, Query: `sum(x)`})
	if got, want := k.String(), shown+` sum(x{namespace="a"})`; got != want {
		t.Errorf("Key.String() = %q, want %q", got, want)
	}
	ctx := context.Background()
	p.Refresh(ctx)
	wantValue(t, p, k, 7)
	mu.Lock()
	if user != "reader" || pass != testPassword || tk != testToken {
		t.Errorf("Prometheus saw user %q, password %q, token %q; want reader, %q, %q", user, pass, tk, testPassword, testToken)
	}
	fail = true
	mu.Unlock()

	// A Prometheus error: the poller's own wrapping names the address.
	p.Refresh(ctx)
	got := p.Result(k).Err
	want := `query ` + shown + ` "sum(x{namespace=\"a\"})": server_error: server error: 503`
	if got == nil || got.Error() != want {
		t.Errorf("Result.Err = %v,\nwant %s", got, want)
	}

	// A connection error: the HTTP client's url.Error quotes the URL it requested.
	srv.Close()
	p.Refresh(ctx)
	got = p.Result(k).Err
	wantPrefix := `query ` + shown + ` "sum(x{namespace=\"a\"})": Post "http://reader:xxxxx@` + host + `/api/v1/query?token=xxxxx": dial tcp ` + host + `: connect: connection refused`
	if got == nil || got.Error() != wantPrefix {
		t.Errorf("Result.Err = %v,\nwant %s", got, wantPrefix)
	}
	var ue *url.Error
	if !errors.As(got, &ue) {
		t.Errorf("Result.Err %v does not wrap a *url.Error", got)
	}
	var oe *net.OpError
	if !errors.As(got, &oe) {
		t.Errorf("Result.Err %v no longer wraps the *net.OpError", got)
	}
	if got != nil {
		assertNoSecret(t, "Result.Err", got.Error())
	}
	out := logs.String()
	if !strings.Contains(out, "prometheus query failing") {
		t.Errorf("logs lack the failing query's warning:\n%s", out)
	}
	assertNoSecret(t, "the poller's logs", out)
}

// TestResponseLimitErrorRedactsAddress: the response-size error names the address redacted.
func TestResponseLimitErrorRedactsAddress(t *testing.T) {
	over, _ := vectorOfSize(t, 64<<10+1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(over)) }))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	p, k := limitPoller(t, "http://reader:"+testPassword+"@"+host+"/?token="+testToken, waitTimeout)
	p.Refresh(context.Background())
	got := p.Result(k).Err
	shown := "http://reader:xxxxx@" + host + "/?token=xxxxx"
	want := `query ` + shown + ` "sum(x{namespace=\"a\"})": prometheus response too large: the answer from ` + shown + ` is over the 65536-byte limit on Prometheus responses (MaxResponseBytes)`
	if got == nil || got.Error() != want || !errors.Is(got, ErrResponseTooLarge) {
		t.Errorf("Result.Err = %v,\nwant %s", got, want)
	}
}

// TestPollerConfigRefusesReservedLabels: the poller refuses a namespace or pod label that is
// reserved ("__" prefix) as it refuses an invalid one; the residency sidecar's poller and any
// other caller get the rule the scaler's flags have.
func TestPollerConfigRefusesReservedLabels(t *testing.T) {
	const rule = `must be a label name matching [a-zA-Z_][a-zA-Z0-9_]* and not starting with "__" (reserved for Prometheus's internal labels, such as __name__)`
	cfg := DefaultConfig()
	cfg.NamespaceLabel, cfg.PodLabel = "__name__", "pod-name"
	err := cfg.Validate()
	want := `NamespaceLabel "__name__": ` + rule + "\n" + `PodLabel "pod-name": ` + rule
	if err == nil || err.Error() != want {
		t.Errorf("Validate() = %v,\nwant %s", err, want)
	}
	for name, want := range map[string]bool{"namespace": true, "_pod": true, "a__b": true, "__name__": false, "__meta_x": false, "__": false, "": false, "9a": false, "a:b": false} {
		if got := ValidLabelName(name); got != want {
			t.Errorf("ValidLabelName(%q) = %v, want %v", name, got, want)
		}
	}
}
