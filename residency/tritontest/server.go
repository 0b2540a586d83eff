package tritontest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/inferscale/inferscale/proto/inference"
	"github.com/inferscale/inferscale/residency/triton"
)

// ErrUnknownModel is returned by SetFault for a model not in the repository.
var ErrUnknownModel = errors.New("tritontest: unknown model")

// Messages the fake answers with, worded as Triton words them where known.
const (
	msgControlDisabled = "explicit model load / unload is not allowed if polling is enabled"
	reasonUnloaded     = "unloaded"
)

// ModelStatus is what the fake holds for one model, for test assertions.
type ModelStatus struct {
	State     triton.State
	Reason    string
	HeldBytes int64 // device memory the model holds now (both copies during a reload)
	Executing int   // requests executing
	Pending   int   // requests queued, not yet executing
	Loads     int   // loads that ended READY, reloads and startup loads included
	Unloads   int   // unloads that completed
	// ConfigJSON is the "config" override of the last successful load.
	ConfigJSON string
}

type stat struct{ count, ns uint64 }

func (s *stat) add(d time.Duration) {
	s.count++
	s.ns += uint64(d)
}

func (s stat) proto() *inference.StatisticDuration {
	return &inference.StatisticDuration{Count: s.count, Ns: s.ns}
}

type loadOp struct {
	done chan struct{}
	err  error
}

type model struct {
	spec            Model
	state           triton.State
	reason          string
	held            int64
	loading         *loadOp
	unloadAfterLoad bool
	executing       int
	queue           []chan struct{}
	loads, unloads  int
	configJSON      string

	rng *rand.Rand // service-time draws (Distribution), seeded by Config.Seed and position

	lastInference                  time.Time
	inferenceCount, executionCount uint64
	success, fail, queued, compute stat
}

// Server is a fake Triton Inference Server: Triton's gRPC protocol subset
// and its /metrics, with a model repository, a device of limited memory,
// per-model queues and injectable faults, all timed by Config.Clock.
// Create it with New (or Start in tests).
type Server struct {
	inference.UnimplementedGRPCInferenceServiceServer

	cfg     Config
	clock   triton.Clock
	metrics *metrics
	uuid    string

	mu        sync.Mutex
	models    map[string]*model
	order     []string
	faults    map[string]Fault
	failed    map[string]int           // loads failed by FailLoad, against FailLoadCount
	hang      map[string]chan struct{} // closed to release hung loads
	leaked    int64
	maxUsed   int64
	restarted chan struct{} // closed and replaced by Restart
	stopping  bool
	changed   chan struct{} // closed and replaced on every state change

	closeOnce sync.Once
	closed    chan struct{}
	grpc      *grpc.Server
	http      *http.Server
	grpcAddr  string
	httpAddr  string
	wg        sync.WaitGroup
}

// New returns a fake server with its startup models loaded, not yet
// listening: call Listen, or register it on your own grpc.Server with
// Register and serve MetricsHandler.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:       cfg,
		clock:     cfg.Clock,
		metrics:   newMetrics(),
		uuid:      cfg.GPUUUID,
		faults:    map[string]Fault{},
		failed:    map[string]int{},
		hang:      map[string]chan struct{}{},
		restarted: make(chan struct{}),
		changed:   make(chan struct{}),
		closed:    make(chan struct{}),
	}
	if s.clock == nil {
		s.clock = triton.RealClock{}
	}
	if s.uuid == "" {
		s.uuid = "GPU-00000000-0000-0000-0000-000000000000"
	}
	for _, m := range cfg.Models {
		s.faults[m.Name] = m.Fault
	}
	s.metrics.gpuTotal.WithLabelValues(s.uuid).Set(float64(cfg.DeviceMemoryBytes))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetLocked()
	return s, nil
}

