# resplane — see README.md. Every target works on a fresh clone with only Go installed;
# tools (wire, staticcheck) are pinned in go.mod and run with `go tool`.

GO        ?= go
BIN       := bin/resplane
PKG       := ./...
DEMO      := examples/demo
LISTEN    ?= 127.0.0.1:8080
IMAGE     ?= resplane:dev
PREFIX    ?= /usr/local
TEST_LOG  := bin/test.log

# make test pipes go test into tee and must fail when go test does.
SHELL       := bash
.SHELLFLAGS := -o pipefail -c

.DEFAULT_GOAL := help

.PHONY: help build install run test race-toolchain test-short test-large lint fmt arch wire wire-check bench bench-ratios bench-nginx bench-proof bench-observability bench-listing bench-listing-e2e bench-watch load image fuzz clean

help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-20s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## Build the binary into bin/resplane.
	$(GO) build -trimpath -o $(BIN) ./cmd/resplane

install: build ## Install the binary as PREFIX/bin/resplane (default PREFIX=/usr/local) and print its path.
	install -d $(PREFIX)/bin
	install -m 0755 $(BIN) $(PREFIX)/bin/resplane
	@echo "installed $(abspath $(PREFIX))/bin/resplane"

run: build ## Serve the bundled demo capsule on 127.0.0.1:8080.
	@echo "Serving $(DEMO)/murmur.yaml on http://$(LISTEN) — try:"
	@echo "  curl -s http://$(LISTEN)/resources/files"
	@echo "  curl -si http://$(LISTEN)/resources/files/report.md"
	@echo "  curl -s http://$(LISTEN)/.well-known/agent-card.json"
	@echo "Stop with Ctrl-C."
	$(BIN) serve --manifest $(DEMO)/murmur.yaml --workdir $(DEMO)/workdir --listen $(LISTEN) --log-format console

test: race-toolchain arch wire-check ## Check the layers and wire_gen.go, run every test with the race detector (what CI runs), print the slowest packages.
	@mkdir -p $(dir $(TEST_LOG))
	$(GO) test -race -count=1 $(PKG) 2>&1 | tee $(TEST_LOG)
	@echo "Slowest packages:"; grep -E '^ok' $(TEST_LOG) | sort -t$$'\t' -k3 -rn | head -5 | awk -F'\t' '{printf "  %-10s %s\n", $$3, $$2}'

# The race detector needs cgo, and so a C compiler: say so before go test fails with
# "-race requires cgo".
race-toolchain:
	@cc=$$($(GO) env CC); if ! command -v "$$cc" >/dev/null 2>&1; then \
		echo "make test: the race detector needs a C compiler ($$cc, from 'go env CC'), and none is installed;"; \
		echo "install one (Debian, Ubuntu: apt-get install -y gcc), or run 'make test-short' without the race detector"; exit 2; fi

test-short: ## Run the tests without the race detector.
	$(GO) test -count=1 $(PKG)

test-large: ## The opt-in tests too slow for CI (a 1 GiB file in little memory, the review's drips at full scale).
	RESPLANE_TEST_LARGE=1 $(GO) test -count=1 -run 'Gibibyte|FullScale' ./test/blackbox/

lint: ## gofmt, go vet, staticcheck, and the docs' links and decision index (test/docs).
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKG)
	$(GO) tool staticcheck $(PKG)
	$(GO) test -count=1 ./test/docs/

fmt: ## Format the code.
	gofmt -w $$(git ls-files '*.go')

arch: ## Fail when a package imports across the dependency rule.
	$(GO) run ./scripts/archcheck

wire: ## Regenerate wire_gen.go from wire.go.
	$(GO) tool wire gen .

wire-check: ## Fail when wire_gen.go is not what wire generates.
	$(GO) tool wire diff . || (echo "wire_gen.go is stale: run 'make wire'"; exit 1)

# The measurements (bench/README.md, docs/benchmarks.md). Each script reads its settings from
# the environment, so `make bench-nginx ROUNDS=5` passes ROUNDS on; none installs anything.
bench: ## Run every Go benchmark once, raw output only.
	$(GO) test -run '^$$' -bench . -benchmem $(PKG)

bench-ratios: ## Run the Go benchmarks COUNT times and print each side-by-side ratio (bench/bench.sh).
	bench/bench.sh

bench-nginx: ## One core each: this tree against nginx and against BASE_REF (bench/nginx-bench.sh).
	bench/nginx-bench.sh

bench-proof: ## One core: a bound redeem with its DPoP proof against an unbound one (bench/proof-bench.sh).
	bench/proof-bench.sh

bench-observability: ## What metrics and spans cost a read on a saturated core (bench/observability-bench.sh).
	bench/observability-bench.sh

bench-listing: ## BenchmarkListing of this tree against BASE, warm and cold (bench/listing-bench.sh).
	bench/listing-bench.sh

bench-listing-e2e: ## A warm GET /resources/files against a cold one, over HTTP (bench/listing-e2e.sh).
	bench/listing-e2e.sh

bench-watch: ## What files pull --watch at the default interval costs the service (bench/watch-poll-cost.sh).
	bench/watch-poll-cost.sh

fuzz: ## Run every fuzz target for FUZZTIME each (default 30s), one at a time (see scripts/fuzz.sh).
	GO=$(GO) scripts/fuzz.sh

load: build ## Load-test the real binary next to a net/http.FileServer baseline (bench/load.sh).
	bench/load.sh

image: ## Build the container image (IMAGE, default resplane:dev) from Containerfile with podman or docker.
	@if command -v podman >/dev/null 2>&1; then engine=podman; \
	elif command -v docker >/dev/null 2>&1; then engine=docker; \
	else echo "make image: neither podman nor docker is installed; install one of them to build the image"; exit 1; fi; \
	if ! $$engine info >/dev/null 2>&1; then \
		echo "make image: $$engine is installed, but its engine does not answer ($$engine info fails); start it, then run make image again"; exit 1; fi; \
	echo "make image: building $(IMAGE) from Containerfile with $$engine"; \
	$$engine build -f Containerfile -t $(IMAGE) .

clean: ## Remove build output.
	rm -rf bin
