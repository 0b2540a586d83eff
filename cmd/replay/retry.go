package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/inferscale/inferscale/internal/decimalflag"
	"github.com/inferscale/inferscale/internal/version"
	"github.com/inferscale/inferscale/replay"
)

const retryUsage = `Usage:
  replay retry [flags]   replay a synthetic burst with clients that do not retry, with layered retries
                         and with a shared retry budget, under inferscale without and with the retry
                         cap and under the other families at their published settings; prints a
                         Markdown table (docs/replay.md, "Clients that retry")

Flags of replay retry:
`

// runRetry is "replay retry": the retry scenario (docs/replay.md, "Clients
// that retry") — a synthetic burst replayed with clients that do not retry,
// with layered retries and with a shared retry budget, under inferscale
// without and with the retry cap and under the other families at their
// published settings — printed as a Markdown table. --reject adds attempts
// the engine rejects at once (retries the pool's lag does not cause).
func runRetry(args []string, stdout, stderr io.Writer) error {
	cl, sc, pool := replay.DefaultRetryClient(), replay.DefaultBurstScenario(), replay.DefaultPoolConfig()
	fs := flag.NewFlagSet("replay retry", flag.ContinueOnError)
	fs.DurationVar(&cl.Timeout, "timeout", cl.Timeout, "per-attempt client timeout (Envoy's default route timeout)")
	fs.IntVar(&cl.Layers, "layers", cl.Layers, "retrying layers (gateway, SDK, service, …), 1..5")
	fs.IntVar(&cl.Attempts, "attempts", cl.Attempts, "attempts per layer, 1..10: up to attempts^layers sends per request")
	fs.DurationVar(&cl.Backoff, "backoff", cl.Backoff, "base retry back-off (doubles per retry, at most ten times the base)")
	fs.DurationVar(&cl.Deadline, "deadline", cl.Deadline, "an answer later than this after the first send is not a verified result")
	fs.Float64Var(&cl.RejectShare, "reject", cl.RejectShare, "share of attempts the engine rejects at once at no GPU cost (Triton UNAVAILABLE), [0, 0.95]; clients retry them")
	settingsFile := fs.String("settings", "", "settings file whose published set the other families use (default: the embedded replay/settings.yaml)")
	fs.BoolVar(&cl.CancelQueued, "cancel-queued", cl.CancelQueued, "the engine drops an abandoned attempt that has not started; a started one keeps its slot until it finishes")
	fs.BoolVar(&cl.AbortAbandoned, "abort-abandoned", cl.AbortAbandoned, "the engine aborts an abandoned attempt, waiting or running, freeing its slot at once (vLLM on a client disconnect)")
	fs.Float64Var(&sc.Base, "base-rate", sc.Base, "unique requests per second outside the burst, (0, 10000]; base × (duration − burst length) + base × factor × burst length at most 50 M requests, and that × attempts^layers at most 50 M sends (834 req/s at the defaults)")
	fs.Float64Var(&sc.Factor, "burst-factor", sc.Factor, "burst rate ÷ base rate, [1, 100]")
	fs.DurationVar(&sc.Start, "burst-start", sc.Start, "burst start")
	fs.DurationVar(&sc.Length, "burst-length", sc.Length, "burst length")
	fs.DurationVar(&sc.Duration, "duration", sc.Duration, "trace length, (0, 24h]")
	fs.DurationVar(&sc.Service, "service", sc.Service, "mean service time (exponential), (0, 1h]")
	fs.Uint64Var(&sc.Seed, "seed", sc.Seed, "seed of the synthetic arrivals and service times")
	fs.IntVar(&pool.InitialReplicas, "initial-replicas", pool.InitialReplicas, "ready replicas at t = 0")
	fs.DurationVar(&pool.ColdStart, "cold-start", pool.ColdStart, "replica cold start")
	fs.Float64Var(&pool.PricePerGPUHour, "price", pool.PricePerGPUHour, "dollars per GPU-hour")
	showVersion := version.Flag(fs)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), retryUsage)
		fs.PrintDefaults()
	}
	if err := decimalflag.Parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *showVersion {
		fmt.Fprintln(stdout, version.String("replay"))
		return nil
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("retry: unexpected arguments %q", fs.Args())
	}
	set, err := replay.DefaultSettings()
	if *settingsFile != "" {
		data, rerr := readSettings(*settingsFile) // bounded, as the replay's own --settings
		if rerr != nil {
			return rerr
		}
		if set, err = replay.ParseSettings(data); err != nil {
			return fmt.Errorf("%s: %w", *settingsFile, err)
		}
	}
	if err != nil {
		return err
	}
	// Every field, and the sends the replays may hold (expected unique requests × attempts^layers
	// at most MaxRequests), before any request is drawn.
	if err := sc.ValidateRetries(cl); err != nil {
		return err
	}
	w, err := sc.Workload()
	if err != nil {
		return err
	}
	rs, err := replay.RetryComparison(pool, w, cl, set.Published)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s; %d unique requests; pool: %d slots per replica, cold start %v, %d ready at t = 0\n\n", w.Name, len(w.ArrivalS), pool.Slots, pool.ColdStart, pool.InitialReplicas)
	return replay.WriteRetryTable(stdout, rs)
}
