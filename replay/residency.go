package replay

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/inferscale/inferscale/residency/plan"
)

// Residency policy names.
const (
	ResidencyInferscale = "inferscale"
	ResidencyLRU        = "lru"
	ResidencyLFU        = "lfu"
	ResidencyBelady     = "belady"
)

// ResidencyConfig describes the model-residency replay: one GPU whose memory
// budget holds a subset of the trace's models.
//
// Model sizes are drawn per model from a log-normal with median
// SizeMedianBytes and σ SizeSigma (an assumption: Stable-Diffusion-class
// checkpoints and 7B-class LLMs in fp16 are 2-15 GiB), capped at half the
// budget so every model fits. Load times are drawn per model from
// LoadTimeSamples (GenTD26's measured base-model loads when given) or else
// from a log-normal with GenTD26's median 23 s and p99 52 s. Draws use a PCG
// seeded with Seed.
type ResidencyConfig struct {
	// BudgetModels sets the budget to this many median-sized models; 0
	// picks AutoBudgetModels.
	BudgetModels    float64
	SizeMedianBytes int64
	SizeSigma       float64
	LoadTimeSamples []time.Duration
	// LoopInterval and DemandWindow are the residency controller's (its
	// DefaultConfig: 5 s and 1 m).
	LoopInterval, DemandWindow time.Duration
	// IdleTimeout and MinResidency are the catalog's (its defaults: 10 m, 2 m).
	IdleTimeout, MinResidency time.Duration
	Seed                      uint64
}

// controllerLoopInterval and controllerDemandWindow copy residency.DefaultConfig's LoopInterval
// and DemandWindow: replay links only the pure planner (residency/plan), not package residency
// with its client-go, gRPC and Triton dependencies. TestResidencyDefaultsMatchController keeps
// the copies equal to the controller's.
const (
	controllerLoopInterval = 5 * time.Second
	controllerDemandWindow = time.Minute
)

// DefaultResidencyConfig returns the documented defaults: an automatic
// budget (AutoBudgetModels), median 6 GiB, σ 0.6, and the residency package's own
// controller and catalog defaults.
func DefaultResidencyConfig() ResidencyConfig {
	return ResidencyConfig{
		BudgetModels: 0, SizeMedianBytes: 6 << 30, SizeSigma: 0.6,
		LoopInterval: controllerLoopInterval, DemandWindow: controllerDemandWindow,
		IdleTimeout: plan.DefaultIdleTimeout, MinResidency: plan.DefaultMinResidency, Seed: 1,
	}
}

// Validate reports every field out of range.
func (c ResidencyConfig) Validate() error {
	var errs []error
	if !(c.BudgetModels == 0 || c.BudgetModels >= 1 && c.BudgetModels <= 1e4) {
		errs = append(errs, fmt.Errorf("residency BudgetModels = %g: want 0 (auto) or [1, 10000]", c.BudgetModels))
	}
	if c.SizeMedianBytes < 1<<20 || c.SizeMedianBytes > 1<<40 {
		errs = append(errs, fmt.Errorf("residency SizeMedianBytes = %d: want [1 MiB, 1 TiB]", c.SizeMedianBytes))
	}
	if !(c.SizeSigma >= 0 && c.SizeSigma <= 3) {
		errs = append(errs, fmt.Errorf("residency SizeSigma = %g: want [0, 3]", c.SizeSigma))
	}
	if c.LoopInterval < 100*time.Millisecond || c.LoopInterval > 10*time.Minute {
		errs = append(errs, fmt.Errorf("residency LoopInterval = %v: want [100ms, 10m]", c.LoopInterval))
	}
	if c.DemandWindow < c.LoopInterval || c.DemandWindow > time.Hour {
		errs = append(errs, fmt.Errorf("residency DemandWindow = %v: want [LoopInterval, 1h]", c.DemandWindow))
	}
	if c.IdleTimeout < 0 || c.MinResidency < 0 {
		errs = append(errs, fmt.Errorf("residency IdleTimeout/MinResidency = %v/%v: want ≥ 0", c.IdleTimeout, c.MinResidency))
	}
	for i, d := range c.LoadTimeSamples {
		if d < 0 {
			errs = append(errs, fmt.Errorf("residency LoadTimeSamples[%d] = %v: want ≥ 0", i, d))
			break
		}
	}
	return errors.Join(errs...)
}

