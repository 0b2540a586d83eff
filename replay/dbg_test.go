package replay

import (
	"fmt"
	"testing"
	"time"
)

type traceCtl struct{ Controller }

func (c traceCtl) Desired(s Signals) int {
	d := c.Controller.Desired(s)
	if s.Now > 600*time.Second && s.Now < 700*time.Second {
		fmt.Printf("t=%v q=%.0f c6=%.2f c60=%.2f ready=%d cur=%d -> %d\n", s.Now, s.Queue, s.Concurrency6s, s.Concurrency60s, s.Ready, s.Current, d)
	}
	return d
}

func TestDbgKnative(t *testing.T) {
	tr, _ := DemoTrace()
	cfg := DefaultPoolConfig()
	w := NewWorkload(tr, cfg.Service)
	r := simulateRequests(cfg, w, traceCtl{KnativePolicy(0.7, cfg).New()}, defaultRunOptions(w.DurationS(), 2))
	fmt.Println(r.ColdStarts, r.Attainment())
}
