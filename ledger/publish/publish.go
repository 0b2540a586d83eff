// Package publish hands a ledger report to the cluster when cmd/ledger
// runs as the chart's CronJob: the verdicts as Prometheus metrics (pushed
// to a Pushgateway, the Prometheus way for batch jobs) and the full
// report in a ConfigMap the chart creates.
package publish

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/inferscale/inferscale/internal/errtext"
	"github.com/inferscale/inferscale/ledger"
	"github.com/inferscale/inferscale/prom"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/push"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Metrics are the ledger's verdicts as gauges; one Metrics per run.
type Metrics struct {
	OK              prometheus.Gauge
	Verdict         *prometheus.GaugeVec
	PeakRPS         *prometheus.GaugeVec
	CapacityRPS     *prometheus.GaugeVec
	AfterLossRPS    *prometheus.GaugeVec
	LayoutValid     *prometheus.GaugeVec
	Releasable      *prometheus.GaugeVec
	SavingsPerMonth prometheus.Gauge
	OwnerConflicts  prometheus.Gauge
}

// NewMetrics registers the ledger's gauges on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	g := func(name, help string) prometheus.Gauge {
		m := prometheus.NewGauge(prometheus.GaugeOpts{Name: "inferscale_ledger_" + name, Help: help})
		reg.MustRegister(m)
		return m
	}
	v := func(name, help string, labels ...string) *prometheus.GaugeVec {
		m := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "inferscale_ledger_" + name, Help: help}, labels)
		reg.MustRegister(m)
		return m
	}
	return &Metrics{
		OK:              g("ok", "1 when every check of the capacity ledger passes, else 0."),
		Verdict:         v("service_verdict", "1 for the service's verdict (pass, fail, exempt)", "service", "tier", "verdict"),
		PeakRPS:         v("service_peak_rps", "Peak demand the service must meet, requests per second.", "service"),
		CapacityRPS:     v("service_capacity_rps", "Replicas × safe requests per second per replica.", "service"),
		AfterLossRPS:    v("service_capacity_after_worst_loss_rps", "Capacity after losing the worst failure domain or node, requests per second.", "service"),
		LayoutValid:     v("layout_valid", "1 when the GPU's MIG layout is valid for its product.", "node", "gpu"),
		Releasable:      v("node_releasable", "1 when the release audit finds the node can stop billing.", "node"),
		SavingsPerMonth: g("savings_per_month_usd", "What releasing every releasable node saves per month, USD (price per hour × 730)."),
		OwnerConflicts:  g("owner_conflicts", "Workloads scaled by more than one autoscaler."),
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Set records a report in the gauges.
func (m *Metrics) Set(r ledger.Report) {
	m.OK.Set(b2f(r.OK()))
	for _, s := range r.Check.Services {
		m.Verdict.WithLabelValues(s.Name, string(s.Tier), s.Verdict).Set(1)
		m.PeakRPS.WithLabelValues(s.Name).Set(s.PeakRPS)
		m.CapacityRPS.WithLabelValues(s.Name).Set(s.CapacityRPS)
		m.AfterLossRPS.WithLabelValues(s.Name).Set(s.CapacityAfterWorstLossRPS)
	}
	for _, l := range r.Check.Layouts {
		m.LayoutValid.WithLabelValues(l.Node, strconv.Itoa(l.GPU)).Set(b2f(l.Valid))
	}
	for _, n := range r.Audit.Release {
		m.Releasable.WithLabelValues(n.Node).Set(b2f(n.Release))
	}
	m.SavingsPerMonth.Set(r.Audit.SavingsPerMonth)
	m.OwnerConflicts.Set(float64(len(r.Owners)))
}

// Push sends a report's metrics to a Pushgateway under job, replacing the
// job's previous push. The Pushgateway's answer is read up to
// MaxAnswerBytes: client_golang reads an error status's answer whole into
// its error (a 1 GiB answer to a push allocated 4.6 GiB).
func Push(ctx context.Context, url, job string, r ledger.Report) error {
	reg := prometheus.NewRegistry()
	NewMetrics(reg).Set(r)
	client := &http.Client{Transport: cappedTransport{base: http.DefaultTransport, max: MaxAnswerBytes}}
	if err := push.New(url, job).Client(client).Gatherer(reg).PushContext(ctx); err != nil {
		return pushError(url, err)
	}
	return nil
}

// MaxAnswerBytes bounds what Push reads of a Pushgateway's answer: its
// answers are empty, or an error's text of a few hundred bytes.
const MaxAnswerBytes = 64 << 10

// cappedTransport passes at most max bytes of every response body; past
// them the body ends with a note that says so. No copy in the repository
// fits: prom's limitedTransport is unexported and charges a shared budget
// with an error past it, where an error's answer here is only to be cut.
type cappedTransport struct {
	base http.RoundTripper
	max  int64
}

func (t cappedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	resp.Body = &cappedBody{rc: resp.Body, left: t.max, max: t.max}
	return resp, nil
}

// cappedBody reads rc up to max bytes, then, when rc has more, the note
// " … (answer cut at <max> bytes)" and io.EOF. Close closes rc without
// draining it.
type cappedBody struct {
	rc     io.ReadCloser
	left   int64  // bytes of rc still to pass
	max    int64  // the cap, for the note
	note   []byte // what is left of the note to give (nil: not known yet)
	probed bool   // rc was read past the cap
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left > 0 {
		if int64(len(p)) > b.left {
			p = p[:b.left]
		}
		n, err := b.rc.Read(p)
		b.left -= int64(n)
		return n, err
	}
	if !b.probed {
		b.probed = true
		var one [1]byte
		if n, _ := io.ReadFull(b.rc, one[:]); n == 0 {
			return 0, io.EOF // exactly max bytes, or an error past them: the answer is whole
		}
		b.note = fmt.Appendf(nil, " … (answer cut at %d bytes)", b.max)
	}
	n := copy(p, b.note)
	b.note = b.note[n:]
	if len(b.note) == 0 {
		return n, io.EOF
	}
	return n, nil
}

func (b *cappedBody) Close() error { return b.rc.Close() }

// maxPushErrorBytes bounds pushError's text: client_golang quotes the Pushgateway's
// answer in a status error (up to MaxAnswerBytes). The text keeps its first and last
// halves, so the note of an answer cut at MaxAnswerBytes stays in it.
const maxPushErrorBytes = 1024

// pushError is err of a push to url without url's password and query values (prom.RedactAddress):
// client_golang's status error quotes the push URL whole, and net/http's *url.Error hides only
// the password. The push URL is url without one trailing "/", then "/metrics/job/…".
func pushError(url string, err error) error {
	shown := prom.RedactAddress(url)
	msg := prom.RedactURLError(err).Error()
	if base := strings.TrimSuffix(url, "/"); base != "" {
		msg = strings.ReplaceAll(msg, base, prom.RedactAddress(base))
	}
	return fmt.Errorf("push to %s: %s", shown, errtext.CutMiddle(msg, maxPushErrorBytes))
}

// ConfigMap keys the report is written under.
const (
	KeyMarkdown  = "ledger.md"
	KeyJSON      = "ledger.json"
	KeyMigParted = "mig-parted.yaml"
)

// WriteConfigMap replaces the data of an existing ConfigMap with the
// report (Markdown, JSON and the proposed mig-parted config). The chart
// creates the ConfigMap, so the job needs only get and update on that one
// name.
func WriteConfigMap(ctx context.Context, c kubernetes.Interface, namespace, name string, r ledger.Report) error {
	cm, err := c.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("configmap %s/%s: %w", namespace, name, err)
	}
	var md, js bytes.Buffer
	if err := ledger.WriteMarkdown(&md, r); err != nil {
		return err
	}
	if err := ledger.WriteJSON(&js, r); err != nil {
		return err
	}
	cm.Data = map[string]string{KeyMarkdown: md.String(), KeyJSON: js.String()}
	if r.Audit.Feasible {
		cm.Data[KeyMigParted] = ledger.MigPartedConfig(r.Audit.Proposal)
	}
	if _, err := c.CoreV1().ConfigMaps(namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update configmap %s/%s: %w", namespace, name, err)
	}
	return nil
}
