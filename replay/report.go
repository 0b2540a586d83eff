package replay

import (
	"bytes"
	"cmp"
	"encoding/csv"
	"fmt"
	"html/template"
	"image/color"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Row is one line of the comparison table, derived from a Result (or the
// bound).
type Row struct {
	Policy, SettingSet, Setting string
	GPUHours                    float64
	Cost                        float64
	SLOPercent                  float64
	WorstHourSLOPercent         float64
	MeetsSLO                    bool
	P50, P95, P99               float64
	EventsPerHour               float64
	ColdStarts                  int
	// RatioToOptimum is GPU-hours ÷ the optimum's (NaN when no optimum
	// meeting the SLO was found); RatioToBound ÷ the bound.
	RatioToOptimum, RatioToBound float64
	// Unserved is Result.Unserved: requests the run stopped without
	// serving, whose work GPUHours does not include (0 for the bound).
	Unserved float64
}

// optimumGPUHours is the optimum's GPU-hours when it meets the SLO, else NaN.
func (c *Comparison) optimumGPUHours() float64 {
	if c.Optimum.Policy == "" || !c.Optimum.MeetsSLO {
		return math.NaN()
	}
	return c.Optimum.GPUHours(c.Pool.GPUsPerReplica)
}

func (c *Comparison) row(r Result) Row {
	hours := c.DurationS / 3600
	gh := r.GPUHours(c.Pool.GPUsPerReplica)
	row := Row{
		Policy: r.Policy, SettingSet: r.SettingSet, Setting: r.Setting, GPUHours: gh, Cost: gh * c.Pool.PricePerGPUHour,
		SLOPercent: 100 * r.Attainment(), WorstHourSLOPercent: 100 * r.WorstHourAttainment, MeetsSLO: r.MeetsSLO,
		P50: r.WaitP50, P95: r.WaitP95, P99: r.WaitP99, ColdStarts: r.ColdStarts,
		RatioToOptimum: gh / c.optimumGPUHours(), RatioToBound: gh / c.BoundGPUHours(), Unserved: r.Unserved,
	}
	if hours > 0 {
		row.EventsPerHour = float64(r.ScaleEvents) / hours
	}
	return row
}

// Rows turns the policy results into table rows, then the optimum and the
// bound.
func (c *Comparison) Rows() []Row {
	var rows []Row
	for _, r := range c.Best {
		rows = append(rows, c.row(r))
	}
	if c.Optimum.Policy != "" {
		rows = append(rows, c.row(c.Optimum))
	}
	lb := c.BoundGPUHours()
	setting := "Σ service ÷ slots"
	switch {
	case c.Bound.Unreachable:
		setting = "Σ service ÷ slots (the SLO cannot be met within the pool's bounds)"
	case c.Bound.WindowS > 0:
		setting = fmt.Sprintf("cold start billed, whole replicas, SLO quantile; windows %gs", c.Bound.WindowS)
	}
	rows = append(rows, Row{Policy: "bound", SettingSet: SetBound, Setting: setting, GPUHours: lb, Cost: lb * c.Pool.PricePerGPUHour,
		SLOPercent: math.NaN(), WorstHourSLOPercent: math.NaN(), P50: math.NaN(), P95: math.NaN(), P99: math.NaN(), EventsPerHour: math.NaN(),
		ColdStarts: -1, RatioToOptimum: lb / c.optimumGPUHours(), RatioToBound: 1})
	return rows
}

// Headline is the report's first sentence: who is cheapest among the
// policies meeting the SLO with each setting set, and by how much against
// the runner-up and the optimum.
func (c *Comparison) Headline() string { return headlineOf(c, c.Rows()) }

// headlineOf is Headline over the given rows.
func headlineOf(c *Comparison, rows []Row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "At equal SLO (queue wait ≤ %s for %s%% of requests)", c.Pool.SLO, fnum(100*c.Pool.SLOTarget, 1))
	for i, set := range []string{SetPublished, SetTuned} {
		var ok []Row
		fails := 0
		for _, r := range rows {
			if r.SettingSet != set {
				continue
			}
			if r.MeetsSLO {
				ok = append(ok, r)
			} else {
				fails++
			}
		}
		slices.SortStableFunc(ok, func(a, b Row) int { return cmp.Compare(a.GPUHours, b.GPUHours) })
		if i > 0 {
			b.WriteString("; with")
		} else {
			b.WriteString(", with")
		}
		fmt.Fprintf(&b, " %s settings ", set)
		if len(ok) == 0 {
			b.WriteString("no policy meets it")
			continue
		}
		// The winner's own figures come right after its name, so that no ratio can be
		// read as the runner-up's.
		win := fmt.Sprintf("%s GPU-h", fnum(ok[0].GPUHours, 2))
		if !math.IsNaN(ok[0].RatioToOptimum) {
			win += fmt.Sprintf(", %s× optimum", fnum(ok[0].RatioToOptimum, 2))
		}
		if len(ok) == 1 {
			fmt.Fprintf(&b, "only %s meets it (%s)", ok[0].Policy, win)
		} else {
			fmt.Fprintf(&b, "%s wins (%s), %s%% less than the runner-up %s (%s GPU-h)",
				ok[0].Policy, win, fnum(100*(1-ok[0].GPUHours/ok[1].GPUHours), 0), ok[1].Policy, fnum(ok[1].GPUHours, 2))
		}
		if fails > 0 {
			fmt.Fprintf(&b, "; %d of %d policies miss the SLO", fails, fails+len(ok))
		}
	}
	b.WriteString(".")
	return b.String()
}

func fnum(v float64, prec int) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case math.IsInf(v, 1):
		return "∞"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

func fwait(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case math.IsInf(v, 1):
		// Past the wait histogram's top edge (waitHist.quantile): requests
		// never served, or served after more than 18.6 h.
		return ">" + strconv.FormatFloat(histTopS, 'f', 1, 64) + "s"
	case v < 1:
		return strconv.FormatFloat(v*1000, 'f', 0, 64) + "ms"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + "s"
}

// ComparisonLegend explains the comparison table's marks and columns.
// WriteTable prints it under the table; the HTML report shows it under its
// table.
const ComparisonLegend = "Legend: set = published (each system's documented default), tuned (one setting per family for every shared trace, chosen by `go run ./cmd/replay tune`), " +
	"hindsight (the family's cheapest setting meeting the SLO on this trace, or, when no setting of the family meets it, the one with the highest SLO % (marked ✗): a reference no operator can pick in advance, never the comparison), " +
	"optimum (the cheapest offline plan found with the whole trace known, replayed through the same simulator) and bound (a proven lower bound on any schedule; docs/replay.md). " +
	"✗ after SLO % = misses the SLO target. worst h = SLO % of the worst hour. " +
	"× opt = GPU-hours ÷ the optimum's; × bound = ÷ the bound. Every run starts from the same pool (--initial-replicas)."

// WriteTable writes the comparison as a Markdown table preceded by the
// headline and a one-paragraph header and followed by ComparisonLegend.
// The bytes depend only on the inputs and the seed.
func (c *Comparison) WriteTable(w io.Writer) error {
	return c.writeTable(w, true)
}

// writeTable is WriteTable, with or without the legend (Section puts it
// under the HTML table instead).
func (c *Comparison) writeTable(w io.Writer, legend bool) error {
	var b bytes.Buffer
	if legend {
		b.WriteString(c.Headline() + "\n\n")
	}
	fmt.Fprintf(&b, "Trace %s: %s requests over %.1f h, %s mode. Pool: %d slots/replica, %d ready at start, cold start %s, SLO queue wait ≤ %s for %s%% of requests, $%.2f/GPU-hour.",
		c.Trace, fnum(c.Requests, 0), c.DurationS/3600, c.Mode, c.Pool.Slots, c.Pool.InitialReplicas, coldDesc(c.Pool), c.Pool.SLO, fnum(100*c.Pool.SLOTarget, 1), c.Pool.PricePerGPUHour)
	if c.MuRPS > 0 {
		fmt.Fprintf(&b, " Probed replicaThroughput μ = %.4g req/s (on %d replica(s)).", c.MuRPS, c.Pool.ProbeReplicas)
	}
	if g := c.Grid.String(); g != "" {
		b.WriteString(" " + g)
	}
	if c.Note != "" {
		b.WriteString(" " + c.Note)
	}
	if u := c.UnreachableNote(); u != "" {
		b.WriteString(" " + u)
	}
	if gap := c.Gap(); !math.IsNaN(gap) {
		fmt.Fprintf(&b, " Optimum ÷ bound = %s (gap %s%%; %d plans replayed).", fnum(1+gap, 3), fnum(100*gap, 1), c.OptimumRuns)
	}
	if n := c.OptimumNote(); n != "" {
		b.WriteString(" " + n)
	}
	if n := c.CutShortNote(); n != "" {
		b.WriteString(" " + n)
	}
	b.WriteString("\n\n")
	b.WriteString("| policy | set | setting | GPU-h | cost $ | SLO % | worst h % | wait p50 | p95 | p99 | scale ev/h | cold starts | × opt | × bound |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range c.Rows() {
		slo := fnum(r.SLOPercent, 2)
		if !math.IsNaN(r.SLOPercent) && !r.MeetsSLO {
			slo += " ✗"
		}
		cs := strconv.Itoa(r.ColdStarts)
		if r.ColdStarts < 0 {
			cs = "–"
		}
		gh := fnum(r.GPUHours, 2)
		if r.Unserved > 0 {
			gh += " " + cutShortMark
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.Policy, r.SettingSet, r.Setting, gh, fnum(r.Cost, 2), slo, fnum(r.WorstHourSLOPercent, 2), fwait(r.P50), fwait(r.P95), fwait(r.P99),
			fnum(r.EventsPerHour, 1), cs, fnum(r.RatioToOptimum, 2), fnum(r.RatioToBound, 2))
	}
	if legend {
		b.WriteString("\n" + ComparisonLegend + "\n")
	}
	_, err := w.Write(b.Bytes())
	return err
}

// UnreachableNote says, when the bound found that no schedule within the
// pool's bounds meets the SLO (Bound.Unreachable), by how much, and that
// the bound is then Σ service ÷ slots; empty otherwise.
func (c *Comparison) UnreachableNote() string {
	if c.Bound == nil || !c.Bound.Unreachable {
		return ""
	}
	return fmt.Sprintf("The SLO cannot be met: with at most %d replicas (%d ready at start, none more ready before the first cold start ends) at least %s of the %s requests wait longer than %s, over the %s the SLO allows; no policy or plan can meet it, and the bound is Σ service ÷ slots.",
		c.Pool.MaxReplicas, c.Pool.InitialReplicas, fnum(c.Bound.MinMisses, 0), fnum(c.Requests, 0), c.Pool.SLO, fnum(c.Bound.MissBudget, 0))
}

// cutShortMark follows the GPU-hours of a row whose run stopped with
// requests unserved (Result.Unserved).
const cutShortMark = "‡"

// CutShortNote names, when any row's run stopped with requests unserved
// (Result.Unserved: still queued 6 h after the last arrival, or a binned
// backlog with no ready replica), those rows and how many requests each
// left, and says that their GPU-hours exclude that work and can be below
// the bound; empty otherwise.
func (c *Comparison) CutShortNote() string {
	var cut []string
	for _, r := range c.Rows() {
		if r.Unserved > 0 {
			cut = append(cut, fmt.Sprintf("%s %s (%s of %s requests)", r.Policy, r.SettingSet, fnum(math.Ceil(r.Unserved), 0), fnum(c.Requests, 0)))
		}
	}
	if len(cut) == 0 {
		return ""
	}
	return fmt.Sprintf("Cut short (%s after GPU-h): %s stopped %s after the last arrival with requests never served; they count as missing the SLO and their work is not billed, so these GPU-hours can be below the bound, which bounds schedules that serve every request; such a run does not meet the SLO.",
		cutShortMark, strings.Join(cut, ", "), fnum(defaultMaxOverrunS/3600, 0)+" h")
}

// Gap is optimum ÷ bound − 1 (NaN without an optimum meeting the SLO).
func (c *Comparison) Gap() float64 {
	return c.optimumGPUHours()/c.BoundGPUHours() - 1
}

func coldDesc(p PoolConfig) string {
	if len(p.ColdStartSamples) > 0 {
		return fmt.Sprintf("GenTD26 empirical (%d samples, p50 %s)", len(p.ColdStartSamples), quantileDur(p.ColdStartSamples, 0.5).Round(100_000_000))
	}
	return p.ColdStart.String()
}

// WriteCSV writes the time series of every row and the optimum: policy,
// set, setting, time_s, arrivals_rps, queue, ready, replicas (spec), live
// (billed), busy_fraction, max_wait_s (longest wait of requests started in
// the step), misses (requests of the step over the SLO).
func (c *Comparison) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"policy", "set", "setting", "time_s", "arrivals_rps", "queue", "ready", "replicas", "live", "busy_fraction", "max_wait_s", "misses"}); err != nil {
		return err
	}
	for _, r := range c.charted(false) {
		for _, s := range r.Series {
			rec := []string{r.Policy, r.SettingSet, r.Setting, fnum(s.TimeS, 0), fnum(s.Arrivals, 4), fnum(s.Queue, 1),
				strconv.Itoa(s.Ready), strconv.Itoa(s.Replicas), strconv.Itoa(s.Live), fnum(s.BusyFrac, 4), fnum(s.MaxWait, 3), fnum(s.Misses, 0)}
			if err := cw.Write(rec); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xd6, 0x27, 0x28, 0xff}, {0x2c, 0xa0, 0x2c, 0xff},
	{0xff, 0x7f, 0x0e, 0xff}, {0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff},
	{0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff},
}

