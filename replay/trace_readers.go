package replay

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// Column names of the Azure LLM inference trace 2023 (Splitwise; Patel et
// al., ISCA 2024; CC BY 4.0).
const (
	colAzureTimestamp = "TIMESTAMP"
	colAzureContext   = "ContextTokens"
	colAzureGenerated = "GeneratedTokens"
)

type azureLLM struct {
	t   *table
	clk clock
}

// NewAzureLLM reads AzureLLMInferenceTrace_{code,conv}.csv:
// TIMESTAMP ("YYYY-MM-DD HH:MM:SS.fffffff", 7 fractional digits),
// ContextTokens, GeneratedTokens. Rows must be in time order.
func NewAzureLLM(r io.Reader) (Source, error) {
	t, err := newTable(r, colAzureTimestamp, colAzureContext, colAzureGenerated)
	if err != nil {
		return nil, err
	}
	return &azureLLM{t: t}, nil
}

func (a *azureLLM) Models() []string { return []string{"default"} }

func (a *azureLLM) Next() (Request, error) {
	if err := a.t.next(); err != nil {
		return Request{}, err
	}
	ts, abs, err := a.t.timestamp(colAzureTimestamp, "want YYYY-MM-DD HH:MM:SS.fffffff")
	if err != nil {
		return Request{}, err
	}
	at, err := a.clk.offset(a.t, colAzureTimestamp, ts, abs)
	if err != nil {
		return Request{}, err
	}
	in, err := a.t.intCol(colAzureContext, false)
	if err != nil {
		return Request{}, err
	}
	out, err := a.t.intCol(colAzureGenerated, false)
	if err != nil {
		return Request{}, err
	}
	return Request{At: at, InputTokens: in, OutputTokens: out, ExecSeconds: Unknown}, nil
}

// Column names of the generic CSV.
const (
	colGenTimestamp = "timestamp"
	colGenModel     = "model"
	colGenInput     = "input_tokens"
	colGenOutput    = "output_tokens"
)

// models interns model names.
type models struct {
	names []string
	index map[string]int32
}

func (m *models) id(name string) int32 {
	if m.index == nil {
		m.index = map[string]int32{}
	}
	if i, ok := m.index[name]; ok {
		return i
	}
	i := int32(len(m.names))
	m.index[name] = i
	m.names = append(m.names, name)
	return i
}

type generic struct {
	t   *table
	clk clock
	m   models
}

// NewGeneric reads a CSV with the header columns timestamp (required),
// model, input_tokens and output_tokens (each optional, in any order; extra
// columns are ignored). timestamp is RFC 3339, "YYYY-MM-DD HH:MM:SS[.frac]"
// (UTC, up to 9 fractional digits) or a plain decimal number of seconds
// within ±MaxTimestampSeconds (Unix time or any offset). Rows must be in time
// order. An empty model is "default"; empty token counts are Unknown.
func NewGeneric(r io.Reader) (Source, error) {
	t, err := newTable(r, colGenTimestamp)
	if err != nil {
		return nil, err
	}
	return &generic{t: t}, nil
}

func (g *generic) Models() []string { return g.m.names }

func (g *generic) Next() (Request, error) {
	if err := g.t.next(); err != nil {
		return Request{}, err
	}
	ts, abs, err := g.t.timestamp(colGenTimestamp, "want RFC 3339, YYYY-MM-DD HH:MM:SS[.frac] or seconds in plain decimal (e.g. 1704067200.5)")
	if err != nil {
		return Request{}, err
	}
	at, err := g.clk.offset(g.t, colGenTimestamp, ts, abs)
	if err != nil {
		return Request{}, err
	}
	name := g.t.str(colGenModel)
	if name == "" {
		name = "default"
	}
	in, err := g.t.intCol(colGenInput, true)
	if err != nil {
		return Request{}, err
	}
	out, err := g.t.intCol(colGenOutput, true)
	if err != nil {
		return Request{}, err
	}
	return Request{At: at, Model: g.m.id(name), InputTokens: in, OutputTokens: out, ExecSeconds: Unknown}, nil
}

// Column names of GenTD26's lora_request_trace.csv (Alibaba
// cluster-trace-v2026-GenAI; Lin et al., SoCC '25).
const (
	colTDCreate = "gmt_create"
	colTDExec   = "exec_time_seconds"
	colTDModel  = "checkpoint_model_version_id"
)

type gentd26 struct {
	t       *table
	clk     clock
	m       models
	skipped int
}

// Skipped reports rows without a checkpoint (25 PENDING rows in the
// published file): they name no model to serve, so they are left out and
// counted here.
func (g *gentd26) Skipped() (int, string) {
	return g.skipped, "rows without checkpoint_model_version_id (never assigned a model)"
}

