# make demo: start the local control plane (profile h100-8x2-rdma unless PROFILE is given),
# converge the example chat site on it with `blueprints converge` (plan -> platform -> serving ->
# verify, a progress bar per stage and a summary), then print the plan from the sizing report.
#
# It says up front what a first run costs. Figures measured on this 2-core machine while other
# builds and tests shared it (2026-11-23): cold build of the control plane (kcp) 15.6 min, of
# KServe's controller (llmisvc) DEMO_KSERVE_MIN min; Go module cache 2.3 GB (every module the two
# builds and the CRD collection read: zips + extracted trees) and Go build cache
# DEMO_BUILD_CACHE_GB GB, in ~/go/pkg/mod and ~/.cache/go-build (kept for later builds).
.PHONY: demo demo-intro demo-build
DEMO_SITE           ?= example-chat
DEMO_REPORT         := $(ROOT)/reports
DEMO_COLD_MIN       := 20-40
DEMO_WARM_MIN       := 3-6
DEMO_GO_CACHE_GB    := 6.7
DEMO_BUILD_CACHE_GB := 4.4

demo-intro:
	@echo "make demo: converge inventories/$(DEMO_SITE) on a local control plane (kube-apiserver + the real KServe controller)."
	@if [ -x $(KCP_BIN) ] && [ -x $(KSERVE_BIN) ]; then \
	  echo "  control plane and KServe controller already built: about $(DEMO_WARM_MIN) minutes from here."; \
	else \
	  echo "  First run: builds kube-apiserver and KServe's controller from their Go modules."; \
	  echo "  That takes about $(DEMO_COLD_MIN) minutes on 2 cores and fills about $(DEMO_GO_CACHE_GB) GB of Go caches"; \
	  echo "  ($$($(GO) env GOMODCACHE 2>/dev/null || echo '~/go/pkg/mod') and $$($(GO) env GOCACHE 2>/dev/null || echo '~/.cache/go-build'); kept for later runs)."; \
	  echo "  Progress is printed every 30 s while Go compiles; later runs take about $(DEMO_WARM_MIN) minutes."; \
	fi
	@echo

# The Go builds of controlplane.mk, with a progress line every 30 s (go build itself is silent).
demo-build: setup
	@if [ ! -x $(KCP_BIN) ] || [ ! -x $(KSERVE_BIN) ]; then \
	  $(PY) scripts/build_progress.py --expect-gb $(DEMO_BUILD_CACHE_GB) --label "go build" -- \
	    $(MAKE) --no-print-directory $(KCP_BIN) $(KSERVE_BIN); \
	fi

demo: demo-intro setup demo-build cluster-up
	K8S_AUTH_KUBECONFIG=$(CLUSTER_DIR)/kubeconfig \
	  $(VENV)/bin/blueprints converge --site inventories/$(DEMO_SITE) -e report_dir=$(DEMO_REPORT)
	@echo
	@echo "Plan summary ($(DEMO_REPORT)/$(DEMO_SITE)/report.md; latency, layout candidates, decisions and engine arguments are there too):"
	@awk '/^## /{show=1} /^### (Latency|Layout candidates|Aggregated|Estimates|Decisions|Where|Warnings|Engine)/{show=0} \
	      show && !/^!\[/' $(DEMO_REPORT)/$(DEMO_SITE)/report.md
	@echo "Cluster: export KUBECONFIG=$(CLUSTER_DIR)/kubeconfig; $(CACHE)/bin/kubectl get llminferenceservices,inferencepools -A"
	@echo "Stop it with: make cluster-down"