// ResidencyResult is one residency policy's run.
type ResidencyResult struct {
	Policy   string
	Requests int
	// Hits are requests whose model was READY on arrival.
	Hits int
	// Loads and BytesLoaded count completed loads.
	Loads       int
	BytesLoaded int64
	// WaitS is the total request time spent waiting for loads, seconds;
	// Unserved requests (model never loaded by the end) count until the end.
	WaitS    float64
	Unserved int
	// Series is resident GiB per sample step.
	Series []ResidentSample
}

// ResidentSample is the resident memory and model count at TimeS.
type ResidentSample struct {
	TimeS    float64
	GiB      float64
	Resident int
}

// ResidencyComparison holds every policy's run on one trace.
type ResidencyComparison struct {
	Trace       string
	Models      int
	BudgetBytes int64
	Results     []ResidencyResult
}

type resModel struct {
	size     int64
	load     time.Duration
	state    uint8 // 0 unavailable, 1 queued for load, 2 loading, 3 ready
	since    float64
	lastUsed float64
	count    int
	nextUse  float64
	pending  []float64
}

const (
	rmOff uint8 = iota
	rmQueued
	rmLoading
	rmReady
)

type resSim struct {
	cfg     ResidencyConfig
	tr      *Trace
	models  []resModel
	budget  int64
	used    int64
	res     ResidencyResult
	loadQ   []int32
	loading int32
	doneAt  float64
}

func newResSim(tr *Trace, cfg ResidencyConfig, sizes []int64, loads []time.Duration, budget int64, name string) *resSim {
	s := &resSim{cfg: cfg, tr: tr, budget: budget, loading: -1, doneAt: math.Inf(1)}
	s.models = make([]resModel, len(tr.Models))
	for i := range s.models {
		s.models[i].size, s.models[i].load = sizes[i], loads[i]
		s.models[i].nextUse = math.Inf(1)
	}
	s.res.Policy = name
	return s
}

// finishLoad completes the in-flight load at t.
func (s *resSim) finishLoad(t float64) int32 {
	m := &s.models[s.loading]
	m.state, m.since = rmReady, t
	s.res.Loads++
	s.res.BytesLoaded += m.size
	for _, a := range m.pending {
		s.res.WaitS += t - a
	}
	if len(m.pending) > 0 {
		m.lastUsed = t
	}
	m.pending = m.pending[:0]
	id := s.loading
	s.loading, s.doneAt = -1, math.Inf(1)
	return id
}

func (s *resSim) startLoad(id int32, t float64) {
	m := &s.models[id]
	m.state = rmLoading
	s.loading = id
	s.doneAt = t + m.load.Seconds()
}

func (s *resSim) sample(t float64) {
	n := 0
	for _, m := range s.models {
		if m.state == rmReady || m.state == rmLoading {
			n++
		}
	}
	s.res.Series = append(s.res.Series, ResidentSample{TimeS: t, GiB: float64(s.used) / (1 << 30), Resident: n})
}

func (s *resSim) finish(end float64) ResidencyResult {
	for i := range s.models {
		for _, a := range s.models[i].pending {
			s.res.WaitS += end - a
			s.res.Unserved++
		}
	}
	s.res.Requests = len(s.tr.Requests)
	return s.res
}

