// Command ledger proves, from measured capacity, which GPU nodes can stop
// billing: it prints the capacity ledger (MIG layout validity, capacity,
// N+1 per failure domain, P0 spread, rolling-update headroom, and in live
// mode one owner per loop) and the release audit. See docs/ledger.md.
//
//	ledger --spec=FILE [--format=markdown|json] [--audit=auto|heuristic|exact]
//	ledger --spec=FILE --live [--kubeconfig=PATH] [--failure-domain-label=LABEL]
//	       [--prometheus-address=URL --peak-window=168h]
//
// With --live and no --prometheus-address, the address is $INFERSCALE_PROMETHEUS_ADDRESS (the
// chart's prometheus.addressSecret: a password stays out of the arguments).
//
// Exit status: 0 every check passes, 1 a check fails, 2 bad input.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/inferscale/inferscale/internal/decimalflag"
	"github.com/inferscale/inferscale/internal/envflag"
	"github.com/inferscale/inferscale/internal/kubeconfigfile"
	"github.com/inferscale/inferscale/internal/version"
	"github.com/inferscale/inferscale/ledger"
	"github.com/inferscale/inferscale/ledger/kube"
	"github.com/inferscale/inferscale/ledger/peak"
	"github.com/inferscale/inferscale/ledger/publish"
	"github.com/inferscale/inferscale/ledger/specfile"
	"github.com/inferscale/inferscale/prom"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Exit codes.
