package replay

// ResidencySummaryRow is one residency policy's row of summary.json's
// "residency" array. The residency replay (residency.go) fills it through
// ResidencySummary.
type ResidencySummaryRow struct {
	Policy string `json:"policy"`
	// BudgetBytes is the GPU memory budget models share.
	BudgetBytes int64 `json:"budgetBytes"`
	// HitRatio is the share of requests whose model was ready on arrival.
	HitRatio float64 `json:"hitRatio"`
	// LoadStallSeconds is the total request time spent waiting for loads.
	LoadStallSeconds float64 `json:"loadStallSeconds"`
	// FailedRequests counts requests never served.
	FailedRequests int `json:"failedRequests"`
	// Loads and BytesLoaded count completed loads.
	Loads       int   `json:"loads"`
	BytesLoaded int64 `json:"bytesLoaded"`
}

// ResidencySummary turns a residency comparison into summary rows, one per
// budget and policy (policy names as ResidencyPolicies); nil when there is
// none. FailedRequests are the requests never served (Unserved).
func ResidencySummary(rc *ResidencyComparison) []ResidencySummaryRow {
	if rc == nil {
		return nil
	}
	out := make([]ResidencySummaryRow, 0, len(rc.Results))
	for _, r := range rc.Results {
		row := ResidencySummaryRow{Policy: r.Policy, BudgetBytes: r.BudgetBytes, LoadStallSeconds: r.WaitS,
			FailedRequests: r.Unserved, Loads: r.Loads, BytesLoaded: r.BytesLoaded}
		if r.Requests > 0 {
			row.HitRatio = float64(r.Hits) / float64(r.Requests)
		}
		out = append(out, row)
	}
	return out
}