// resetLocked puts the server in its just-started state: every model
// forgotten, startup models loaded, statistics, metrics and leaks zeroed.
func (s *Server) resetLocked() {
	for _, name := range s.order {
		s.metrics.removeModel(name, s.models[name].spec.version())
	}
	s.models = map[string]*model{}
	s.order = nil
	s.leaked = 0
	for i, spec := range s.cfg.Models {
		s.models[spec.Name] = &model{spec: spec, rng: rand.New(rand.NewPCG(s.cfg.Seed, uint64(i)))}
		s.order = append(s.order, spec.Name)
	}
	for _, spec := range s.cfg.startupModels() {
		m := s.models[spec.Name]
		m.state, m.held, m.loads = triton.StateReady, spec.MemoryBytes, 1
		s.metrics.addModel(spec.Name, spec.version())
	}
	s.changedLocked()
}

// changedLocked records a state change: memory gauges, the high-water mark,
// and a wake-up for Await.
func (s *Server) changedLocked() {
	used := s.usedLocked()
	s.maxUsed = max(s.maxUsed, used)
	s.metrics.gpuUsed.WithLabelValues(s.uuid).Set(float64(used))
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) usedLocked() int64 {
	used := s.leaked
	for _, m := range s.models {
		used += m.held
	}
	return used
}

// Register registers the fake's GRPCInferenceService on r.
func (s *Server) Register(r grpc.ServiceRegistrar) {
	inference.RegisterGRPCInferenceServiceServer(r, s)
}

// MetricsHandler serves Triton's metrics in Prometheus text format.
func (s *Server) MetricsHandler() http.Handler { return s.metrics.handler() }

// Listen serves gRPC on grpcAddr and GET /metrics on metricsAddr (use
// "127.0.0.1:0" for free ports) until Close or Shutdown.
func (s *Server) Listen(grpcAddr, metricsAddr string) error {
	gl, err := net.Listen("tcp", grpcAddr)
	if err != nil {
		return fmt.Errorf("listen grpc %q: %w", grpcAddr, err)
	}
	hl, err := net.Listen("tcp", metricsAddr)
	if err != nil {
		return errors.Join(fmt.Errorf("listen metrics %q: %w", metricsAddr, err), gl.Close())
	}
	return s.Serve(gl, hl)
}

// Serve serves gRPC on gl (with server reflection) and GET /metrics on hl,
// in the background, until Close or Shutdown; it takes ownership of both
// listeners.
func (s *Server) Serve(gl, hl net.Listener) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.grpc != nil {
		return errors.Join(errors.New("tritontest: already serving"), gl.Close(), hl.Close())
	}
	s.grpc = grpc.NewServer()
	s.Register(s.grpc)
	reflection.Register(s.grpc) // lets grpcurl list and call the service
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.MetricsHandler())
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s.grpcAddr, s.httpAddr = gl.Addr().String(), hl.Addr().String()
	srvG, srvH := s.grpc, s.http
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		_ = srvG.Serve(gl) // returns when stopped
	}()
	go func() {
		defer s.wg.Done()
		_ = srvH.Serve(hl) // returns http.ErrServerClosed when closed
	}()
	return nil
}

// GRPCAddr is the gRPC listen address ("127.0.0.1:41234") once serving.
func (s *Server) GRPCAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.grpcAddr
}

// MetricsURL is the metrics endpoint ("http://127.0.0.1:41235/metrics")
// once serving.
func (s *Server) MetricsURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return "http://" + s.httpAddr + "/metrics"
}

// Close stops at once: in-flight requests and loads fail, listeners close.
// It is safe to call more than once.
func (s *Server) Close() error {
	s.stop(false)
	return nil
}

// stop aborts what still waits (hung loads, queued and executing requests,
// all of which then return), and stops the servers; graceful lets the gRPC
// server finish sending the responses of handlers that are returning.
func (s *Server) stop(graceful bool) {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.mu.Lock()
		g, h := s.grpc, s.http
		s.mu.Unlock()
		if g != nil {
			if graceful {
				g.GracefulStop()
			} else {
				g.Stop()
			}
		}
		if h != nil {
			_ = h.Close()
		}
		s.wg.Wait()
	})
}

