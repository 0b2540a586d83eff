// Package publish hands a ledger report to the cluster when cmd/ledger
// runs as the chart's CronJob: the verdicts as Prometheus metrics (pushed
// to a Pushgateway, the Prometheus way for batch jobs) and the full
// report in a ConfigMap the chart creates.
package publish

import (
	"bytes"
	"context"
	"fmt"
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
// job's previous push.
func Push(ctx context.Context, url, job string, r ledger.Report) error {
	reg := prometheus.NewRegistry()
	NewMetrics(reg).Set(r)
	if err := push.New(url, job).Gatherer(reg).PushContext(ctx); err != nil {
		return pushError(url, err)
	}
	return nil
}

// maxPushErrorBytes bounds pushError's text: client_golang quotes the Pushgateway's whole
// answer in a status error.
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
	return fmt.Errorf("push to %s: %s", shown, errtext.Cut(msg, maxPushErrorBytes))
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
