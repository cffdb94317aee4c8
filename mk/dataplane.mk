# Data plane: the real llm-d router (endpoint picker and P/D sidecar of llm-d-router v0.9.0, what
# KServe v0.20.0's scheduler preset runs) and llm-d-inference-sim v0.10.2 (vLLM's API, metrics and
# P/D protocol), built from their Go modules into .cache/bin for tests/dataplane (docs/dataplane.md).
#
# tests/dataplane/router/go.mod requires github.com/llm-d/llm-d-router by version. The build runs in
# a copy of that module under .cache/dataplane (the repository is never written): when the Go module
# proxy serves the router it is used as published; when it refuses it (as the proxy reachable here
# does), the copy gets `replace github.com/llm-d/llm-d-router => <unpacked snapshot>`, the snapshot
# being ROUTER_SNAPSHOT (default ../shared/upstream/llm-d-router-<version>.tar.gz beside the clone),
# unpacked under .cache/upstream. Every other dependency comes from the module proxy, checked
# against tests/dataplane/router/go.sum. The simulator module (tests/dataplane/sim) is served.
#
# Every build appends its seconds to .cache/dataplane/build-times.jsonl; tests/bench/
# test_dataplane_bench.py prints them and, with DATAPLANE_COLD_BUILD=1, measures a cold build (an
# empty Go build cache). Cold on this 2-core machine with other builds running (load 12-20): router
# 471 s, simulator 901 s; with the Go build cache warm: ~25 s. Rebuilt only when their go.mod/go.sum
# or our programs change.
.PHONY: dataplane dataplane-tidy

DP_DIR          := $(ROOT)/tests/dataplane
DP_ROUTER_MOD   := $(DP_DIR)/router
DP_SIM_MOD      := $(DP_DIR)/sim
ROUTER_MODULE   := github.com/llm-d/llm-d-router
SIM_MODULE      := github.com/llm-d/llm-d-inference-sim
ROUTER_VERSION  := $(shell sed -n 's|^require $(ROUTER_MODULE) \(v[^ ]*\).*|\1|p; s|^[[:space:]]*$(ROUTER_MODULE) \(v[^ ]*\).*|\1|p' $(DP_ROUTER_MOD)/go.mod | head -1)
SIM_VERSION     := $(shell sed -n 's|^require $(SIM_MODULE) \(v[^ ]*\).*|\1|p; s|^[[:space:]]*$(SIM_MODULE) \(v[^ ]*\).*|\1|p' $(DP_SIM_MOD)/go.mod | head -1)
ROUTER_SNAPSHOT ?= $(ROOT)/../shared/upstream/llm-d-router-$(ROUTER_VERSION).tar.gz
DP_BUILD        := $(CACHE)/dataplane
DP_UPSTREAM     := $(CACHE)/upstream/llm-d-router-$(ROUTER_VERSION)
DP_ROUTER_BINS  := $(CACHE)/bin/epp $(CACHE)/bin/pd-sidecar $(CACHE)/bin/eppcheck $(CACHE)/bin/loopfwd $(CACHE)/bin/loadgen
DP_ROUTER_STAMP := $(DP_BUILD)/router.built
DP_SIM_BIN      := $(CACHE)/bin/llm-d-inference-sim
DP_GOENV        := GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
DP_ROUTER_PKGS  := $(ROUTER_MODULE)/cmd/epp $(ROUTER_MODULE)/cmd/pd-sidecar ./cmd/eppcheck ./cmd/loopfwd ./cmd/loadgen

# The copy of tests/dataplane/router the build runs in, pointed at the router: the published module
# when the proxy serves it, else the unpacked snapshot (prints which).
define dp_router_copy
	@command -v $(GO) >/dev/null || { echo "dataplane: Go (1.26) is needed to build the llm-d router" >&2; exit 1; }
	rm -rf $(DP_BUILD)/router && mkdir -p $(DP_BUILD)/router
	cp -R $(DP_ROUTER_MOD)/. $(DP_BUILD)/router/
	@if (cd $(DP_BUILD)/router && $(DP_GOENV) $(GO) mod download $(ROUTER_MODULE)@$(ROUTER_VERSION) >/dev/null 2>&1); then \
	  echo "dataplane: $(ROUTER_MODULE) $(ROUTER_VERSION) from the Go module proxy"; \
	else \
	  test -f "$(ROUTER_SNAPSHOT)" || { echo "dataplane: the Go module proxy refuses $(ROUTER_MODULE) $(ROUTER_VERSION) and there is no snapshot at ROUTER_SNAPSHOT=$(ROUTER_SNAPSHOT) (shared/upstream beside the clone; see its README)" >&2; exit 1; }; \
	  echo "dataplane: the Go module proxy refuses $(ROUTER_MODULE) $(ROUTER_VERSION): replaced by $(ROUTER_SNAPSHOT), unpacked into $(DP_UPSTREAM)"; \
	  if [ ! -f $(DP_UPSTREAM)/go.mod ]; then rm -rf $(DP_UPSTREAM).tmp && mkdir -p $(DP_UPSTREAM).tmp && \
	    tar -xzf "$(ROUTER_SNAPSHOT)" -C $(DP_UPSTREAM).tmp --strip-components=1 && \
	    grep -q '^module $(ROUTER_MODULE)$$' $(DP_UPSTREAM).tmp/go.mod && mv $(DP_UPSTREAM).tmp $(DP_UPSTREAM); fi; \
	  cd $(DP_BUILD)/router && $(GO) mod edit -replace=$(ROUTER_MODULE)=$(DP_UPSTREAM); \
	fi