// Shutdown is Triton's SIGTERM: it stops taking requests (ServerReady turns
// false, new inference requests fail Unavailable), waits until no request
// is queued or executing or ctx ends (Triton's --exit-timeout-secs), then
// closes. It returns ctx's error when requests were still in flight.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.stopping = true
	s.changedLocked()
	s.mu.Unlock()
	err := s.Await(ctx, func() bool { return s.inFlight() == 0 })
	s.stop(true)
	return err
}

func (s *Server) inFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.models {
		n += m.executing + len(m.queue)
	}
	return n
}

// Await returns once cond holds; cond is evaluated now and after every
// state change of the server (loads, unloads, requests, faults, restarts).
// cond may call the server's methods. It fails only with ctx's error.
func (s *Server) Await(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Clock returns the server's clock.
func (s *Server) Clock() triton.Clock { return s.clock }

// DeviceUsedBytes is the device memory in use now: every model's held
// memory plus leaks.
func (s *Server) DeviceUsedBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usedLocked()
}

// MaxDeviceUsedBytes is the highest DeviceUsedBytes since New (not reset by
// Restart): a test asserts it never exceeded the budget.
func (s *Server) MaxDeviceUsedBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxUsed
}

// DeviceMemoryBytes is the device's capacity.
func (s *Server) DeviceMemoryBytes() int64 { return s.cfg.DeviceMemoryBytes }

// Model returns the status of the named model; false when it is not in the
// repository.
func (s *Server) Model(name string) (ModelStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.models[name]
	if !ok {
		return ModelStatus{}, false
	}
	return m.status(), true
}

// Models returns the status of every model in the repository.
func (s *Server) Models() map[string]ModelStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]ModelStatus, len(s.models))
	for name, m := range s.models {
		out[name] = m.status()
	}
	return out
}

func (m *model) status() ModelStatus {
	return ModelStatus{
		State: m.state, Reason: m.reason, HeldBytes: m.held,
		Executing: m.executing, Pending: len(m.queue),
		Loads: m.loads, Unloads: m.unloads, ConfigJSON: m.configJSON,
	}
}

// SetFault replaces the named model's fault; it applies to loads, unloads
// and requests that start afterwards. Clearing HangLoad releases loads that
// hang now. Faults survive Restart.
func (s *Server) SetFault(name string, f Fault) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.models[name]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownModel, name)
	}
	if err := f.validate(m.spec.MemoryBytes); err != nil {
		return fmt.Errorf("%w: fault.%v", ErrInvalidConfig, err)
	}
	s.faults[name] = f
	s.failed[name] = 0
	if !f.HangLoad {
		if ch, ok := s.hang[name]; ok {
			close(ch)
			delete(s.hang, name)
		}
	}
	s.changedLocked()
	return nil
}

// Restart simulates Triton crashing and starting again: in-flight requests
// and loads fail Unavailable, every loaded model is forgotten (back to never
// loaded), leaked memory returns, statistics and metrics restart from zero,
// and the startup models load again.
func (s *Server) Restart() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.restarted)
	s.restarted = make(chan struct{})
	s.resetLocked()
}

func (s *Server) errUnavailable(reason string) error {
	return status.Error(codes.Unavailable, reason)
}

// waitOrAbort waits for ch; it reports false when the server closed or
// restarted (restarted is the channel captured when the work began).
func (s *Server) waitOrAbort(ch <-chan time.Time, restarted chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-restarted:
		return s.errUnavailable("server restarted")
	case <-s.closed:
		return s.errUnavailable("server is shutting down")
	}
}

// ServerLive implements Triton's ServerLive: true until Close.
func (s *Server) ServerLive(context.Context, *inference.ServerLiveRequest) (*inference.ServerLiveResponse, error) {
	select {
	case <-s.closed:
		return &inference.ServerLiveResponse{Live: false}, nil
	default:
		return &inference.ServerLiveResponse{Live: true}, nil
	}
}

