package replay

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Instances is Alibaba's cluster-trace-gpu-v2025 DLRM instance lifecycle
// trace (Yang et al., Prism, NSDI '25; research use only): one row per pod.
// It has no requests, so no queue wait, SLO or demand can be derived from
// it; replay reports each service's recorded replica trajectory, the
// "recorded production autoscaler", and what it cost in GPU-hours.
type Instances struct {
	// EndS is the trace's last timestamp, seconds.
	EndS float64
	Apps []AppTrajectory
	// SkippedCN counts the CN (CPU node) instance rows left out: only HN
	// (GPU) instances are replica trajectories of a GPU pool.
	SkippedCN int
}

// Instance roles of the DLRM trace (its README: HN = heterogeneous GPU node
// instance, CN = CPU node instance).
const (
	RoleHN = "HN"
	RoleCN = "CN"
)

// AppTrajectory is one service's GPU (role HN) replicas over time.
type AppTrajectory struct {
	App string
	// GPUSeconds is Σ gpu_request × lifetime inside the trace window.
	GPUSeconds float64
	// Peak, Min and Mean are replica counts over the window.
	Peak, Min int
	Mean      float64
	// Changes is the number of creation and deletion events inside the
	// window.
	Changes int
	// Steps is the trajectory: at TimeS the count becomes Replicas.
	Steps []Step
}

// Step is one point of a replica trajectory.
type Step struct {
	TimeS    float64
	Replicas int
}

// ReadInstances reads disaggregated_DLRM_trace.csv: instance_sn, role
// (HN = GPU instance, CN = CPU instance), app_name, gpu_request,
// creation_time and deletion_time (seconds since trace start; empty means
// before the start / after the end). Only HN rows count; CN rows are
// counted in SkippedCN. Any other role is a *ParseError naming the line,
// the column and the accepted values; a trace without HN rows is
// ErrEmptyTrace.
func ReadInstances(r io.Reader) (*Instances, error) {
	t, err := newTable(r, "instance_sn", "role", "app_name", "gpu_request", "creation_time", "deletion_time")
	if err != nil {
		return nil, err
	}
	type ev struct {
		t     float64
		delta int
	}
	events := map[string][]ev{}
	gpus := map[string]float64{}
	var rows []struct {
		app        string
		start, end float64
		g          float64
	}
	end := 0.0
	skippedCN := 0
	for {
		if err := t.next(); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		switch role := t.str("role"); role {
		case RoleHN:
		case RoleCN:
			skippedCN++
			continue
		default:
			return nil, t.fail("role", role, "want %s (GPU instance) or %s (CPU instance)", RoleHN, RoleCN)
		}
		app := t.str("app_name")
		if app == "" {
			return nil, t.fail("app_name", app, "want a service name")
		}
		g, err := t.floatCol("gpu_request", false, 0, 1024)
		if err != nil {
			return nil, err
		}
		c, err := t.floatCol("creation_time", true, 0, 1e9)
		if err != nil {
			return nil, err
		}
		d, err := t.floatCol("deletion_time", true, 0, 1e9)
		if err != nil {
			return nil, err
		}
		if c < 0 {
			c = 0
		}
		if d >= 0 && d < c {
			return nil, t.fail("deletion_time", t.str("deletion_time"), "want ≥ creation_time %g", c)
		}
		end = math.Max(end, math.Max(c, d))
		rows = append(rows, struct {
			app        string
			start, end float64
			g          float64
		}{app, c, d, g})
	}
	for _, r := range rows {
		e := r.end
		if e < 0 {
			e = end
		}
		gpus[r.app] += r.g * (e - r.start)
		events[r.app] = append(events[r.app], ev{r.start, +1})
		if r.end >= 0 {
			events[r.app] = append(events[r.app], ev{r.end, -1})
		}
	}
	if len(rows) == 0 {
		if skippedCN > 0 {
			return nil, fmt.Errorf("%w: no %s (GPU instance) rows; all %d rows are %s (CPU instance) rows", ErrEmptyTrace, RoleHN, skippedCN, RoleCN)
		}
		return nil, fmt.Errorf("%w: the file has a header and no rows", ErrEmptyTrace)
	}
	in := &Instances{EndS: end, SkippedCN: skippedCN}
	for app, evs := range events {
		slices.SortStableFunc(evs, func(a, b ev) int { return cmp.Compare(a.t, b.t) })
		at := AppTrajectory{App: app, GPUSeconds: gpus[app], Min: math.MaxInt}
		n, last := 0, 0.0
		var area float64
		for i, e := range evs {
			area += float64(n) * (e.t - last)
			n += e.delta
			last = e.t
			if e.t > 0 {
				at.Changes++
			}
			if i+1 < len(evs) && evs[i+1].t == e.t {
				continue
			}
			at.Steps = append(at.Steps, Step{TimeS: e.t, Replicas: n})
			at.Peak = max(at.Peak, n)
			if e.t > 0 || i+1 == len(evs) {
				at.Min = min(at.Min, n)
			}
		}
		area += float64(n) * (end - last)
		if end > 0 {
			at.Mean = area / end
		}
		if at.Min == math.MaxInt {
			at.Min = n
		}
		in.Apps = append(in.Apps, at)
	}
	slices.SortFunc(in.Apps, func(a, b AppTrajectory) int {
		if c := cmp.Compare(b.GPUSeconds, a.GPUSeconds); c != 0 {
			return c
		}
		return cmp.Compare(a.App, b.App)
	})
	return in, nil
}