const (
	exitPass = 0
	exitFail = 1
	exitBad  = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Config is the command line, validated.
type Config struct {
	Spec               string
	Format             string
	Audit              string
	MaxRetries         int
	MigConfigOut       string
	Live               bool
	Kubeconfig         string
	NodeSelector       string
	FailureDomainLabel string
	Timeout            time.Duration
	PrometheusAddress  string
	PeakWindow         time.Duration
	PeakStep           time.Duration
	ConfigMap          string
	Namespace          string
	Pushgateway        string
	PushJob            string
	// LiveOnly are the flags given that only --live reads (--kubeconfig, --node-selector,
	// --failure-domain-label, --peak-window, --peak-step), in the order given.
	LiveOnly []string
}

// Validate returns every bad flag, each naming the flag and its range.
func (c Config) Validate() error {
	var errs []error
	if c.Spec == "" && !c.Live {
		errs = append(errs, errors.New("--spec: required (or --live with a spec of services)"))
	}
	if c.Format != "markdown" && c.Format != "json" {
		errs = append(errs, fmt.Errorf("--format %q: want markdown or json", c.Format))
	}
	if c.Audit != "auto" && c.Audit != "heuristic" && c.Audit != "exact" {
		errs = append(errs, fmt.Errorf("--audit %q: want auto, heuristic or exact", c.Audit))
	}
	if c.MaxRetries < 0 {
		errs = append(errs, fmt.Errorf("--max-retries %d: want ≥ 0 (0 = every kept node)", c.MaxRetries))
	}
	if c.PrometheusAddress != "" {
		if err := prom.CheckAddress(c.PrometheusAddress); err != nil {
			errs = append(errs, fmt.Errorf("--prometheus-address %w; want %s", err, prom.AddressRule))
		}
	}
	if c.PrometheusAddress != "" && !c.Live {
		errs = append(errs, errors.New("--prometheus-address: needs --live (peaks are read per ScaledObject)"))
	}
	if !c.Live {
		for _, f := range c.LiveOnly {
			errs = append(errs, fmt.Errorf("--%s: needs --live (without it the spec's nodes and peakRPS are read and this flag is not)", f))
		}
	}
	if c.PeakWindow < time.Minute || c.PeakWindow > 90*24*time.Hour {
		errs = append(errs, fmt.Errorf("--peak-window %v: want [1m, 2160h]", c.PeakWindow))
	}
	if c.PeakStep < time.Second || c.PeakStep > c.PeakWindow {
		errs = append(errs, fmt.Errorf("--peak-step %v: want [1s, --peak-window]", c.PeakStep))
	}
	if c.ConfigMap != "" && (!c.Live || c.Namespace == "") {
		errs = append(errs, errors.New("--configmap: needs --live and --namespace (or $POD_NAMESPACE)"))
	}
	if c.Pushgateway != "" {
		if err := prom.CheckAddress(c.Pushgateway); err != nil {
			errs = append(errs, fmt.Errorf("--pushgateway %w; want %s", err, prom.AddressRule))
		}
	}
	if c.Pushgateway != "" && c.PushJob == "" {
		errs = append(errs, errors.New("--push-job: required with --pushgateway"))
	}
	if c.Timeout <= 0 || c.Timeout > time.Hour {
		errs = append(errs, fmt.Errorf("--timeout %v: want (0, 1h]", c.Timeout))
	}
	return errors.Join(errs...)
}

// parseFlags parses the command line into a Config (not yet validated);
// usage and parse errors go to out.
func parseFlags(args []string, out io.Writer) (c Config, showVersion bool, err error) {
	fs := flag.NewFlagSet("ledger", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.Spec, "spec", "", "spec file (YAML; docs/ledger.md)")
	fs.StringVar(&c.Format, "format", "markdown", "output: markdown or json")
	fs.StringVar(&c.Audit, "audit", "auto", "release audit: auto (exact when the spec is small enough, else heuristic), heuristic or exact")
	fs.IntVar(&c.MaxRetries, "max-retries", 0, "heuristic audit: kept nodes re-tried for release after the first packing (0 = all)")
	fs.StringVar(&c.MigConfigOut, "mig-config-out", "", "write the proposed layouts as a mig-parted config to this file")
	fs.BoolVar(&c.Live, "live", false, "read GPU nodes from the cluster (their GFD/MIG manager labels) instead of the spec's nodes, and check autoscaler ownership")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "kubeconfig for --live (default: $KUBECONFIG's files, else ~/.kube/config, else the pod's in-cluster service account)")
	fs.StringVar(&c.NodeSelector, "node-selector", "", "label selector of GPU nodes for --live (default: nodes labelled "+kube.LabelProduct+")")
	fs.StringVar(&c.FailureDomainLabel, "failure-domain-label", kube.LabelZone, "node label holding the failure domain for --live")
	fs.DurationVar(&c.Timeout, "timeout", 30*time.Second, "deadline for reading the cluster and Prometheus")
	fs.StringVar(&c.PrometheusAddress, "prometheus-address", "", "with --live: read each service's peakRPS from Prometheus, as max_over_time of its ScaledObject's (same name) request rate (a rateQuery's series summed, as the scaler sums them); not given: $"+envflag.PrometheusAddress+" with --live (a Secret's value keeps a password out of the arguments); the flag wins, even empty")
	fs.DurationVar(&c.PeakWindow, "peak-window", 7*24*time.Hour, "window of the peak: a full business cycle")
	fs.DurationVar(&c.PeakStep, "peak-step", time.Minute, "resolution of the peak subquery")
	fs.StringVar(&c.ConfigMap, "configmap", "", "with --live: write the report (ledger.md, ledger.json, mig-parted.yaml) into this existing ConfigMap")
	fs.StringVar(&c.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace of --configmap (default $POD_NAMESPACE)")
	fs.StringVar(&c.Pushgateway, "pushgateway", "", "push the verdicts as inferscale_ledger_* gauges to this Prometheus Pushgateway")
	fs.StringVar(&c.PushJob, "push-job", "inferscale-ledger", "Pushgateway job name")
	v := version.Flag(fs)
	// decimalflag: fs.Parse alone read --max-retries=010 as octal 8, 0x10 and 1_0 silently.
	if err = decimalflag.Parse(fs, args); err != nil {
		return c, *v, err
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "kubeconfig", "node-selector", "failure-domain-label", "peak-window", "peak-step":
			c.LiveOnly = append(c.LiveOnly, f.Name)
		}
	})
	// flag stops at the first argument that is not a flag, so `ledger extra --spec=x` left
	// --spec unparsed and reported it missing: name the stray argument instead.
	if fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q: ledger takes only flags (e.g. --spec=FILE); flags after it were not read", fs.Arg(0))
		fmt.Fprintln(out, "ledger:", err)
		return c, *v, err
	}
	// Only --live reads Prometheus: offline, a variable left in the shell for live runs is not
	// the "needs --live" mistake an explicit flag is.
	if c.Live {
		if err = envflag.Address(fs, "prometheus-address", envflag.PrometheusAddress, os.LookupEnv); err != nil {
			fmt.Fprintln(out, "ledger:", err)
		}
	}
	return c, *v, err
}

