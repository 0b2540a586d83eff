package scaler

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// blockingCollector holds every Collect until release is closed, and says on entered when a
// scrape is inside it.
type blockingCollector struct {
	desc    *prometheus.Desc
	entered chan struct{}
	release chan struct{}
}

func (c *blockingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c *blockingCollector) Collect(ch chan<- prometheus.Metric) {
	c.entered <- struct{}{}
	<-c.release
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1)
}

// TestMetricsScrapesBounded: at most MaxMetricsScrapes /metrics scrapes are gathered at once
// and one more is answered 503 at once. Before, every concurrent scrape gathered its own copy
// of every series (≈ 15 MiB each at the default --object-metrics-max-triggers), without limit.
func TestMetricsScrapesBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	bc := &blockingCollector{desc: prometheus.NewDesc("test_blocking", "h", nil, nil),
		entered: make(chan struct{}, MaxMetricsScrapes+1), release: make(chan struct{})}
	reg.MustRegister(bc)
	ts := httptest.NewServer(metricsHandler(reg))
	defer ts.Close()

	codes := make([]int, MaxMetricsScrapes)
	var wg sync.WaitGroup
	for i := range MaxMetricsScrapes {
		wg.Go(func() {
			resp, err := http.Get(ts.URL)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes[i] = resp.StatusCode
		})
	}
	for range MaxMetricsScrapes {
		<-bc.entered // every allowed scrape is inside Collect
	}
	type answer struct {
		code int
		body string
		err  error
	}
	extra := make(chan answer, 1)
	go func() {
		resp, err := http.Get(ts.URL)
		if err != nil {
			extra <- answer{err: err}
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		extra <- answer{code: resp.StatusCode, body: string(body)}
	}()
	select {
	case a := <-extra:
		if a.err != nil || a.code != http.StatusServiceUnavailable || !strings.Contains(a.body, "Limit of concurrent requests reached (4), try again later.") {
			t.Errorf("scrape %d: %d %q %v, want 503 naming the limit 4", MaxMetricsScrapes+1, a.code, a.body, a.err)
		}
	case <-bc.entered:
		t.Errorf("scrape %d was gathered too: %d scrapes at once", MaxMetricsScrapes+1, MaxMetricsScrapes+1)
		close(bc.release)
		<-extra
		wg.Wait()
		return
	}
	close(bc.release)
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("scrape %d: status %d, want 200", i, c)
		}
	}
}