// WriteTable reports the recorded trajectories of the top apps by GPU-hours
// and the total: GPU-hours used, what static provisioning at each app's
// peak would have used, mean and peak replicas, replica changes per hour.
func (in *Instances) WriteTable(w io.Writer, top int) error {
	var b bytes.Buffer
	hours := in.EndS / 3600
	fmt.Fprintf(&b, "Recorded production autoscaler (Alibaba DLRM instance trace, %d GPU services, %.1f days). The trace has instance lifecycles but no requests: queue wait, SLO attainment and the policy comparison cannot be computed from it, so replay reports the recorded replica trajectories only.", len(in.Apps), hours/24)
	if in.SkippedCN > 0 {
		fmt.Fprintf(&b, " %d %s (CPU instance) rows left out: only %s (GPU instance) rows are counted.", in.SkippedCN, RoleCN, RoleHN)
	}
	b.WriteString("\n\n")
	b.WriteString("| app | GPU-h recorded | GPU-h static at peak | recorded ÷ static | mean replicas | min | peak | changes/h |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	var tot, totPeak float64
	for i, a := range in.Apps {
		gh := a.GPUSeconds / 3600
		per := 0.0
		if a.Mean > 0 {
			per = gh / (a.Mean * hours)
		}
		peakH := float64(a.Peak) * hours * per
		tot += gh
		totPeak += peakH
		if i < top {
			ratio := math.NaN()
			if peakH > 0 {
				ratio = gh / peakH
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %d | %d | %s |\n", mdCell(a.App), fnum(gh, 0), fnum(peakH, 0), fnum(ratio, 2), fnum(a.Mean, 1), a.Min, a.Peak, fnum(float64(a.Changes)/hours, 2))
		}
	}
	fmt.Fprintf(&b, "| all %d apps | %s | %s | %s | | | | |\n", len(in.Apps), fnum(tot, 0), fnum(totPeak, 0), fnum(tot/totPeak, 2))
	_, err := w.Write(b.Bytes())
	return err
}

// mdCell makes s safe in one Markdown table cell: a name with a control
// character (a newline ends the row) is written quoted as Go writes it
// (strconv.Quote), and | is written \| (splitRow reads it back).
func mdCell(s string) string {
	if strings.ContainsFunc(s, unicode.IsControl) {
		s = strconv.Quote(s)
	}
	return strings.ReplaceAll(s, "|", `\|`)
}
