# Autoscaling engines for tests/autoscaling (docs/autoscaling.md): the KEDA operator and its metrics
# API server (cmd/operator, cmd/adapter of github.com/kedacore/keda/v2 v2.21.0,
# tests/autoscaling/keda/go.mod, which restates KEDA's replace/exclude directives) and Prometheus
# (cmd/prometheus of github.com/prometheus/prometheus v0.316.0, tests/autoscaling/prometheus/go.mod).
# The HPA is kube-controller-manager's own controller, already in kcp.
#
# Prometheus is built as its .promu.yml builds it minus the `builtinassets` tag (the web UI's
# compressed assets are left out: the tests only use its HTTP API) and with every service-discovery
# plugin removed (`remove_all_sd`) but Kubernetes' (`enable_kubernetes_sd`); file and HTTP discovery
# are always in.
#
# Build times, measured by this file's rules (each build appends to $(CACHE)/autoscaling/build-times.jsonl),
# on this 2-core machine shared with ~8 other helpers' builds (load average 20-44 throughout):
#   cold (modules fetched by `go mod tidy` in ~1 min; Go build cache cold for most of these trees), the two
#   built side by side from 21:35 UTC: prometheus 3838 s (64 min; binary 109 MB); keda-operator +
#   keda-adapter 4597 s (77 min).
#   warm (Go build cache warm, nothing changed): prometheus 100 s (mostly the link; load 20); keda: not
#   measured yet (expect two links of the same order). A quiet machine is several times faster: these are upper bounds.
# On a quiet machine (2026-11-29, load 1-3): keda-operator + keda-adapter cold (an empty GOCACHE, modules already
#   downloaded) 665 s, prometheus cold 220 s (niced, beside tests); warm 18 s and 6 s. make pytest-integration
#   (tests/autoscaling) builds both.
# Rebuilt only when a go.mod/go.sum changes. Go caches stay at their defaults outside the repo.
.PHONY: autoscaling keda prometheus

AS_DIR       := $(ROOT)/tests/autoscaling
AS_BUILD     := $(CACHE)/autoscaling
AS_GOENV     := GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
KEDA_MODULE  := github.com/kedacore/keda/v2
KEDA_VERSION := $(shell sed -n 's|^require $(KEDA_MODULE) \(v[^ ]*\).*|\1|p; s|^[[:space:]]*$(KEDA_MODULE) \(v[^ ]*\).*|\1|p' $(AS_DIR)/keda/go.mod | head -1)
PROM_MODULE  := github.com/prometheus/prometheus
PROM_VERSION := $(shell sed -n 's|^require $(PROM_MODULE) \(v[^ ]*\).*|\1|p; s|^[[:space:]]*$(PROM_MODULE) \(v[^ ]*\).*|\1|p' $(AS_DIR)/prometheus/go.mod | head -1)
KEDA_BINS    := $(CACHE)/bin/keda-operator $(CACHE)/bin/keda-adapter
PROM_BIN     := $(CACHE)/bin/prometheus
PROM_TAGS    := netgo,remove_all_sd,enable_kubernetes_sd

# $(1) what, $(2) module dir, $(3) where the binary goes (a dir/ for several), $(4) go build arguments (-o @OUT@)
define as_build
	@command -v $(GO) >/dev/null || { echo "autoscaling: Go (1.26) is needed to build $(1)" >&2; exit 1; }
	@mkdir -p $(CACHE)/bin $(AS_BUILD)
	@t0=$$(date +%s); cd $(2) && $(GO_LINKED) $(3) -- env $(AS_GOENV) $(GO) build -trimpath $(4) \
	  && s=$$(( $$(date +%s) - t0 )) && echo "autoscaling: $(1) built in $$s s" \
	  && echo "{\"what\": \"$(1)\", \"seconds\": $$s, \"at\": \"$$(date -u +%FT%TZ)\", \"load\": \"$$(cut -d' ' -f1-3 /proc/loadavg)\"}" >> $(AS_BUILD)/build-times.jsonl
endef

$(AS_BUILD)/keda.built: $(AS_DIR)/keda/go.mod $(AS_DIR)/keda/go.sum
	@echo "autoscaling: building keda-operator, keda-adapter ($(KEDA_MODULE) $(KEDA_VERSION))"
	$(call as_build,keda,$(AS_DIR)/keda,$(AS_BUILD)/keda/,-ldflags "-X $(KEDA_MODULE)/version.Version=$(KEDA_VERSION)" -o @OUT@ $(KEDA_MODULE)/cmd/operator $(KEDA_MODULE)/cmd/adapter)
	cp $(AS_BUILD)/keda/operator $(CACHE)/bin/keda-operator
	cp $(AS_BUILD)/keda/adapter $(CACHE)/bin/keda-adapter
	touch $@

$(KEDA_BINS): $(AS_BUILD)/keda.built

$(PROM_BIN): $(AS_DIR)/prometheus/go.mod $(AS_DIR)/prometheus/go.sum
	@echo "autoscaling: building prometheus ($(PROM_MODULE) $(PROM_VERSION), tags $(PROM_TAGS))"
	$(call as_build,prometheus,$(AS_DIR)/prometheus,$@,-tags $(PROM_TAGS) -ldflags "-X github.com/prometheus/common/version.Version=$(PROM_VERSION)" -o @OUT@ $(PROM_MODULE)/cmd/prometheus)

keda: $(KEDA_BINS)
prometheus: $(PROM_BIN)
autoscaling: keda prometheus
