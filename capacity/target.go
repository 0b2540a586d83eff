package capacity

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/inferscale/inferscale/internal/boundedfile"
	"github.com/inferscale/inferscale/internal/errtext"
	"github.com/inferscale/inferscale/proto/inference"
)

// Outcome is what one request came to.
type Outcome struct {
	// Code is "" for a success, else the error's class: a gRPC code name ("Unavailable",
	// "DeadlineExceeded"), an HTTP status ("http 503"), or "transport".
	Code string
	// Done is when the response was complete, read from the clock handed to Send.
	Done time.Time
	// FirstToken is when the first streamed token arrived (OpenAITarget with streaming); the
	// zero time otherwise.
	FirstToken time.Time
	// Message is an error's own words (the gRPC status message, or the start of the HTTP
	// response body), at most maxMessageBytes; "" for a success.
	Message string
}

// maxMessageBytes bounds Outcome.Message: a sample for an error message, not a body.
const maxMessageBytes = 512

// Target sends one request of the measured load. now is the generator's clock: Send stamps
// Outcome.Done (and FirstToken) with it. Send must be safe for concurrent use.
type Target interface {
	Send(ctx context.Context, now func() time.Time) Outcome
	// Describe says what is sent, for the record's loadShape ("triton-grpc ModelInfer
	// classifier-v5, 1 input tensor(s)").
	Describe() string
}

// TritonTarget sends one fixed KServe v2 ModelInfer request per call over Triton's gRPC API.
type TritonTarget struct {
	Client  inference.GRPCInferenceServiceClient
	Request *inference.ModelInferRequest
}

// Send implements Target.
func (t TritonTarget) Send(ctx context.Context, now func() time.Time) Outcome {
	_, err := t.Client.ModelInfer(ctx, t.Request)
	done := now()
	if err != nil {
		if st, ok := status.FromError(err); ok {
			return Outcome{Code: st.Code().String(), Done: done, Message: errtext.Cut(st.Message(), maxMessageBytes)}
		}
		return Outcome{Code: "transport", Done: done}
	}
	return Outcome{Done: done}
}

// Describe implements Target.
func (t TritonTarget) Describe() string {
	return fmt.Sprintf("triton-grpc ModelInfer %s, %d input tensor(s)", t.Request.GetModelName(), len(t.Request.GetInputs()))
}

// InferRequest builds the ModelInfer request for model: from sampleFile (a ModelInferRequest
// in protobuf JSON, e.g. {"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,16],
// "contents":{"fp32Contents":[…]}}]}) when given, else from inputs, each
// "NAME:DATATYPE:DIM,DIM,…" (INPUT0:FP32:1,16), filled with zero bytes as raw_input_contents.
// Our protocol subset has no ModelConfig/ModelMetadata call, so the tensors cannot be read
// from the server; with neither, the request has no inputs (enough for tritontest; a real
// model answers InvalidArgument, which the error-rate SLO reports).
func InferRequest(model, sampleFile string, inputs []string) (*inference.ModelInferRequest, error) {
	req := &inference.ModelInferRequest{}
	if sampleFile != "" {
		data, err := readBounded(sampleFile, maxInputDataBytes)
		if err != nil {
			return nil, fmt.Errorf("--input-data: %w", err)
		}
		if err := protojson.Unmarshal(data, req); err != nil {
			return nil, fmt.Errorf("--input-data %s: not a ModelInferRequest in protobuf JSON: %w", sampleFile, err)
		}
	}
	req.ModelName = model
	total := int64(proto.Size(req))
	if total > maxRequestBytes {
		return nil, fmt.Errorf("--input-data %s: the request is %d bytes, over the %d-byte bound on one request (64 MiB of tensors + 1 MiB)", sampleFile, total, int64(maxRequestBytes))
	}
	// Checked before each tensor is allocated: 30 × --input=X:FP64:8388608, each within
	// its own bound, made 2 GB requests and 6 GB of RSS before the server refused them.
	for _, spec := range inputs {
		in, n, err := parseInput(spec)
		if err != nil {
			return nil, err
		}
		if total += n; total > maxRequestBytes {
			what := "the --input tensors"
			if sampleFile != "" {
				what = "--input-data and the --input tensors"
			}
			return nil, fmt.Errorf("--input %q: %s come to %d bytes of request with it, over the %d-byte bound on one request (64 MiB of tensors + 1 MiB, all inputs together)", spec, what, total, int64(maxRequestBytes))
		}
		req.Inputs = append(req.Inputs, in)
		req.RawInputContents = append(req.RawInputContents, make([]byte, n))
	}
	return req, nil
}