// runCache replays an on-demand cache policy (LRU, LFU, Belady): a request
// for a model that is not loaded queues its load at once; one load at a
// time; before a load starts, victims are evicted (never the loading
// model) until it fits.
func runCache(tr *Trace, cfg ResidencyConfig, sizes []int64, loads []time.Duration, budget int64, name string, step float64) ResidencyResult {
	s := newResSim(tr, cfg, sizes, loads, budget, name)
	var next []float64
	if name == ResidencyBelady {
		next = make([]float64, len(tr.Requests))
		last := make([]float64, len(tr.Models))
		for i := range last {
			last[i] = math.Inf(1)
		}
		for i := len(tr.Requests) - 1; i >= 0; i-- {
			r := tr.Requests[i]
			next[i] = last[r.Model]
			last[r.Model] = r.At.Seconds()
		}
	}
	victim := func() int32 {
		best := int32(-1)
		for id := range s.models {
			m := &s.models[id]
			if m.state != rmReady {
				continue
			}
			if best < 0 {
				best = int32(id)
				continue
			}
			b := &s.models[best]
			switch name {
			case ResidencyLRU:
				if m.lastUsed < b.lastUsed {
					best = int32(id)
				}
			case ResidencyLFU:
				if m.count < b.count || m.count == b.count && m.lastUsed < b.lastUsed {
					best = int32(id)
				}
			case ResidencyBelady:
				if m.nextUse > b.nextUse {
					best = int32(id)
				}
			}
		}
		return best
	}
	startNext := func(t float64) {
		for s.loading < 0 && len(s.loadQ) > 0 {
			id := s.loadQ[0]
			s.loadQ = s.loadQ[1:]
			m := &s.models[id]
			for s.used+m.size > s.budget {
				v := victim()
				if v < 0 {
					break
				}
				s.models[v].state = rmOff
				s.used -= s.models[v].size
			}
			if s.used+m.size > s.budget {
				m.state = rmOff // cannot fit: its requests stay unserved
				continue
			}
			s.used += m.size
			s.startLoad(id, t)
		}
	}
	nextSample := step
	for i, r := range tr.Requests {
		t := r.At.Seconds()
		for s.doneAt <= t || nextSample <= t {
			if s.doneAt <= nextSample {
				d := s.doneAt
				s.finishLoad(d)
				startNext(d)
			} else {
				s.sample(nextSample)
				nextSample += step
			}
		}
		m := &s.models[r.Model]
		m.count++
		if next != nil {
			m.nextUse = next[i]
		}
		switch m.state {
		case rmReady:
			s.res.Hits++
			m.lastUsed = t
		case rmOff:
			m.state = rmQueued
			m.pending = append(m.pending, t)
			s.loadQ = append(s.loadQ, r.Model)
			startNext(t)
		default:
			m.pending = append(m.pending, t)
		}
	}
	end := tr.Duration().Seconds()
	for !math.IsInf(s.doneAt, 1) {
		d := s.doneAt
		s.finishLoad(d)
		startNext(d)
		end = math.Max(end, d)
	}
	return s.finish(end)
}

func modelName(i int) string { return fmt.Sprintf("m%05d", i) }

