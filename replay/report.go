package replay

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"html/template"
	"image/color"
	"io"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Row is one line of the comparison table, derived from a Result.
type Row struct {
	Policy, Setting string
	GPUHours        float64
	Cost            float64
	SLOPercent      float64
	MeetsSLO        bool
	P50, P95, P99   float64
	EventsPerHour   float64
	ColdStarts      int
	CostPer1kMet    float64
	RatioToLB       float64
}

// Rows turns the best results into table rows, plus the lower bound.
func (c *Comparison) Rows() []Row {
	var rows []Row
	hours := c.DurationS / 3600
	for _, r := range c.Best {
		gh := r.GPUHours(c.Pool.GPUsPerReplica)
		row := Row{
			Policy: r.Policy, Setting: r.Setting, GPUHours: gh, Cost: gh * c.Pool.PricePerGPUHour,
			SLOPercent: 100 * r.Attainment(), MeetsSLO: r.MeetsSLO, P50: r.WaitP50, P95: r.WaitP95, P99: r.WaitP99,
			ColdStarts: r.ColdStarts, CostPer1kMet: math.Inf(1), RatioToLB: gh / c.LowerBoundGPUHours,
		}
		if hours > 0 {
			row.EventsPerHour = float64(r.ScaleEvents) / hours
		}
		if r.SLOMet > 0 {
			row.CostPer1kMet = row.Cost / r.SLOMet * 1000
		}
		rows = append(rows, row)
	}
	lb := c.LowerBoundGPUHours
	rows = append(rows, Row{Policy: "lower bound", Setting: "Σ service ÷ slots", GPUHours: lb, Cost: lb * c.Pool.PricePerGPUHour, SLOPercent: math.NaN(), P50: math.NaN(), P95: math.NaN(), P99: math.NaN(), EventsPerHour: math.NaN(), ColdStarts: -1, CostPer1kMet: lb * c.Pool.PricePerGPUHour / c.Requests * 1000, RatioToLB: 1})
	return rows
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
	case math.IsInf(v, 1) || v > 1e6:
		return "∞"
	case v < 1:
		return strconv.FormatFloat(v*1000, 'f', 0, 64) + "ms"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + "s"
}

// ComparisonLegend explains the comparison table's marks and columns.
// WriteTable prints it under the table; the HTML report shows it under its
// table.
const ComparisonLegend = "Legend: ✗ after SLO % = misses the SLO target (too few requests waited ≤ the SLO). " +
	"× LB = GPU-hours ÷ the lower bound (the \"lower bound\" row: Σ service time ÷ slots, what perfect instant scaling would bill; no policy reaches 1.00). " +
	"$/1k SLO-met = cost per 1,000 requests that met the SLO. " +
	"inferscale runs its defaults; inferscale (tuned) is its cheapest targetUtilization × activityTarget setting that meets the SLO on this trace; " +
	"each swept baseline shows its cheapest setting that meets the SLO (or, when none does, its highest SLO %)."

// WriteTable writes the comparison as a Markdown table preceded by a
// one-paragraph header and followed by ComparisonLegend. The bytes depend
// only on the inputs and the seed.
func (c *Comparison) WriteTable(w io.Writer) error {
	return c.writeTable(w, true)
}

// writeTable is WriteTable, with or without the legend (Section puts it
// under the HTML table instead).
func (c *Comparison) writeTable(w io.Writer, legend bool) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "Trace %s: %s requests over %.1f h, %s mode. Pool: %d slots/replica, cold start %s, SLO queue wait ≤ %s for %s%% of requests, $%.2f/GPU-hour.",
		c.Trace, fnum(c.Requests, 0), c.DurationS/3600, c.Mode, c.Pool.Slots, coldDesc(c.Pool), c.Pool.SLO, fnum(100*c.Pool.SLOTarget, 1), c.Pool.PricePerGPUHour)
	if c.MuRPS > 0 {
		fmt.Fprintf(&b, " Probed replicaThroughput μ = %.4g req/s (on %d replica(s)).", c.MuRPS, c.Pool.ProbeReplicas)
	}
	if c.Note != "" {
		b.WriteString(" " + c.Note)
	}
	b.WriteString("\n\n")
	b.WriteString("| policy | setting | GPU-h | cost $ | SLO % | wait p50 | p95 | p99 | scale ev/h | cold starts | $/1k SLO-met | × LB |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range c.Rows() {
		slo := fnum(r.SLOPercent, 2)
		if !math.IsNaN(r.SLOPercent) && !r.MeetsSLO {
			slo += " ✗"
		}
		cs := strconv.Itoa(r.ColdStarts)
		if r.ColdStarts < 0 {
			cs = "–"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.Policy, r.Setting, fnum(r.GPUHours, 2), fnum(r.Cost, 2), slo, fwait(r.P50), fwait(r.P95), fwait(r.P99),
			fnum(r.EventsPerHour, 1), cs, fnum(r.CostPer1kMet, 4), fnum(r.RatioToLB, 2))
	}
	if legend {
		b.WriteString("\n" + ComparisonLegend + "\n")
	}
	_, err := w.Write(b.Bytes())
	return err
}