// ServerReady implements Triton's ServerReady: false once shutting down.
func (s *Server) ServerReady(context.Context, *inference.ServerReadyRequest) (*inference.ServerReadyResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &inference.ServerReadyResponse{Ready: !s.stopping}, nil
}

// ModelReady implements Triton's ModelReady.
func (s *Server) ModelReady(_ context.Context, req *inference.ModelReadyRequest) (*inference.ModelReadyResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.models[req.GetName()]
	ready := ok && m.state == triton.StateReady && (req.GetVersion() == "" || req.GetVersion() == m.spec.version())
	return &inference.ModelReadyResponse{Ready: ready}, nil
}

// RepositoryIndex implements Triton's RepositoryIndex: every repository
// model in configuration order; never-loaded ones without version or state.
func (s *Server) RepositoryIndex(_ context.Context, req *inference.RepositoryIndexRequest) (*inference.RepositoryIndexResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := &inference.RepositoryIndexResponse{}
	for _, name := range s.order {
		m := s.models[name]
		if req.GetReady() && m.state != triton.StateReady {
			continue
		}
		e := &inference.RepositoryIndexResponse_ModelIndex{Name: name}
		if m.state != triton.StateUnknown {
			e.Version, e.State, e.Reason = m.spec.version(), string(m.state), m.reason
		}
		resp.Models = append(resp.Models, e)
	}
	return resp, nil
}

func loadFailedError(m *model, reason string) error {
	return status.Errorf(codes.Internal, "load failed for model '%s': version %s is at UNAVAILABLE state: %s;", m.spec.Name, m.spec.version(), reason)
}