endef

$(DP_ROUTER_STAMP): $(DP_ROUTER_MOD)/go.mod $(DP_ROUTER_MOD)/go.sum $(wildcard $(DP_ROUTER_MOD)/cmd/*/*.go) $(ROOT)/mk/dataplane.mk
	$(dp_router_copy)
	@mkdir -p $(CACHE)/bin
	@echo "dataplane: building epp, pd-sidecar ($(ROUTER_MODULE) $(ROUTER_VERSION)), eppcheck, loopfwd, loadgen (cold: minutes, then cached)"
	@t0=$$(date +%s); cd $(DP_BUILD)/router && $(GO_LINKED) $(DP_BUILD)/router-bin/ -- env $(DP_GOENV) $(GO) build -trimpath \
	  -ldflags "-X $(ROUTER_MODULE)/version.BuildRef=$(ROUTER_VERSION)" -o @OUT@ $(DP_ROUTER_PKGS) \
	  && s=$$(( $$(date +%s) - t0 )) && echo "dataplane: router binaries built in $$s s" \
	  && echo "{\"what\": \"router\", \"seconds\": $$s, \"at\": \"$$(date -u +%FT%TZ)\", \"load\": \"$$(cut -d' ' -f1-3 /proc/loadavg)\"}" >> $(DP_BUILD)/build-times.jsonl
	cp $(addprefix $(DP_BUILD)/router-bin/,epp pd-sidecar eppcheck loopfwd loadgen) $(CACHE)/bin/
	touch $@

$(DP_ROUTER_BINS): $(DP_ROUTER_STAMP)

$(DP_SIM_BIN): $(DP_SIM_MOD)/go.mod $(DP_SIM_MOD)/go.sum
	@command -v $(GO) >/dev/null || { echo "dataplane: Go (1.26) is needed to build llm-d-inference-sim" >&2; exit 1; }
	@mkdir -p $(@D) $(DP_BUILD)
	rm -rf $(DP_BUILD)/sim && mkdir -p $(DP_BUILD)/sim && cp -R $(DP_SIM_MOD)/. $(DP_BUILD)/sim/
	@echo "dataplane: building $(SIM_MODULE) $(SIM_VERSION) (pure Go: its tokenizer is an in-process one or an HTTP render service, no cgo)"
	@t0=$$(date +%s); cd $(DP_BUILD)/sim && $(GO_LINKED) $@ -- env $(DP_GOENV) $(GO) build -trimpath -o @OUT@ \
	  $(SIM_MODULE)/cmd/llm-d-inference-sim && s=$$(( $$(date +%s) - t0 )) && echo "dataplane: simulator built in $$s s" \
	  && echo "{\"what\": \"simulator\", \"seconds\": $$s, \"at\": \"$$(date -u +%FT%TZ)\", \"load\": \"$$(cut -d' ' -f1-3 /proc/loadavg)\"}" >> $(DP_BUILD)/build-times.jsonl

dataplane: $(DP_ROUTER_BINS) $(DP_SIM_BIN)

# The test sessions that collect tests/dataplane (make test runs pytest-rest) and the bench build the
# data plane first. Not a prerequisite of controlplane: make demo and cluster-up do not need it
# (a cold build adds ~20 minutes on 2 cores).
pytest pytest-rest pytest-integration pytest-heavy bench: dataplane

# Maintainers: rewrite both go.mod/go.sum after a version change (go mod tidy in the copies).
dataplane-tidy:
	$(dp_router_copy)
	cd $(DP_BUILD)/router && $(DP_GOENV) $(GO) mod tidy && $(GO) mod edit -dropreplace=$(ROUTER_MODULE) \
	  && cp go.mod go.sum $(DP_ROUTER_MOD)/
	rm -rf $(DP_BUILD)/sim && mkdir -p $(DP_BUILD)/sim && cp -R $(DP_SIM_MOD)/. $(DP_BUILD)/sim/
	cd $(DP_BUILD)/sim && $(DP_GOENV) $(GO) mod tidy && cp go.mod go.sum $(DP_SIM_MOD)/