func coldDesc(p PoolConfig) string {
	if len(p.ColdStartSamples) > 0 {
		return fmt.Sprintf("GenTD26 empirical (%d samples, p50 %s)", len(p.ColdStartSamples), quantileDur(p.ColdStartSamples, 0.5).Round(100_000_000))
	}
	return p.ColdStart.String()
}

// WriteCSV writes the time series of every best result: policy, setting,
// time_s, arrivals_rps, queue, ready, replicas (spec), live (billed),
// busy_fraction.
func (c *Comparison) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"policy", "setting", "time_s", "arrivals_rps", "queue", "ready", "replicas", "live", "busy_fraction"}); err != nil {
		return err
	}
	for _, r := range c.Best {
		for _, s := range r.Series {
			rec := []string{r.Policy, r.Setting, fnum(s.TimeS, 0), fnum(s.Arrivals, 4), fnum(s.Queue, 1),
				strconv.Itoa(s.Ready), strconv.Itoa(s.Replicas), strconv.Itoa(s.Live), fnum(s.BusyFrac, 4)}
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

// demandPlots draws, per policy, demand (the replicas the arrivals' work
// needs at full use, work ÷ slots) and the policy's billed replicas over
// time: one small chart each, so that one policy's spikes do not flatten
// the others.
func (c *Comparison) demandPlots() ([]template.HTML, error) {
	var out []template.HTML
	for i := range c.Best {
		p, err := c.demandPlot(i)
		if err != nil {
			return nil, err
		}
		if p == nil {
			continue
		}
		svg, err := svgPlot(p, 26, 7)
		if err != nil {
			return nil, err
		}
		out = append(out, svg)
	}
	return out, nil
}

func (c *Comparison) demandPlot(i int) (*plot.Plot, error) {
	r := c.Best[i]
	if len(r.Series) == 0 {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s (%s): replicas vs demand", r.Policy, r.Setting)
	p.X.Label.Text = "hours"
	p.Y.Label.Text = "replicas"
	p.Legend.Top = true
	p.Legend.Left = true
	meanSvc := c.LowerBoundGPUHours * 3600 / float64(c.Pool.GPUsPerReplica) * float64(c.Pool.Slots) / c.Requests
	dem := make(plotter.XYs, len(r.Series))
	rep := make(plotter.XYs, len(r.Series))
	for k, s := range r.Series {
		dem[k] = plotter.XY{X: s.TimeS / 3600, Y: s.Arrivals * meanSvc / float64(c.Pool.Slots)}
		rep[k] = plotter.XY{X: s.TimeS / 3600, Y: float64(s.Live)}
	}
	dl, err := plotter.NewLine(dem)
	if err != nil {
		return nil, err
	}
	dl.Color = color.Black
	dl.Width = vg.Points(0.8)
	dl.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
	rl, err := plotter.NewLine(rep)
	if err != nil {
		return nil, err
	}
	rl.Color = palette[i%len(palette)]
	rl.Width = vg.Points(1.2)
	p.Add(dl, rl)
	p.Legend.Add("demand (work ÷ slots)", dl)
	p.Legend.Add("billed replicas", rl)
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
	ch, err := c.demandPlots()
	if err != nil {
		return Section{}, err
	}
	s.Charts = append(s.Charts, ch...)
	return s, nil
}

func bytesLines(s string) []string { return strings.Split(strings.TrimSpace(s), "\n") }

func splitRow(l string) []string { return strings.Split(strings.Trim(l, "| "), " | ") }

// WriteHTML writes a self-contained report (inline SVG, no scripts, no
// external resources).
func WriteHTML(w io.Writer, title, footer string, sections []Section) error {
	return reportTmpl.Execute(w, struct {
		Title    string
		Footer   string
		Sections []Section
	}{title, footer, sections})
}