// RepositoryModelLoad implements Triton's load: it returns when the load has
// finished. A load of a loaded model is a reload: the old copy serves while
// the new one loads, and both hold memory until the swap.
func (s *Server) RepositoryModelLoad(_ context.Context, req *inference.RepositoryModelLoadRequest) (*inference.RepositoryModelLoadResponse, error) {
	name := req.GetModelName()
	var configJSON string
	if p, ok := req.GetParameters()["config"]; ok {
		sp, isString := p.GetParameterChoice().(*inference.ModelRepositoryParameter_StringParam)
		if !isString || !jsonValid(sp.StringParam) {
			return nil, status.Errorf(codes.InvalidArgument, "failed to load '%s', failed to parse the 'config' parameter: want a JSON object in string_param", name)
		}
		configJSON = sp.StringParam
	}

	s.mu.Lock()
	if s.cfg.ModelControlMode != ModeExplicit {
		s.mu.Unlock()
		return nil, status.Error(codes.Unavailable, msgControlDisabled)
	}
	m, ok := s.models[name]
	if !ok {
		s.mu.Unlock()
		return nil, status.Errorf(codes.NotFound, "failed to load '%s', failed to poll from model repository", name)
	}
	restarted := s.restarted
	if op := m.loading; op != nil { // Triton serialises a model's lifecycle
		s.mu.Unlock()
		select {
		case <-op.done:
			return &inference.RepositoryModelLoadResponse{}, op.err
		case <-restarted:
			return nil, s.errUnavailable("server restarted")
		case <-s.closed:
			return nil, s.errUnavailable("server is shutting down")
		}
	}
	reload := m.state == triton.StateReady
	need := m.spec.MemoryBytes
	if free := s.cfg.DeviceMemoryBytes - s.usedLocked(); need > free {
		reason := fmt.Sprintf("failed to load '%s' version %s: Internal: out of memory: the model needs %d bytes, GPU %d has %d of %d bytes free",
			name, m.spec.version(), need, s.cfg.DeviceID, free, s.cfg.DeviceMemoryBytes)
		if !reload {
			m.state, m.reason = triton.StateUnavailable, reason
		}
		err := loadFailedError(m, reason)
		s.changedLocked()
		s.mu.Unlock()
		return nil, err
	}
	op := &loadOp{done: make(chan struct{})}
	m.loading = op
	m.held += need
	if !reload {
		m.state, m.reason = triton.StateLoading, ""
	}
	fault := s.faults[name]
	var hang chan struct{}
	if fault.HangLoad {
		if s.hang[name] == nil {
			s.hang[name] = make(chan struct{})
		}
		hang = s.hang[name]
	}
	s.changedLocked()
	s.mu.Unlock()

	if hang != nil {
		select {
		case <-hang:
		case <-restarted:
			return nil, s.errUnavailable("server restarted")
		case <-s.closed:
			return nil, s.errUnavailable("server is shutting down")
		}
	}
	if err := s.waitOrAbort(s.clock.After(m.spec.LoadTime), restarted); err != nil {
		return nil, err
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if restarted != s.restarted { // restarted between the timer and the lock
		return nil, s.errUnavailable("server restarted")
	}
	m.loading = nil
	fault = s.faults[name]
	if fault.FailLoad != "" && (fault.FailLoadCount == 0 || s.failed[name] < fault.FailLoadCount) {
		s.failed[name]++
		m.held -= need
		reason := fmt.Sprintf("failed to load '%s' version %s: %s", name, m.spec.version(), fault.FailLoad)
		if !reload {
			m.state, m.reason = triton.StateUnavailable, reason
		}
		op.err = loadFailedError(m, reason)
	} else {
		if reload {
			m.held -= need // the swap: the old copy goes, the new one stays
		} else {
			m.state, m.reason = triton.StateReady, ""
			s.metrics.addModel(name, m.spec.version())
		}
		m.loads++
		m.configJSON = configJSON
	}
	if m.unloadAfterLoad {
		m.unloadAfterLoad = false
		s.startUnloadLocked(m)
	}
	close(op.done)
	s.changedLocked()
	return &inference.RepositoryModelLoadResponse{}, op.err
}

// RepositoryModelUnload implements Triton's unload: it returns at once; the
// model is UNLOADING, holding its memory, until its queued and executing
// requests finish. Unloading a model that is not loaded is a no-op.
func (s *Server) RepositoryModelUnload(_ context.Context, req *inference.RepositoryModelUnloadRequest) (*inference.RepositoryModelUnloadResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.ModelControlMode != ModeExplicit {
		return nil, status.Error(codes.Unavailable, msgControlDisabled)
	}
	name := req.GetModelName()
	m, ok := s.models[name]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "failed to unload '%s': Request for unknown model: '%s' is not found", name, name)
	}
	switch {
	case m.loading != nil:
		m.unloadAfterLoad = true // after the load (or reload) in progress
	case m.state == triton.StateReady:
		s.startUnloadLocked(m)
	}
	s.changedLocked()
	return &inference.RepositoryModelUnloadResponse{}, nil
}

func (s *Server) startUnloadLocked(m *model) {
	if m.state != triton.StateReady {
		return
	}
	m.state, m.reason = triton.StateUnloading, ""
	s.maybeFinishUnloadLocked(m)
}

func (s *Server) maybeFinishUnloadLocked(m *model) {
	if m.state != triton.StateUnloading || m.executing > 0 || len(m.queue) > 0 {
		return
	}
	leak := min(s.faults[m.spec.Name].UnloadLeakBytes, m.held)
	s.leaked += leak
	m.held = 0
	m.state, m.reason = triton.StateUnavailable, reasonUnloaded
	m.unloads++
	s.metrics.removeModel(m.spec.Name, m.spec.version())
}