// maxRequestBytes bounds one request (its protobuf size), all its tensors together: the
// same 64 MiB as one tensor, plus 1 MiB for names, shapes and parameters. Each in-flight
// send holds its own marshalled copy, so a request of Triton's own 2 GiB message bound would
// cost gigabytes per request in flight.
const maxRequestBytes = maxTensorBytes + 1<<20

// maxInputDataBytes bounds the --input-data file: maxTensorBytes of tensor content, which
// protobuf JSON spells in base64 (4/3) or as numbers (more), with room for the rest. A 2 GB
// file was read whole before the JSON was refused.
const maxInputDataBytes = 4 * maxTensorBytes

// readBounded reads the file at path, refusing one longer than limit bytes, a directory, and a
// device before anything is read (/dev/zero, read to its limit, peaked at 607 MB of RSS before
// the refusal); a regular file or a pipe is read by boundedfile.Read, which refuses a regular
// file by its size and reads a pipe in chunks to at most limit+1 bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	if st, err := os.Stat(path); err == nil {
		switch mode := st.Mode(); {
		case mode.IsDir():
			return nil, fmt.Errorf("%s is a directory; want a file holding a ModelInferRequest in protobuf JSON", path)
		case mode&os.ModeDevice != 0:
			return nil, fmt.Errorf("%s is a device (%v); want a file or a pipe holding a ModelInferRequest in protobuf JSON", path, mode)
		}
	}
	data, err := boundedfile.Read(path, limit)
	if errors.Is(err, boundedfile.ErrTooLarge) {
		return nil, fmt.Errorf("%s is over %d bytes (4 × the %d-byte tensor bound, in protobuf JSON); want a smaller request", path, limit, int64(maxTensorBytes))
	}
	return data, err
}

// datatypeBytes is the element size of each KServe v2 tensor datatype of fixed size.
var datatypeBytes = map[string]int64{
	"BOOL": 1, "UINT8": 1, "INT8": 1, "UINT16": 2, "INT16": 2, "FP16": 2, "BF16": 2,
	"UINT32": 4, "INT32": 4, "FP32": 4, "UINT64": 8, "INT64": 8, "FP64": 8,
}

// maxTensorBytes bounds one generated input tensor (64 MiB, Triton's default gRPC message
// limit is 2 GiB but a load generator has no business sending more per request).
const maxTensorBytes = 64 << 20

// parseInput returns the tensor spec describes and its size in bytes (at most
// maxTensorBytes); the caller allocates the zero-filled content.
func parseInput(spec string) (*inference.ModelInferRequest_InferInputTensor, int64, error) {
	parts := strings.Split(spec, ":")
	if len(parts) != 3 || parts[0] == "" {
		return nil, 0, fmt.Errorf("--input %q: want NAME:DATATYPE:DIM,DIM,… (e.g. INPUT0:FP32:1,16)", spec)
	}
	size, ok := datatypeBytes[strings.ToUpper(parts[1])]
	if !ok {
		return nil, 0, fmt.Errorf("--input %q: datatype %q is not a fixed-size KServe v2 type (BOOL, UINT8…UINT64, INT8…INT64, FP16, BF16, FP32, FP64)", spec, parts[1])
	}
	in := &inference.ModelInferRequest_InferInputTensor{Name: parts[0], Datatype: strings.ToUpper(parts[1])}
	n := size
	for _, d := range strings.Split(parts[2], ",") {
		v, err := strconv.ParseInt(d, 10, 64)
		if err != nil || v < 1 || v > maxTensorBytes {
			return nil, 0, fmt.Errorf("--input %q: dimension %q is not an integer in [1, %d]", spec, d, maxTensorBytes)
		}
		n *= v
		if n > maxTensorBytes {
			return nil, 0, fmt.Errorf("--input %q: %d bytes or more, want at most %d", spec, n, maxTensorBytes)
		}
		in.Shape = append(in.Shape, v)
	}
	return in, n, nil
}