func run(args []string, stdout, stderr io.Writer) int {
	c, showVersion, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0 // --help: the usage is printed, nothing is wrong
	}
	if err != nil {
		return exitBad
	}
	if showVersion {
		fmt.Fprintln(stdout, version.String("ledger"))
		return 0
	}
	if err := c.Validate(); err != nil {
		fmt.Fprintln(stderr, "ledger:", err)
		return exitBad
	}
	rep, err := build(c)
	if err != nil {
		fmt.Fprintln(stderr, "ledger:", err)
		return exitBad
	}
	if c.MigConfigOut != "" && rep.Audit.Feasible {
		if err := os.WriteFile(c.MigConfigOut, []byte(ledger.MigPartedConfig(rep.Audit.Proposal)), 0o644); err != nil {
			fmt.Fprintln(stderr, "ledger: --mig-config-out:", err) // a path that cannot be written: bad input, before the report
			return exitBad
		}
	}
	if err := publishReport(c, rep); err != nil {
		fmt.Fprintln(stderr, "ledger:", err)
		return exitBad
	}
	write := ledger.WriteMarkdown
	if c.Format == "json" {
		write = ledger.WriteJSON
	}
	if err := write(stdout, rep); err != nil {
		fmt.Fprintln(stderr, "ledger:", err)
		return exitBad
	}
	if !rep.OK() {
		return exitFail
	}
	return exitPass
}

// build reads the inputs and computes the report.
func build(c Config) (ledger.Report, error) {
	var spec ledger.Spec
	if c.Spec != "" {
		var err error
		// Live mode replaces the spec's nodes and placements, so errors
		// about them do not count there.
		if spec, err = specfile.Load(c.Spec); err != nil && (!c.Live || !onlyNodeErrors(err, c.PrometheusAddress != "")) {
			return ledger.Report{}, err
		}
	}
	var rep ledger.Report
	if c.Live {
		nodes, owners, sources, err := readLive(c)
		if err != nil {
			return rep, err
		}
		if c.PrometheusAddress != "" {
			if rep.Peaks, err = readPeaks(c, spec.Services, sources); err != nil {
				return rep, err
			}
		}
		spec.Nodes = nodes
		for i := range spec.Services {
			spec.Services[i].Placement = nil // replicas are placed by the ledger against the live inventory
		}
		if errs := spec.Validate(); errs != nil {
			return rep, fmt.Errorf("%w: %v", specfile.ErrInvalid, errors.Join(fieldErrors(withPeakReasons(errs, spec.Services, rep.Peaks))...))
		}
		rep.Live, rep.Owners = true, ledger.OwnerConflicts(owners)
	}
	rep.Check = ledger.Check(spec)
	switch c.Audit {
	case "heuristic":
		rep.Audit = ledger.Audit(spec, ledger.AuditOptions{MaxRetries: c.MaxRetries})
	case "exact":
		a, err := ledger.AuditExact(spec)
		if err != nil {
			return rep, err
		}
		rep.Audit = a
	default:
		a, err := ledger.AuditExact(spec)
		if errors.Is(err, ledger.ErrTooLarge) {
			a = ledger.Audit(spec, ledger.AuditOptions{MaxRetries: c.MaxRetries})
		}
		rep.Audit = a
	}
	return rep, nil
}

// withPeakReasons adds to each `services[i].peakRPS: required for …` error why Prometheus gave
// that service no peak (its note: no ScaledObject of the name, no samples, a value refused as
// NaN, negative or past 1e9, an answer past the size limit), so that such a peak is reported
// as coming from Prometheus, not only as missing from the spec. notes are readPeaks', one per
// service in order.
func withPeakReasons(errs []ledger.FieldError, services []ledger.Service, notes []ledger.PeakNote) []ledger.FieldError {
	reason := map[string]string{} // services[i].peakRPS → why Prometheus gave none
	for i, sv := range services {
		if i >= len(notes) || notes[i].Service != sv.Name || notes[i].Err == "" {
			continue
		}
		from := "Prometheus"
		if notes[i].Source != "" {
			from += " (ScaledObject " + notes[i].Source + ")"
		}
		reason[fmt.Sprintf("services[%d].peakRPS", i)] = from + ": " + notes[i].Err
	}
	for k, e := range errs {
		if r, ok := reason[e.Path]; ok && strings.HasPrefix(e.Msg, ledger.PeakRequired) {
			errs[k].Msg += "; " + r
		}
	}
	return errs
}

