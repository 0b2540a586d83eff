package replay

import "math"

// Summary is summary.json, the machine-readable result of one run
// (docs/replay.md, "summary.json"). Field names and meanings are stable.
type Summary struct {
	// Trace names the trace; Requests counts its requests.
	Trace    string  `json:"trace"`
	Requests float64 `json:"requests"`
	// SLO is the objective every row is judged by.
	SLO SummarySLO `json:"slo"`
	// Rows: per family its published and tuned rows (and hindsight
	// reference rows when run), then the optimum and the bound.
	Rows []SummaryRow `json:"rows"`
	// Residency holds the residency replay's rows on multi-model traces
	// (absent otherwise).
	Residency []ResidencySummaryRow `json:"residency,omitempty"`
	// SLOUnreachable is true when no schedule within the pool's bounds can
	// meet the SLO (Bound.Unreachable; the bound row is then Σ service ÷
	// slots) and absent otherwise; SLOUnreachableNote says by how much.
	SLOUnreachable     bool   `json:"sloUnreachable,omitempty"`
	SLOUnreachableNote string `json:"sloUnreachableNote,omitempty"`
	// OptimumNote says why Rows has no optimum row (the search was
	// skipped); absent when it has one.
	OptimumNote string `json:"optimumNote,omitempty"`
	// CutShortNote names the rows whose runs stopped with requests never
	// served (SummaryRow.UnservedRequests) and says what that does to
	// their GPU-hours; absent when none did.
	CutShortNote string `json:"cutShortNote,omitempty"`
}

// SummarySLO is the queue-wait objective: a request meets it when it waits
// at most WaitSeconds; Quantile of the requests must.
type SummarySLO struct {
	WaitSeconds float64 `json:"waitSeconds"`
	Quantile    float64 `json:"quantile"`
}

// SummaryRow is one row. Figures a row does not have (the bound's SLO,
// waits, cold starts and scale events) are null.
type SummaryRow struct {
	Policy string `json:"policy"`
	// SettingSet is "published", "tuned", "hindsight", "bound" or "optimum".
	SettingSet string `json:"settingSet"`
	// Setting describes the setting in words.
	Setting  string  `json:"setting"`
	GPUHours float64 `json:"gpuHours"`
	// Cost is GPUHours × the price per GPU-hour, dollars.
	Cost float64 `json:"cost"`
	// SLOPercent is the percentage of requests meeting the SLO wait;
	// WorstHourSLOPercent the same for the trace's worst hour.
	SLOPercent          *float64 `json:"sloPercent"`
	WorstHourSLOPercent *float64 `json:"worstHourSloPercent"`
	// WaitP99Seconds is the 99th percentile queue wait. When it lies past
	// the wait histogram's top edge, 2^26 ms = 67,108.9 s (requests never
	// served, or served after longer), it is that edge, a lower bound, and
	// WaitP99Overflow is true (the key is absent otherwise).
	WaitP99Seconds  *float64 `json:"waitP99Seconds"`
	WaitP99Overflow bool     `json:"waitP99Overflow,omitempty"`
	// ColdStarts counts replicas created; ScaleEventsPerHour changes of
	// the replica count per hour of trace.
	ColdStarts         *int     `json:"coldStarts"`
	ScaleEventsPerHour *float64 `json:"scaleEventsPerHour"`
	// UnservedRequests counts the requests the run stopped without
	// serving (Result.Unserved: still queued 6 h after the last arrival;
	// fractional in binned mode). They count as missing the SLO and their
	// work is not in GPUHours, which can then be below the bound row. The
	// key is absent when every request was served.
	UnservedRequests float64 `json:"unservedRequests,omitempty"`
}

func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// Summary builds summary.json's content from the table rows.
func (c *Comparison) Summary() Summary {
	s := Summary{Trace: c.Trace, Requests: c.Requests, SLO: SummarySLO{WaitSeconds: c.Pool.SLO.Seconds(), Quantile: c.Pool.SLOTarget}, Rows: []SummaryRow{},
		SLOUnreachable: c.Bound != nil && c.Bound.Unreachable, SLOUnreachableNote: c.UnreachableNote(),
		OptimumNote: c.OptimumNote(), CutShortNote: c.CutShortNote()}
	for _, r := range c.Rows() {
		row := SummaryRow{Policy: r.Policy, SettingSet: r.SettingSet, Setting: r.Setting, GPUHours: r.GPUHours, Cost: r.Cost,
			SLOPercent: finite(r.SLOPercent), WorstHourSLOPercent: finite(r.WorstHourSLOPercent), WaitP99Seconds: finite(r.P99),
			ScaleEventsPerHour: finite(r.EventsPerHour), UnservedRequests: r.Unserved}
		if r.ColdStarts >= 0 {
			cs := r.ColdStarts
			row.ColdStarts = &cs
		}
		if math.IsInf(r.P99, 1) {
			// Past the histogram (requests never served): its top edge, a
			// lower bound, rather than null, so the row stays comparable,
			// marked as such.
			v := histTopS
			row.WaitP99Seconds, row.WaitP99Overflow = &v, true
		}
		s.Rows = append(s.Rows, row)
	}
	return s
}