// runPlan replays plan.Plan, the residency controller's pure decision:
// every LoopInterval the controller observes the loaded set and per-model
// demand (requests over DemandWindow ÷ its seconds, counting requests for
// models not loaded, as a gateway query would; requests still waiting for
// a load keep counting, as a gateway's pending gauge would, so that a rare
// model's request cannot starve once it leaves the rate window), plans, executes every
// unload at once and starts loads in plan order, one at a time; a request
// for a model that is not READY waits until its load completes. Planning is
// skipped at ticks where nothing changed for 30 s (no arrival, no load
// completion): the plan would be the same.
func runPlan(tr *Trace, cfg ResidencyConfig, sizes []int64, loads []time.Duration, budget int64, step float64) (ResidencyResult, error) {
	s := newResSim(tr, cfg, sizes, loads, budget, ResidencyInferscale)
	cat := plan.Catalog{IdleTimeout: cfg.IdleTimeout, MinResidency: cfg.MinResidency}
	const profile = "replay"
	for i := range tr.Models {
		cat.Models = append(cat.Models, plan.Model{Name: modelName(i), Tier: plan.TierP1, Digest: fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(tr.Models[i]))),
			PeakMemoryBytes: map[string]int64{profile: sizes[i]}, LoadTime: loads[i]})
	}
	if err := cat.Validate(); err != nil {
		return ResidencyResult{}, fmt.Errorf("residency catalog: %w", err)
	}
	bud := plan.Budget{Profile: profile, TotalBytes: budget}
	if err := bud.Validate(); err != nil {
		return ResidencyResult{}, err
	}
	loop := cfg.LoopInterval.Seconds()
	nb := max(1, int(math.Round(cfg.DemandWindow.Seconds()/loop)))
	// counts[m][k]: arrivals of model m in loop bucket k (ring of nb).
	counts := make([][]int32, len(tr.Models))
	for i := range counts {
		counts[i] = make([]int32, nb)
	}
	active := map[int32]bool{} // models with arrivals in the window
	var loadOrder []int32
	i := 0
	n := len(tr.Requests)
	end := tr.Duration().Seconds()
	lastPlan, changed := math.Inf(-1), true
	nextSample := step
	for tick := 0; ; tick++ {
		t := float64(tick) * loop
		// Arrivals before t.
		for ; i < n && tr.Requests[i].At.Seconds() < t; i++ {
			r := tr.Requests[i]
			at := r.At.Seconds()
			for s.doneAt <= at {
				s.finishLoad(s.doneAt)
				changed = true
			}
			m := &s.models[r.Model]
			m.count++
			counts[r.Model][(tick-1+nb)%nb]++
			active[r.Model] = true
			changed = true
			if m.state == rmReady {
				s.res.Hits++
				m.lastUsed = at
			} else {
				m.pending = append(m.pending, at)
			}
		}
		for s.doneAt <= t {
			s.finishLoad(s.doneAt)
			changed = true
		}
		for nextSample <= t {
			s.sample(nextSample)
			nextSample += step
		}
		if i >= n && s.loading < 0 && len(loadOrder) == 0 {
			pend := false
			for k := range s.models {
				pend = pend || len(s.models[k].pending) > 0
			}
			if !pend || t > end+3600 {
				return s.finish(math.Max(end, t)), nil
			}
		}
		if changed || t-lastPlan >= 30 {
			now := t0.Add(time.Duration(t * 1e9))
			demand := plan.Demand{}
			for m := range active {
				var c int32
				for _, v := range counts[m] {
					c += v
				}
				// Requests still waiting count as demand however old they
				// are, as a gateway's pending gauge would show them.
				c = max(c, int32(len(s.models[m].pending)))
				if c == 0 {
					delete(active, m)
					continue
				}
				demand[modelName(int(m))] = float64(c) / cfg.DemandWindow.Seconds()
			}
			obs := plan.Observed{Models: map[string]plan.ModelStatus{}}
			for id := range s.models {
				m := &s.models[id]
				switch m.state {
				case rmReady:
					obs.Models[modelName(id)] = plan.ModelStatus{State: plan.StateReady, LoadedSince: t0.Add(time.Duration(m.since * 1e9)), LastUsed: t0.Add(time.Duration(m.lastUsed * 1e9))}
				case rmLoading:
					obs.Models[modelName(id)] = plan.ModelStatus{State: plan.StateLoading}
				}
			}
			// Plan sees only models that are loaded, loading or in demand:
			// it skips every other catalog entry anyway (not wanted, not
			// resident), so the answer is the same and a 1,350-model
			// catalog costs what its working set costs.
			sub := cat
			sub.Models = sub.Models[:0:0]
			for id := range s.models {
				name := modelName(id)
				if _, ok := obs.Models[name]; ok || demand[name] > 0 {
					sub.Models = append(sub.Models, cat.Models[id])
				}
			}
			actions := plan.Plan(sub, bud, obs, demand, now)
			loadOrder = loadOrder[:0]
			for _, a := range actions {
				var id int
				if _, err := fmt.Sscanf(a.Model, "m%05d", &id); err != nil {
					return ResidencyResult{}, fmt.Errorf("plan named unknown model %q", a.Model)
				}
				m := &s.models[id]
				switch a.Kind {
				case plan.ActionUnload:
					if m.state == rmReady {
						m.state = rmOff
						s.used -= m.size
					}
				case plan.ActionLoad:
					loadOrder = append(loadOrder, int32(id))
				}
			}
			lastPlan, changed = t, false
		}
		// Start the next planned load if the loader is free and it fits.
		for s.loading < 0 && len(loadOrder) > 0 {
			id := loadOrder[0]
			loadOrder = loadOrder[1:]
			m := &s.models[id]
			if m.state != rmOff || s.used+m.size > s.budget {
				continue
			}
			s.used += m.size
			s.startLoad(id, t)
		}
		// Clear the bucket the next tick fills.
		for m := range active {
			counts[m][tick%nb] = 0
		}
	}
}

// CompareResidency runs plan.Plan, LRU, LFU and Belady's
// furthest-next-use on the trace under one memory budget.
func CompareResidency(tr *Trace, cfg ResidencyConfig) (*ResidencyComparison, error) {
	if len(tr.Requests) == 0 {
		return nil, ErrEmptyTrace
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x52657369))
	bm := cfg.BudgetModels
	if bm == 0 {
		bm = AutoBudgetModels(tr)
	}
	budget := int64(bm * float64(cfg.SizeMedianBytes))
	sizes := make([]int64, len(tr.Models))
	loads := make([]time.Duration, len(tr.Models))
	for i := range sizes {
		sz := float64(cfg.SizeMedianBytes) * math.Exp(cfg.SizeSigma*rng.NormFloat64())
		sizes[i] = min(int64(sz), budget/2)
		if len(cfg.LoadTimeSamples) > 0 {
			loads[i] = cfg.LoadTimeSamples[rng.IntN(len(cfg.LoadTimeSamples))]
		} else {
			// GenTD26: median 23 s, p99 52 s → σ = ln(52/23)/2.326.
			loads[i] = time.Duration(23e9 * math.Exp(math.Log(52.0/23)/2.326*rng.NormFloat64()))
		}
		loads[i] = max(loads[i], time.Millisecond)
	}
	step := math.Max(60, math.Ceil(tr.Duration().Seconds()/1500/60)*60)
	rc := &ResidencyComparison{Trace: tr.Name, Models: len(tr.Models), BudgetBytes: budget}
	r, err := runPlan(tr, cfg, sizes, loads, budget, step)
	if err != nil {
		return nil, err
	}
	rc.Results = append(rc.Results, r)
	for _, p := range []string{ResidencyLRU, ResidencyLFU, ResidencyBelady} {
		rc.Results = append(rc.Results, runCache(tr, cfg, sizes, loads, budget, p, step))
	}
	return rc, nil
}