// ModelInfer implements Triton's inference: the request waits in the
// model's queue while Concurrency requests execute, then executes for
// ServiceTime (+ ExtraServiceTime). The response names the model, version
// and id and carries no output tensors.
func (s *Server) ModelInfer(ctx context.Context, req *inference.ModelInferRequest) (*inference.ModelInferResponse, error) {
	name := req.GetModelName()
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		return nil, s.errUnavailable("Server is stopping: not accepting new inference requests")
	}
	m, ok := s.models[name]
	if !ok {
		s.mu.Unlock()
		return nil, status.Errorf(codes.NotFound, "Request for unknown model: '%s' is not found", name)
	}
	if v := req.GetModelVersion(); v != "" && v != m.spec.version() {
		s.mu.Unlock()
		return nil, status.Errorf(codes.NotFound, "Request for unknown model: '%s' version %s is not found", name, v)
	}
	if m.state != triton.StateReady {
		s.mu.Unlock()
		// Triton's text and code (NOT_FOUND; HTTP 404) for a model with no
		// version loaded, whether never loaded, unloading or unloaded.
		return nil, status.Errorf(codes.NotFound, "Request for unknown model: '%s' has no available versions", name)
	}
	batch, err := m.spec.batchSize(req)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	restarted := s.restarted
	arrived := s.clock.Now()
	version := m.spec.version()
	if m.executing < m.spec.concurrency() {
		m.executing++
	} else {
		slot := make(chan struct{})
		m.queue = append(m.queue, slot)
		s.metrics.pending.WithLabelValues(name, version).Set(float64(len(m.queue)))
		s.changedLocked()
		s.mu.Unlock()
		select {
		case <-slot: // the finishing request gave us its slot
		case <-restarted:
			return nil, s.errUnavailable("server restarted")
		case <-s.closed:
			return nil, s.errUnavailable("server is shutting down")
		case <-ctx.Done():
			s.mu.Lock()
			defer s.mu.Unlock()
			if restarted == s.restarted {
				s.leaveQueueLocked(m, slot)
				m.fail.add(s.clock.Now().Sub(arrived))
				s.metrics.failure.WithLabelValues(name, version).Inc()
				s.changedLocked()
			}
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		s.mu.Lock()
	}
	started := s.clock.Now()
	service := addServiceTime(m.serviceTime(), s.faults[name].ExtraServiceTime)
	s.changedLocked()
	s.mu.Unlock()

	// Triton does not cancel a request once it executes.
	if err := s.waitOrAbort(s.clock.After(service), restarted); err != nil {
		return nil, err
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if restarted != s.restarted {
		return nil, s.errUnavailable("server restarted")
	}
	end := s.clock.Now()
	queue, compute := started.Sub(arrived), end.Sub(started)
	m.inferenceCount += batch
	m.executionCount++
	m.success.add(end.Sub(arrived))
	m.queued.add(queue)
	m.compute.add(compute)
	m.lastInference = end
	vals := []string{name, version}
	s.metrics.success.WithLabelValues(vals...).Inc()
	s.metrics.count.WithLabelValues(vals...).Add(float64(batch))
	s.metrics.execCount.WithLabelValues(vals...).Inc()
	s.metrics.requestUS.WithLabelValues(vals...).Add(float64(end.Sub(arrived).Microseconds()))
	s.metrics.queueUS.WithLabelValues(vals...).Add(float64(queue.Microseconds()))
	s.metrics.inferUS.WithLabelValues(vals...).Add(float64(compute.Microseconds()))
	s.releaseSlotLocked(m)
	s.maybeFinishUnloadLocked(m)
	s.changedLocked()
	return &inference.ModelInferResponse{ModelName: name, ModelVersion: version, Id: req.GetId()}, nil
}

// serviceTime draws one request's execution time from the model's distribution (see
// Distribution); the caller holds the server's lock.
func (m *model) serviceTime() time.Duration {
	mean := float64(m.spec.ServiceTime)
	if mean == 0 {
		return 0
	}
	var d float64
	switch m.spec.ServiceDistribution {
	case Exponential:
		d = mean * m.rng.ExpFloat64()
	case Lognormal:
		sigma2 := math.Log1p(m.spec.ServiceCV * m.spec.ServiceCV)
		d = math.Exp(math.Log(mean) - sigma2/2 + math.Sqrt(sigma2)*m.rng.NormFloat64())
	default:
		return min(m.spec.ServiceTime, MaxServiceTime) // Validate keeps it there
	}
	// A draw past MaxServiceTime is cut there: the fake models services, not stuck ones (that
	// is HangLoad's job), and the conversion must not overflow.
	return time.Duration(min(d, float64(MaxServiceTime)))
}

// addServiceTime is a request's time, service + extra (each >= 0), saturating at
// time.Duration's largest value instead of wrapping negative (an instant answer).
func addServiceTime(service, extra time.Duration) time.Duration {
	if extra > 0 && service > math.MaxInt64-extra {
		return math.MaxInt64
	}
	return service + extra
}

// releaseSlotLocked hands a finished request's execution slot to the first
// queued request, if any.
func (s *Server) releaseSlotLocked(m *model) {
	if len(m.queue) == 0 {
		m.executing--
		return
	}
	next := m.queue[0]
	m.queue = m.queue[1:]
	close(next) // keeps the slot: executing is unchanged
	if m.state == triton.StateReady || m.state == triton.StateUnloading {
		s.metrics.pending.WithLabelValues(m.spec.Name, m.spec.version()).Set(float64(len(m.queue)))
	}
}

// leaveQueueLocked removes a cancelled request from the queue; when it was
// handed a slot meanwhile, the slot passes on.
func (s *Server) leaveQueueLocked(m *model, slot chan struct{}) {
	for i, q := range m.queue {
		if q == slot {
			m.queue = append(m.queue[:i], m.queue[i+1:]...)
			s.metrics.pending.WithLabelValues(m.spec.Name, m.spec.version()).Set(float64(len(m.queue)))
			s.maybeFinishUnloadLocked(m)
			return
		}
	}
	s.releaseSlotLocked(m)
	s.maybeFinishUnloadLocked(m)
}

func stateText(st triton.State) string {
	if st == triton.StateUnknown {
		return "never loaded"
	}
	return string(st)
}

// ModelStatistics implements Triton's statistics for one model, or for
// every loaded model when the name is empty.
func (s *Server) ModelStatistics(_ context.Context, req *inference.ModelStatisticsRequest) (*inference.ModelStatisticsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := &inference.ModelStatisticsResponse{}
	if name := req.GetName(); name != "" {
		m, ok := s.models[name]
		if !ok {
			return nil, status.Errorf(codes.NotFound, "requested model '%s' is not found", name)
		}
		if !m.loaded() {
			return nil, status.Errorf(codes.Unavailable, "requested model '%s' is not available (state %s)", name, stateText(m.state))
		}
		resp.ModelStats = append(resp.ModelStats, s.statsLocked(m))
		return resp, nil
	}
	for _, name := range s.order {
		if m := s.models[name]; m.loaded() {
			resp.ModelStats = append(resp.ModelStats, s.statsLocked(m))
		}
	}
	return resp, nil
}

func (m *model) loaded() bool {
	return m.state == triton.StateReady || m.state == triton.StateUnloading
}

func (s *Server) statsLocked(m *model) *inference.ModelStatistics {
	st := &inference.ModelStatistics{
		Name:           m.spec.Name,
		Version:        m.spec.version(),
		InferenceCount: m.inferenceCount,
		ExecutionCount: m.executionCount,
		InferenceStats: &inference.InferStatistics{
			Success:       m.success.proto(),
			Fail:          m.fail.proto(),
			Queue:         m.queued.proto(),
			ComputeInput:  (&stat{count: m.compute.count}).proto(),
			ComputeInfer:  m.compute.proto(),
			ComputeOutput: (&stat{count: m.compute.count}).proto(),
			CacheHit:      &inference.StatisticDuration{},
			CacheMiss:     &inference.StatisticDuration{},
		},
		MemoryUsage: []*inference.MemoryUsage{{Type: "GPU", Id: s.cfg.DeviceID, ByteSize: uint64(m.spec.MemoryBytes)}},
	}
	if !m.lastInference.IsZero() {
		st.LastInference = uint64(m.lastInference.UnixMilli())
	}
	return st
}