func fieldErrors(fe []ledger.FieldError) []error {
	out := make([]error, len(fe))
	for i, e := range fe {
		out[i] = e
	}
	return out
}

// onlyNodeErrors is true when every joined error is about nodes[…], a service's placement
// or, when peaksLive (--prometheus-address), a P0/P1 peakRPS left out (specfile.AboutNodes):
// what the live run replaces. Without --prometheus-address a missing peak is reported before
// the cluster is read.
func onlyNodeErrors(err error, peaksLive bool) bool {
	var multi interface{ Unwrap() []error }
	errs := []error{err}
	if errors.As(err, &multi) {
		errs = multi.Unwrap()
	}
	if !peaksLive && slices.ContainsFunc(errs, specfile.PeakMissing) {
		return false
	}
	return specfile.AboutNodes(errs)
}

// publishReport writes the report to the ConfigMap and the Pushgateway
// the flags name, if any.
func publishReport(c Config, rep ledger.Report) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	if c.ConfigMap != "" {
		cfg, err := restConfig(c)
		if err != nil {
			return err
		}
		kc, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		if err := publish.WriteConfigMap(ctx, kc, c.Namespace, c.ConfigMap, rep); err != nil {
			return err
		}
	}
	if c.Pushgateway != "" {
		return publish.Push(ctx, c.Pushgateway, c.PushJob, rep)
	}
	return nil
}

// restConfig is the client configuration for --live and --configmap: --kubeconfig alone, else
// $KUBECONFIG's files (merged), else ~/.kube/config, else the pod's in-cluster service account,
// as client-go's default loading rules have it. Every kubeconfig, and each certificate, key and
// token file the current context names, is read through kubeconfigfile's bound (a regular file
// of at most 1 MiB, opened once); client-go's own loading is not used: it reads each file whole,
// and its legacy migration reads ~/.kube/.kubeconfig whole and writes it to ~/.kube/config
// (a read-only tool must write nothing there).
func restConfig(c Config) (*rest.Config, error) {
	// Only the file list: the rules' Load, which migrates and reads, is never called.
	precedence := clientcmd.NewDefaultClientConfigLoadingRules().Precedence
	var kc *clientcmdapi.Config
	var err error
	if c.Kubeconfig != "" {
		kc, err = kubeconfigfile.LoadFile("--kubeconfig", c.Kubeconfig)
	} else {
		kc, err = kubeconfigfile.LoadFiles("kubeconfig ($KUBECONFIG or ~/.kube/config)", precedence)
	}
	if err != nil {
		return nil, err
	}
	cfg, err := kubeconfigfile.RESTConfig(kc)
	switch {
	case err == nil:
		return cfg, nil
	case clientcmd.IsEmptyConfig(err):
		// client-go's own text ("no configuration has been provided, try setting
		// KUBERNETES_MASTER environment variable") names a variable it has long stopped
		// reading for this and none of the places it looked.
		return nil, noKubeconfigError(c.Kubeconfig, os.Getenv(clientcmd.RecommendedConfigPathEnvVar), precedence,
			fileState, inClusterMissing(os.Getenv, fileState))
	case c.Kubeconfig != "":
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	return nil, fmt.Errorf("kubeconfig: %w", err)
}

// serviceAccountToken is the file client-go's in-cluster configuration reads
// (rest.InClusterConfig); with KUBERNETES_SERVICE_HOST and _PORT it is what makes
// the in-cluster service account possible.
const serviceAccountToken = "/var/run/secrets/kubernetes.io/serviceaccount/token"

// fileState says what a kubeconfig path held when clientcmd found no configuration in it:
// "does not exist", or, for a file that does, that it gave none.
func fileState(path string) string {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return "does not exist"
	}
	return "gives no cluster (empty, or no server for its current context)"
}

// inClusterMissing says why the in-cluster service account is not usable, as client-go
// decides it (clientcmd's inClusterClientConfig.Possible): the variables that are not set,
// or the token file.
func inClusterMissing(getenv func(string) string, state func(string) string) string {
	var unset []string
	for _, v := range []string{"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"} {
		if getenv(v) == "" {
			unset = append(unset, v)
		}
	}
	switch len(unset) {
	case 1:
		return unset[0] + " is not set: not running in a pod"
	case 2:
		return unset[0] + " and " + unset[1] + " are not set: not running in a pod"
	}
	return fmt.Sprintf("token %q %s", serviceAccountToken, state(serviceAccountToken))
}