// WriteTable writes the residency comparison as Markdown.
func (rc *ResidencyComparison) WriteTable(w io.Writer) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "Residency on %s: %d models, memory budget %.1f GiB, one load at a time (sizes and load times drawn per model, seeded; see docs/replay.md).\n\n", rc.Trace, rc.Models, float64(rc.BudgetBytes)/(1<<30))
	b.WriteString("| policy | loads | hit ratio | request-hours waiting for loads | mean wait per miss | GiB loaded | unserved |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rc.Results {
		hit := float64(r.Hits) / float64(max(1, r.Requests))
		miss := r.Requests - r.Hits
		mw := math.NaN()
		if miss > 0 {
			mw = r.WaitS / float64(miss)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %d |\n", r.Policy, r.Loads, fnum(hit, 4), fnum(r.WaitS/3600, 2), fwait(mw), fnum(float64(r.BytesLoaded)/(1<<30), 0), r.Unserved)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// Section renders the residency comparison for the HTML report.
func (rc *ResidencyComparison) Section() (Section, error) {
	var tb bytes.Buffer
	if err := rc.WriteTable(&tb); err != nil {
		return Section{}, err
	}
	s := tableSection("Residency: "+rc.Trace, tb.String())
	p := plot.New()
	p.Title.Text = "Resident memory over time (GiB)"
	p.X.Label.Text = "hours"
	p.Y.Label.Text = "GiB resident or loading"
	p.Legend.Top = true
	for i, r := range rc.Results {
		pts := make(plotter.XYs, len(r.Series))
		for k, v := range r.Series {
			pts[k] = plotter.XY{X: v.TimeS / 3600, Y: v.GiB}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return Section{}, err
		}
		l.Color = palette[i%len(palette)]
		l.Width = vg.Points(1)
		p.Add(l)
		p.Legend.Add(r.Policy, l)
	}
	bl, err := plotter.NewLine(plotter.XYs{{X: 0, Y: float64(rc.BudgetBytes) / (1 << 30)}, {X: rc.endHours(), Y: float64(rc.BudgetBytes) / (1 << 30)}})
	if err != nil {
		return Section{}, err
	}
	bl.Color = color.Black
	bl.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
	p.Add(bl)
	p.Legend.Add("budget", bl)
	ch, err := svgPlot(p, 26, 10)
	if err != nil {
		return Section{}, err
	}
	s.Charts = append(s.Charts, ch)
	return s, nil
}

func (rc *ResidencyComparison) endHours() float64 {
	var e float64
	for _, r := range rc.Results {
		if n := len(r.Series); n > 0 {
			e = math.Max(e, r.Series[n-1].TimeS/3600)
		}
	}
	return math.Max(e, 1e-3)
}

// tableSection parses a "paragraph, blank line, Markdown table" block.
func tableSection(heading, md string) Section {
	lines := slices.DeleteFunc(bytesLines(md), func(s string) bool { return s == "" })
	s := Section{Heading: heading, Intro: lines[0]}
	for i, l := range lines[1:] {
		cells := splitRow(l)
		switch i {
		case 0:
			s.Header = cells
		case 1:
		default:
			s.Rows = append(s.Rows, cells)
		}
	}
	return s
}

// AutoBudgetModels sizes the residency budget to half the trace's mean
// working set — distinct models requested per 10-minute window, over
// windows with any request — and at least 4 models, so that the budget
// binds on every trace without making it hopeless.
func AutoBudgetModels(tr *Trace) float64 {
	seen := map[int32]bool{}
	var win time.Duration = -1
	var sum, n float64
	for _, r := range tr.Requests {
		w := r.At / (10 * time.Minute)
		if w != win {
			if len(seen) > 0 {
				sum += float64(len(seen))
				n++
			}
			clear(seen)
			win = w
		}
		seen[r.Model] = true
	}
	sum += float64(len(seen))
	n++
	return math.Max(4, math.Round(sum/n/2))
}
