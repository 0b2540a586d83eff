package ledger

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Report is everything cmd/ledger prints: the checks of the spec as it
// stands, the release audit, and (live mode) autoscaler ownership.
type Report struct {
	Check  CheckResult
	Audit  AuditResult
	Owners []OwnerConflict
	// Live is true when nodes were read from a cluster, so that the
	// one-owner-per-loop check ran.
	Live bool
	// Peaks record, in live mode with Prometheus, where each service's
	// peakRPS came from.
	Peaks []PeakNote
}

// PeakNote is one service's peak demand as read from Prometheus.
type PeakNote struct {
	Service string
	// Source is the ScaledObject, "namespace/name"; "" when none matched.
	Source string
	// Query is the PromQL evaluated.
	Query string
	// PeakRPS is the peak read, used as the service's peakRPS when Err is "".
	PeakRPS float64
	// Err says why the spec's peakRPS was kept instead.
	Err string
}

// OK is true when every check passes: layouts, every P0/P1 service, and
// no workload with two autoscalers. The audit never fails the report.
func (r Report) OK() bool { return r.Check.OK && len(r.Owners) == 0 }

// jsonReport is the documented --format=json schema (docs/ledger.md).
type jsonReport struct {
	OK       bool            `json:"ok"`
	Services []ServiceResult `json:"services"`
	Layouts  []LayoutResult  `json:"layouts"`
	Release  []NodeRelease   `json:"release"`
}

// WriteJSON writes the report as the documented JSON document:
// {"ok", "services": [{"name", "tier", "profile", "peakRPS",
// "capacityRPS", "capacityAfterWorstLossRPS", "worstLoss", "verdict"}],
// "layouts": [{"node", "gpu", "valid", "reason"}], "release": [{"node",
// "release", "reason", "savingsPerMonth"}]}; arrays are never null.
func WriteJSON(w io.Writer, r Report) error {
	j := jsonReport{OK: r.OK(), Services: r.Check.Services, Layouts: r.Check.Layouts, Release: r.Audit.Release}
	if j.Services == nil {
		j.Services = []ServiceResult{}
	}
	if j.Layouts == nil {
		j.Layouts = []LayoutResult{}
	}
	if j.Release == nil {
		j.Release = []NodeRelease{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(j)
}

func num(f float64) string { return fmt.Sprintf("%g", f) }

func usd(f float64) string { return fmt.Sprintf("$%.2f", f) }

// WriteMarkdown writes the ledger and the audit as Markdown a person can
// read: one table per check, the reasons of every failure, the release
// table, and the proposed layouts as a mig-parted config.
func WriteMarkdown(w io.Writer, r Report) error {
	var b strings.Builder
	verdict := "PASS — every check holds"
	if !r.OK() {
		verdict = "FAIL — see the reasons below"
	}
	fmt.Fprintf(&b, "# Capacity ledger\n\n**%s**\n\n", verdict)

	b.WriteString("## Services\n\nCapacity = replicas × safe RPS per replica; after worst loss = the same without the replicas of the failure domain or node whose loss costs most; rolling update = one replica fewer.\n\n")
	b.WriteString("| service | tier | profile | peak RPS | replicas | capacity RPS | after worst loss RPS | worst loss | rolling update RPS | verdict |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---:|---|---:|---|\n")
	var fails []string
	for _, s := range r.Check.Services {
		peak, capacity, after, rolling := num(s.PeakRPS), num(s.CapacityRPS), num(s.CapacityAfterWorstLossRPS), num(s.RollingRPS)
		if s.Tier == P2 {
			peak, capacity, after, rolling = "—", "—", "—", "—"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %d | %s | %s | %s | %s | %s |\n",
			s.Name, s.Tier, s.Profile, peak, s.Replicas, capacity, after, dash(s.WorstLoss), rolling, s.Verdict)
		for _, reason := range s.Reasons {
			fails = append(fails, fmt.Sprintf("- **%s**: %s", s.Name, reason))
		}
	}
	if len(fails) > 0 {
		b.WriteString("\n" + strings.Join(fails, "\n") + "\n")
	}

	b.WriteString("\n## MIG layouts\n\nFrom NVIDIA's MIG User Guide tables (profiles, compute and memory slices, placements).\n\n")
	b.WriteString("| node | GPU | product | layout | valid | reason |\n|---|---:|---|---|---|---|\n")
	for _, l := range r.Check.Layouts {
		layout := "whole GPU"
		if len(l.MIG) > 0 {
			layout = strings.Join(l.MIG, " + ")
		}
		valid := "yes"
		if !l.Valid {
			valid = "**no**"
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s |\n", l.Node, l.GPU, dash(l.Product), layout, valid, dash(l.Reason))
	}

	if r.Live {
		b.WriteString("\n## One owner per loop\n\n")
		if len(r.Owners) == 0 {
			b.WriteString("Every scaled workload has one autoscaler.\n")
		}
		for _, o := range r.Owners {
			fmt.Fprintf(&b, "- **%s/%s %s** is scaled by %s: two replica loops fight.\n", o.Namespace, o.TargetKind, o.TargetName, strings.Join(o.Owners, " and "))
		}
	}

	if len(r.Peaks) > 0 {
		b.WriteString("\n## Peak demand (Prometheus)\n\n| service | ScaledObject | peak RPS | query or reason |\n|---|---|---:|---|\n")
		for _, p := range r.Peaks {
			if p.Err != "" {
				fmt.Fprintf(&b, "| %s | %s | spec | %s |\n", p.Service, dash(p.Source), dash(p.Err))
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %s | `%s` |\n", p.Service, p.Source, num(p.PeakRPS), strings.ReplaceAll(p.Query, "|", "\\|"))
		}
	}

	a := r.Audit
	method := "heuristic (packing, then one retry per kept node)"
	if a.Exact {
		method = "exact (exhaustive search)"
	}
	fmt.Fprintf(&b, "\n## Release audit\n\n%d of %d nodes can stop billing, saving %s per month (price per hour × %d). Method: %s.\n\n",
		a.Released, len(a.Release), usd(a.SavingsPerMonth), HoursPerMonth, method)
	b.WriteString("| node | release | savings per month | reason |\n|---|---|---:|---|\n")
	for _, n := range a.Release {
		rel := "no"
		if n.Release {
			rel = "**yes**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", n.Node, rel, usd(n.SavingsPerMonth), n.Reason)
	}
	if a.Feasible {
		b.WriteString("\n### Proposed replicas\n\n| service | replicas | nodes |\n|---|---:|---|\n")
		for _, s := range a.Proposal.Services {
			fmt.Fprintf(&b, "| %s | %d | %s |\n", s.Name, len(s.Placement), strings.Join(s.Placement, ", "))
		}
		b.WriteString("\n### Proposed layouts (mig-parted config; label each node nvidia.com/mig.config=ledger-<node>)\n\n```yaml\n")
		b.WriteString(MigPartedConfig(a.Proposal))
		b.WriteString("```\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func dash(s string) string {
	if s == "" {
		return "—"
	}
	return strings.ReplaceAll(s, "|", "\\|")
}