// NewGenTD26 reads GenTD26 lora_request_trace.csv: gmt_create
// ("YYYY-MM-DD HH:MM:SS"), exec_time_seconds (the request's own execution
// time, s, ≥ 0; empty = Unknown) and checkpoint_model_version_id (the base
// model, one Model per checkpoint). Other columns are ignored. Rows with an
// empty checkpoint are skipped and counted (see Trace.Skipped).
func NewGenTD26(r io.Reader) (Source, error) {
	t, err := newTable(r, colTDCreate, colTDExec, colTDModel)
	if err != nil {
		return nil, err
	}
	return &gentd26{t: t}, nil
}

func (g *gentd26) Models() []string { return g.m.names }

func (g *gentd26) Next() (Request, error) {
	// A loop, not a recursive call per skipped row: a file of millions of
	// rows without a checkpoint overflowed the stack (1 GB at 6 M rows).
	for {
		if err := g.t.next(); err != nil {
			return Request{}, err
		}
		ts, abs, err := g.t.timestamp(colTDCreate, "want YYYY-MM-DD HH:MM:SS")
		if err != nil {
			return Request{}, err
		}
		at, err := g.clk.offset(g.t, colTDCreate, ts, abs)
		if err != nil {
			return Request{}, err
		}
		exec, err := g.t.floatCol(colTDExec, true, 0, 7*24*3600)
		if err != nil {
			return Request{}, err
		}
		name := g.t.str(colTDModel)
		if name == "" {
			g.skipped++
			continue
		}
		return Request{At: at, Model: g.m.id(name), InputTokens: Unknown, OutputTokens: Unknown, ExecSeconds: float32(exec)}, nil
	}
}

// Column names of GenTD26's monitoring files.
const (
	colMonTime  = "timestamp_anon"
	colMonValue = "value"
)

// colMonIP is the monitoring files' third column (MD5 of the pod IP).
const colMonIP = "container_ip"

// ErrNotLoadTimes is wrapped by ReadLoadTimes's errors for a file that is
// not a load-latency CSV.
var ErrNotLoadTimes = errors.New("not load times")

// ReadLoadTimes reads GenTD26 basemodel_update_latency_anon.csv
// (timestamp_anon, value in ms, container_ip) and returns the load
// latencies, in file order. They are the empirical cold-start and
// model-load distribution (median about 23 s, p99 about 52 s).
//
// The GenTD26 monitoring files share that header, so the file is checked
// for what a load time is: the header has no column beyond those three (the
// trace's README: qps.csv adds request_type, and holds request rates, about
// 0.09 req/s, which read as 0.09 ms loads: "cold start … p50 0s"), and
// every value is in (0, 24 h] ms, a load taking time (the GPU-memory file's
// bytes are past 24 h). A file with a header and no rows is an error saying
// so. Errors wrap ErrNotLoadTimes (and name the column) or are a
// *ParseError naming the line, the column and the value.
func ReadLoadTimes(r io.Reader) ([]time.Duration, error) {
	t, err := newTable(r, colMonTime, colMonValue)
	if err != nil {
		return nil, err
	}
	for _, c := range t.header {
		switch c = strings.TrimSpace(c); c {
		case colMonTime, colMonValue, colMonIP:
		case "request_type":
			return nil, fmt.Errorf("%w: column %s: this is GenTD26's qps.csv (request rates, req/s); a load-latency CSV such as basemodel_update_latency_anon.csv has only %s, %s (ms) and %s", ErrNotLoadTimes, c, colMonTime, colMonValue, colMonIP)
		default:
			return nil, fmt.Errorf("%w: column %s: a load-latency CSV such as basemodel_update_latency_anon.csv has only %s, %s (ms) and %s", ErrNotLoadTimes, quoteHead(c), colMonTime, colMonValue, colMonIP)
		}
	}
	const maxMS = 24 * 3600 * 1000
	var out []time.Duration
	for {
		if err := t.next(); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		ms, err := t.floatCol(colMonValue, false, 0, maxMS)
		if v := t.str(colMonValue); err == nil && ms == 0 || err != nil && plainDecimal(v) { // a number, out of range
			err = t.fail(colMonValue, v, "want a load time in (0, %g] ms (24 h): a load takes time, and no load takes a day", float64(maxMS))
		}
		if err != nil {
			return nil, err
		}
		out = append(out, time.Duration(math.Round(ms*1e6)))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no rows: the file has a header and no load times", ErrNotLoadTimes)
	}
	return out, nil
}
