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
	// WaitP99Seconds is the 99th percentile queue wait.
	WaitP99Seconds *float64 `json:"waitP99Seconds"`
	// ColdStarts counts replicas created; ScaleEventsPerHour changes of
	// the replica count per hour of trace.
	ColdStarts         *int     `json:"coldStarts"`
	ScaleEventsPerHour *float64 `json:"scaleEventsPerHour"`
}

func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// Summary builds summary.json's content from the table rows.
func (c *Comparison) Summary() Summary {
	s := Summary{Trace: c.Trace, Requests: c.Requests, SLO: SummarySLO{WaitSeconds: c.Pool.SLO.Seconds(), Quantile: c.Pool.SLOTarget}, Rows: []SummaryRow{}}
	for _, r := range c.Rows() {
		row := SummaryRow{Policy: r.Policy, SettingSet: r.SettingSet, Setting: r.Setting, GPUHours: r.GPUHours, Cost: r.Cost,
			SLOPercent: finite(r.SLOPercent), WorstHourSLOPercent: finite(r.WorstHourSLOPercent), WaitP99Seconds: finite(r.P99),
			ScaleEventsPerHour: finite(r.EventsPerHour)}
		if r.ColdStarts >= 0 {
			cs := r.ColdStarts
			row.ColdStarts = &cs
		}
		if math.IsInf(r.P99, 1) || r.P99 > 1e6 {
			// A request never served: report the longest wait the
			// histogram holds rather than null, so the row stays comparable.
			v := histMinS * math.Exp2(float64(len(waitHist{}.b)-1)/32)
			row.WaitP99Seconds = &v
		}
		s.Rows = append(s.Rows, row)
	}
	return s
}
