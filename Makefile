# inferscale — run `make help` for the targets.
SHELL := /bin/bash
GO ?= go
# Build and test with at least go.mod's toolchain line (go1.27.3): Go 1.26.8's crypto/x509, crypto/tls,
# net/http (HTTP/1 desynchronisation, HTTP/2 client framing), net/textproto and html/template carry
# known, reachable vulnerabilities (`make vulncheck`). With auto, a Go older than that line fetches it
# from the module proxy on first use (about 76 MB, seconds) and a newer one is used as it is, even
# where the machine's go.env says local. GOTOOLCHAIN in your environment wins (local: your own Go);
# a `go env -w GOTOOLCHAIN=...` setting does not, as make's export comes before it.
export GOTOOLCHAIN ?= auto
# go-nvml's cgo preamble declares functions NVML 13 marks deprecated; silence gcc's noise.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
# Integration tests need a real Prometheus server; under `make test` a missing binary is a failure, not a skip.
export INFERSCALE_REQUIRE_PROMETHEUS ?= 1
BIN := bin
STATICCHECK_VERSION ?= v0.8.2
GREMLINS_VERSION ?= v0.6.0
# make images: the tag is the chart's appVersion, so the chart's default install pulls these images.
IMAGE_TAG ?= $(shell sed -n 's/^appVersion: *"*\([^"]*\)"*/\1/p' deploy/helm/inferscale/Chart.yaml)
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  \033[36m%-10s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build every command into ./bin.
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/...

.PHONY: test
test: ## Run unit and integration tests (needs Debian's prometheus on PATH).
	@# Build every test binary in parallel, then run the packages one at a time: several
	@# start a real Prometheus, and the scaler's load test holds 50 clients to a 500 ms deadline.
	$(GO) test -count=1 -run '^$$' ./... >/dev/null
	$(GO) test -count=1 -p 1 -timeout 20m ./...

# The packages that run goroutines (servers, pollers, informers, the front's holds, the capacity
# ramp's senders); replay, deploy and hack are single-threaded, e2e needs its control plane.
RACE_PKGS ?= ./capacity/... ./cmd/... ./internal/... ./ledger/... ./prom/... ./residency/... ./scaler/...

.PHONY: race
race: ## Run the concurrent packages' tests under the race detector (cgo and gcc; about 15 minutes).
	CGO_ENABLED=1 $(GO) test -race -count=1 -p 1 -timeout 40m $(RACE_PKGS)

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 10s; CI runs this after make test).
	FUZZTIME=$${FUZZTIME:-10s} ./hack/fuzz.sh

.PHONY: bench
bench: ## Run Go benchmarks and replay comparisons; figures go in BENCHMARKS.md.
	$(GO) test -run '^$$' -bench . -benchmem -count 1 -timeout 30m ./...

.PHONY: demo
demo: ## Replay the embedded Azure LLM code trace and print the comparison table.
	$(GO) run ./cmd/replay

.PHONY: images
images: ## OCI image archives (scaler residency tritonfake ledger; amd64+arm64) in dist/images/, no daemon.
	$(GO) run ./hack/images --out dist/images --tag "$(IMAGE_TAG)" --platforms "$(IMAGE_PLATFORMS)" \
	  --revision "$$(git rev-parse HEAD 2>/dev/null)" \
	  --source-date-epoch "$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct 2>/dev/null || date +%s)}"

.PHONY: e2e
e2e: ## End-to-end suite on a real kube-apiserver, HPA, KEDA and Prometheus (builds binaries once, cached).
	$(GO) test -tags e2e -count=1 -timeout 80m -v ./e2e/...

.PHONY: vulncheck
vulncheck: ## govulncheck against the Go vulnerability database (from the module proxy; VULNDB_VERSION=latest for the newest).
	GO=$(GO) hack/vulncheck.sh

.PHONY: lint
lint: ## gofmt, go vet (with and without cgo) and staticcheck (staticcheck.conf), the e2e-tagged files included.
	@gofmt="$$($(GO) env GOROOT)/bin/gofmt"; out="$$("$$gofmt" -l $$(git ls-files '*.go'))" || exit 1; \
	  test -z "$$out" || { echo "$$out"; echo "gofmt needed"; exit 1; }
	$(GO) vet ./...
	@# The images build without cgo (no NVML): vet those files as well as the cgo ones.
	@# residency/sidecar's tests use go-nvml's mock, which needs cgo; the build checks its code.
	CGO_ENABLED=0 $(GO) build ./...
	CGO_ENABLED=0 $(GO) vet $$(CGO_ENABLED=0 $(GO) list ./... | grep -v '/residency/sidecar$$')
	$(GO) vet -tags e2e ./e2e/...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) -tags e2e ./...

.PHONY: mutation
mutation: ## Mutation testing of the pure cores (gremlins v0.6.0, one worker; about 20 minutes).
	@for p in ./scaler/decision ./residency/plan; do \
	  $(GO) run github.com/go-gremlins/gremlins/cmd/gremlins@$(GREMLINS_VERSION) unleash --workers 1 --timeout-coefficient 60 --output-statuses l $$p || exit 1; \
	done

.PHONY: generate
generate: ## Regenerate the Triton protocol Go code from proto/ (needs protoc from protobuf-compiler).
	$(GO) generate ./proto/...

.PHONY: verify
verify: generate ## Fail when generated code is stale.
	@git diff --exit-code -- proto/ || (echo "generated code is stale: run make generate and commit"; exit 1)