// svgPlot renders p as an inline SVG element (the XML prolog removed).
func svgPlot(p *plot.Plot, wCm, hCm float64) (template.HTML, error) {
	c := vgsvg.New(vg.Length(wCm)*vg.Centimeter, vg.Length(hCm)*vg.Centimeter)
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return "", err
	}
	s := buf.String()
	if i := strings.Index(s, "<svg"); i >= 0 {
		s = s[i:]
	}
	return template.HTML(s), nil //nolint:gosec // generated by gonum/plot from numbers only
}

// charted returns the runs the charts draw: with publishedOnly, the
// published rows and the optimum; otherwise every row and the optimum.
func (c *Comparison) charted(publishedOnly bool) []Result {
	var out []Result
	for _, r := range c.Best {
		if !publishedOnly || r.SettingSet == SetPublished {
			out = append(out, r)
		}
	}
	if c.Optimum.Policy != "" {
		out = append(out, c.Optimum)
	}
	return out
}

// replicaPlot draws billed replicas over time for the published rows and
// the optimum on one axis, as steps, with demand (work arriving per second
// ÷ slots, dashed).
func (c *Comparison) replicaPlot() (*plot.Plot, error) {
	runs := c.charted(true)
	if len(runs) == 0 || len(runs[0].Series) == 0 {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = "Billed replicas (published settings and the optimum) and demand"
	p.X.Label.Text = "hours"
	p.Y.Label.Text = "replicas"
	p.Legend.Top, p.Legend.Left = true, true
	meanSvc := c.Bound.WorkReplicaSeconds * float64(c.Pool.Slots) / c.Requests
	dem := make(plotter.XYs, len(runs[0].Series))
	for k, s := range runs[0].Series {
		dem[k] = plotter.XY{X: s.TimeS / 3600, Y: s.Arrivals * meanSvc / float64(c.Pool.Slots)}
	}
	dl, err := plotter.NewLine(dem)
	if err != nil {
		return nil, err
	}
	dl.Color, dl.Width = color.Black, vg.Points(0.8)
	dl.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
	dl.StepStyle = plotter.PreStep
	p.Add(dl)
	p.Legend.Add("demand (work ÷ slots)", dl)
	var peaks []float64
	for i, r := range runs {
		xy := make(plotter.XYs, len(r.Series))
		peak := 0.0
		for k, s := range r.Series {
			xy[k] = plotter.XY{X: s.TimeS / 3600, Y: float64(s.Live)}
			peak = math.Max(peak, float64(s.Live))
		}
		peaks = append(peaks, peak)
		l, err := plotter.NewLine(xy)
		if err != nil {
			return nil, err
		}
		l.Color, l.Width, l.StepStyle = palette[i%len(palette)], vg.Points(1.1), plotter.PreStep
		p.Add(l)
		p.Legend.Add(r.Policy, l)
	}
	// One policy far above the rest would flatten them: clip the axis at
	// 1.2 × the second-highest peak when the highest is over twice it.
	if len(peaks) > 1 {
		s := slices.Clone(peaks)
		slices.Sort(s)
		if top, second := s[len(s)-1], s[len(s)-2]; second > 0 && top > 2*second {
			p.Y.Min, p.Y.Max = 0, 1.2*second
			p.Title.Text += fmt.Sprintf(" (axis clipped at %.0f; peak %.0f)", 1.2*second, top)
		}
	}
	p.Legend.Left = false
	return p, nil
}

// waitPlot draws each published row's and the optimum's longest queue wait
// per step (log scale) with the SLO as a red line; steps with misses are
// marked with a cross.
func (c *Comparison) waitPlot() (*plot.Plot, error) {
	runs := c.charted(true)
	if len(runs) == 0 || len(runs[0].Series) == 0 {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = "Longest queue wait per step (× = step with requests over the SLO)"
	p.X.Label.Text = "hours"
	p.Y.Label.Text = "seconds"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	const floor = 1e-3
	end := runs[0].Series[len(runs[0].Series)-1].TimeS / 3600
	slo, err := plotter.NewLine(plotter.XYs{{X: 0, Y: c.Pool.SLO.Seconds()}, {X: end, Y: c.Pool.SLO.Seconds()}})
	if err != nil {
		return nil, err
	}
	slo.Color, slo.Width = color.RGBA{0xd0, 0, 0, 0xff}, vg.Points(1.5)
	p.Add(slo)
	p.Legend.Add("SLO "+c.Pool.SLO.String(), slo)
	for i, r := range runs {
		xy := make(plotter.XYs, len(r.Series))
		var miss plotter.XYs
		for k, s := range r.Series {
			y := math.Max(floor, math.Min(s.MaxWait, 1e5))
			xy[k] = plotter.XY{X: s.TimeS / 3600, Y: y}
			if s.Misses > 0 {
				miss = append(miss, xy[k])
			}
		}
		col := palette[i%len(palette)]
		l, err := plotter.NewLine(xy)
		if err != nil {
			return nil, err
		}
		l.Color, l.Width, l.StepStyle = col, vg.Points(0.8), plotter.PreStep
		p.Add(l)
		p.Legend.Add(r.Policy, l)
		if len(miss) > 0 {
			sc, err := plotter.NewScatter(miss)
			if err != nil {
				return nil, err
			}
			sc.Color, sc.Shape, sc.Radius = col, draw.CrossGlyph{}, vg.Points(2.5)
			p.Add(sc)
		}
	}
	return p, nil
}

var reportTmpl = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>inferscale replay: {{.Title}}</title>
<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}
td:first-child,td:nth-child(2),th{text-align:left}.miss{color:#b00}.legend{font-size:12px;color:#555}svg{max-width:100%;height:auto}</style></head>
<body><h1>inferscale replay</h1>
{{range .Sections}}<h2>{{.Heading}}</h2><p>{{.Intro}}</p>
{{if .Rows}}<table><tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>{{end}}</table>{{end}}
{{if .Legend}}<p class="legend">{{.Legend}}</p>{{end}}
{{range .Charts}}<div>{{.}}</div>{{end}}{{end}}
<p>{{.Footer}}</p></body></html>
`))

// Section is one part of the HTML report.
type Section struct {
	Heading string
	Intro   string
	Header  []string
	Rows    [][]string
	// Legend, when set, is shown under the table.
	Legend string
	Charts []template.HTML
}

// Section renders the comparison for the HTML report.
func (c *Comparison) Section() (Section, error) {
	var tb bytes.Buffer
	if err := c.writeTable(&tb, false); err != nil {
		return Section{}, err
	}
	s := tableSection("Autoscaling: "+c.Trace, tb.String())
	s.Legend = ComparisonLegend
	s.Intro = c.Headline() + " " + s.Intro
	for _, mk := range []func() (*plot.Plot, error){c.replicaPlot, c.waitPlot} {
		p, err := mk()
		if err != nil {
			return Section{}, err
		}
		if p == nil {
			continue
		}
		svg, err := svgPlot(p, 26, 9)
		if err != nil {
			return Section{}, err
		}
		s.Charts = append(s.Charts, svg)
	}
	return s, nil
}

func bytesLines(s string) []string { return strings.Split(strings.TrimSpace(s), "\n") }

// splitRow splits a Markdown table row into its cells; a cell's \| (mdCell)
// is read back as |.
func splitRow(l string) []string {
	cells := strings.Split(strings.Trim(l, "| "), " | ")
	for i, c := range cells {
		cells[i] = strings.ReplaceAll(c, `\|`, "|")
	}
	return cells
}

// WriteHTML writes a self-contained report (inline SVG, no scripts, no
// external resources).
func WriteHTML(w io.Writer, title, footer string, sections []Section) error {
	return reportTmpl.Execute(w, struct {
		Title    string
		Footer   string
		Sections []Section
	}{title, footer, sections})
}

// OptimumNote says why the table has no optimum row; empty when it has one.
// The search, when it runs, always keeps a plan (the best met, else the
// highest attainment), so an empty Optimum means it was skipped.
func (c *Comparison) OptimumNote() string {
	if c.Optimum.Policy != "" {
		return ""
	}
	return "No optimum row: the offline optimum search was skipped (--optimum=false)."
}