// OpenAITarget sends POST {BaseURL}/v1/completions to an OpenAI-compatible server (vLLM),
// streaming (server-sent events) so that the first token's arrival is seen.
type OpenAITarget struct {
	// BaseURL is the server's address, e.g. http://localhost:8000.
	BaseURL string
	// Model is the served model name.
	Model string
	// PromptTokens is the prompt's length in words of one token each ("hi hi …": one token per
	// word in common BPE vocabularies). Range: >= 1.
	PromptTokens int
	// MaxTokens is max_tokens; with IgnoreEOS (vLLM's extension) the server generates exactly
	// that many. Range: >= 1.
	MaxTokens int
	IgnoreEOS bool
	// Lengths, when set, replaces PromptTokens and MaxTokens per request: a trace's token
	// columns, used in turn.
	Lengths *TokenLengths
	// Client sends the requests; nil means http.DefaultClient.
	Client *http.Client
}

// TokenLengths is a list of (prompt, output) token counts handed out in turn, from a starting
// point, wrapping around; safe for concurrent use.
type TokenLengths struct {
	pairs [][2]int
	next  atomic.Uint64
}

// MaxOpenAITokens bounds a request's prompt and max_tokens (--prompt-tokens, --max-tokens,
// and a trace's lengths, clamped to it): a million tokens is the longest context of the
// models vLLM serves; each send builds its prompt ("hi " per token, 3 MB at the bound), and
// --prompt-tokens=2000000000 asked for 6 GB per request.
const MaxOpenAITokens = 1_000_000

// NewTokenLengths returns the pairs (each count >= 1, capped at 1,000,000) starting at
// position start; an error when there are none.
func NewTokenLengths(pairs [][2]int, start uint64) (*TokenLengths, error) {
	if len(pairs) == 0 {
		return nil, fmt.Errorf("%w: no requests with both token counts", ErrInvalidConfig)
	}
	t := &TokenLengths{}
	for _, p := range pairs {
		t.pairs = append(t.pairs, [2]int{min(max(1, p[0]), MaxOpenAITokens), min(max(1, p[1]), MaxOpenAITokens)})
	}
	t.next.Store(start % uint64(len(pairs)))
	return t, nil
}

func (t *TokenLengths) take() (prompt, output int) {
	p := t.pairs[(t.next.Add(1)-1)%uint64(len(t.pairs))]
	return p[0], p[1]
}

// Send implements Target.
func (t OpenAITarget) Send(ctx context.Context, now func() time.Time) Outcome {
	prompt, output := t.PromptTokens, t.MaxTokens
	if t.Lengths != nil {
		prompt, output = t.Lengths.take()
	}
	body := map[string]any{
		"model": t.Model, "prompt": strings.TrimSpace(strings.Repeat("hi ", max(1, prompt))),
		"max_tokens": max(1, output), "stream": true,
	}
	if t.IgnoreEOS {
		body["ignore_eos"] = true
	}
	b, _ := json.Marshal(body) // a map of strings, ints and bools always marshals
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(t.BaseURL, "/")+"/v1/completions", bytes.NewReader(b))
	if err != nil {
		return Outcome{Code: "transport", Done: now()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	client := t.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return Outcome{Code: codeTimeout, Done: now()}
		}
		return Outcome{Code: "transport", Done: now()}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		head, _ := io.ReadAll(io.LimitReader(resp.Body, maxMessageBytes))
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return Outcome{Code: "http " + strconv.Itoa(resp.StatusCode), Done: now(), Message: strings.TrimSpace(errtext.Cut(string(head), maxMessageBytes))}
	}
	var out Outcome
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			out.Done = now()
			return out
		}
		if out.FirstToken.IsZero() && strings.Contains(data, `"text"`) {
			out.FirstToken = now()
		}
	}
	out.Done = now()
	switch err := sc.Err(); {
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		// The request timed out while the stream was read (a server that sent its headers
		// and then stalled): the same code as one timed out before its headers.
		out.Code = codeTimeout
	case err != nil:
		out.Code = "transport"
	default:
		out.Code = "stream ended without [DONE]"
	}
	return out
}

// Describe implements Target.
func (t OpenAITarget) Describe() string {
	if t.Lengths != nil {
		return fmt.Sprintf("openai /v1/completions %s, streaming, prompt and output tokens of %d trace requests in turn", t.Model, len(t.Lengths.pairs))
	}
	return fmt.Sprintf("openai /v1/completions %s, streaming, %d prompt tokens, %d max tokens", t.Model, t.PromptTokens, t.MaxTokens)
}