// noKubeconfigError is the error when client-go found no configuration
// (clientcmd.ErrEmptyConfig). With --kubeconfig (flag) it names that file; else it
// names each place looked at in client-go's order — $KUBECONFIG's files (env, split into
// precedence) or, only when $KUBECONFIG is empty, ~/.kube/config, then the in-cluster service
// account (inCluster says why it is not usable) — and how to pass one.
func noKubeconfigError(flag, env string, precedence []string, state func(string) string, inCluster string) error {
	if flag != "" {
		return fmt.Errorf("--kubeconfig %q %s, and no in-cluster service account (%s)", flag, state(flag), inCluster)
	}
	var looked string
	if env == "" {
		home := clientcmd.RecommendedHomeFile
		if len(precedence) == 1 {
			home = precedence[0]
		}
		looked = fmt.Sprintf("$KUBECONFIG (not set), ~/.kube/config (%q %s)", home, state(home))
	} else {
		files := ""
		for i, p := range precedence {
			if i > 0 {
				files += "; "
			}
			files += fmt.Sprintf("%q %s", p, state(p))
		}
		looked = fmt.Sprintf("$KUBECONFIG (%s; ~/.kube/config is read only when $KUBECONFIG is empty)", files)
	}
	return fmt.Errorf("no kubeconfig found: looked at %s and the in-cluster service account (%s); pass one with --kubeconfig=PATH (or set $KUBECONFIG)",
		looked, inCluster)
}

// readPeaks reads each service's peak from the ScaledObject of the same
// name and writes it into services; a service without one, or without
// data, keeps its spec peakRPS and the note says why.
func readPeaks(c Config, services []ledger.Service, sources []peak.Source) ([]ledger.PeakNote, error) {
	// Each answer is bounded (prom.DefaultMaxResponseBytes, the scaler's default): the client
	// read a body whole, so a 1 GiB answer was held whole.
	papi, err := prom.NewLimitedAPI(c.PrometheusAddress, prom.DefaultMaxResponseBytes)
	if err != nil {
		return nil, fmt.Errorf("--prometheus-address: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	now := time.Now()
	var notes []ledger.PeakNote
	for i := range services {
		s := &services[i]
		var match []peak.Source
		for _, src := range sources {
			if src.ScaledObject == s.Name {
				match = append(match, src)
			}
		}
		note := ledger.PeakNote{Service: s.Name}
		switch len(match) {
		case 0:
			note.Err = "no ScaledObject named " + s.Name + " with a rate source"
		case 1:
			note.Source = match[0].Namespace + "/" + match[0].ScaledObject
			v, q, err := peak.Read(ctx, papi, match[0], c.PeakWindow, c.PeakStep, now)
			note.Query, note.PeakRPS = q, v
			if err != nil {
				// The report goes to stdout and the ConfigMap: net/http's error quotes the URL
				// with the address's query (a token) and hides only the password.
				note.Err = prom.RedactURLError(err).Error()
			} else {
				s.PeakRPS = v
			}
		default:
			note.Err = fmt.Sprintf("%d ScaledObjects named %s; rename the service to one", len(match), s.Name)
		}
		notes = append(notes, note)
	}
	return notes, nil
}

func readLive(c Config) ([]ledger.Node, []ledger.Autoscaler, []peak.Source, error) {
	cfg, err := restConfig(c)
	if err != nil {
		return nil, nil, nil, err
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	nodes, err := kube.ReadNodes(ctx, kc, kube.NodeOptions{Selector: c.NodeSelector, FailureDomainLabel: c.FailureDomainLabel})
	if err != nil {
		return nil, nil, nil, err
	}
	owners, err := kube.Autoscalers(ctx, kc, dc)
	if err != nil {
		return nil, nil, nil, err
	}
	var sources []peak.Source
	if c.PrometheusAddress != "" {
		if sources, err = kube.PeakSources(ctx, dc); err != nil {
			return nil, nil, nil, err
		}
	}
	return nodes, owners, sources, nil
}
