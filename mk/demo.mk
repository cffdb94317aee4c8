# make demo: start the local control plane (profile h100-8x2-rdma unless PROFILE is given),
# converge the example chat site on it with `blueprints converge` (plan -> platform -> serving ->
# verify, a progress bar per stage and a summary), then print the plan from the sizing report.
#
# It says up front what a first run costs. Measured 2026-11-23 on this 2-core machine while other
# builds and tests kept it busy (load 8-15), with an empty Go build cache (nice 19):
#   kcp (kube-apiserver & co.)  15.6 min wall, 10.3 CPU-min, +3.1 GB build cache
#   llmisvc (KServe controller)  9.6 min wall,  4.9 CPU-min, +1.5 GB build cache
#   Go modules both builds and the CRD collection read: 2.3 GB (zips + extracted trees)
# so 4.6 GB of build cache + 2.3 GB of modules = 6.8 GB in ~/.cache/go-build and ~/go/pkg/mod
# (kept for later builds). Then the CRD collection, the first control plane start (50-130 s) and
# the converge add a few minutes; on an idle machine the builds take about half the wall time.
.PHONY: demo demo-intro demo-build
DEMO_SITE           ?= example-chat
DEMO_REPORT         := $(ROOT)/reports
DEMO_COLD_MIN       := 20-45
DEMO_WARM_MIN       := 3-6
DEMO_GO_CACHE_GB    := 6.8
DEMO_BUILD_CACHE_GB := 4.6

# Warm Go caches (a fresh clone, or `make clean`, on a machine that built them before): the modules the builds
# read are in GOMODCACHE and GOCACHE holds their compiled packages, so only the link steps are left.
DEMO_GO_WARM = [ -d "$$($(GO) env GOMODCACHE 2>/dev/null)/k8s.io/kubernetes@$(KCP_K8S_VER)" ] && \
  [ -d "$$($(GO) env GOMODCACHE 2>/dev/null)/github.com/kserve/kserve@$(KSERVE_VER)" ] && \
  [ -n "$$(ls -A "$$($(GO) env GOCACHE 2>/dev/null)" 2>/dev/null)" ]

demo-intro:
	@echo "make demo: converge inventories/$(DEMO_SITE) on a local control plane (kube-apiserver + the real KServe controller)."
	@if [ -x $(KCP_BIN) ] && [ -x $(KSERVE_BIN) ] && [ -x $(KWOK_BIN) ] && [ -x $(LWS_BIN) ]; then \
	  echo "  control plane and KServe controller already built: about $(DEMO_WARM_MIN) minutes from here."; \
	elif $(DEMO_GO_WARM); then \
	  echo "  The binaries are built from the Go caches this machine already holds (modules and compiled packages):"; \
	  echo "  mostly link steps, a few minutes, then about $(DEMO_WARM_MIN) minutes to converge."; \
	else \
	  echo "  First run: builds kube-apiserver and KServe's controller from their Go modules."; \
	  echo "  That takes about $(DEMO_COLD_MIN) minutes on 2 cores and fills about $(DEMO_GO_CACHE_GB) GB of Go caches"; \
	  echo "  ($$($(GO) env GOMODCACHE 2>/dev/null || echo '~/go/pkg/mod') and $$($(GO) env GOCACHE 2>/dev/null || echo '~/.cache/go-build'); kept for later runs)."; \
	  echo "  Progress is printed every 30 s while Go compiles; later runs take about $(DEMO_WARM_MIN) minutes."; \
	fi
	@echo

# The Go builds of controlplane.mk, with a progress line every 30 s (go build itself is silent).
demo-build: setup
	@if [ ! -x $(KCP_BIN) ] || [ ! -x $(KSERVE_BIN) ] || [ ! -x $(KWOK_BIN) ] || [ ! -x $(LWS_BIN) ]; then \
	  $(PY) scripts/build_progress.py --expect-gb $(DEMO_BUILD_CACHE_GB) --label "go build" -- \
	    $(MAKE) --no-print-directory $(KCP_BIN) $(KSERVE_BIN) $(KWOK_BIN) $(LWS_BIN); \
	fi

demo: demo-intro setup demo-build cluster-up
	K8S_AUTH_KUBECONFIG=$(CLUSTER_DIR)/kubeconfig \
	  $(VENV)/bin/blueprints converge --site inventories/$(DEMO_SITE) -e report_dir=$(DEMO_REPORT)/$(DEMO_SITE)
	@echo
	@echo "Plan summary ($(DEMO_REPORT)/$(DEMO_SITE)/report.md; latency, layout candidates, decisions and engine arguments are there too):"
	@awk '/^## /{show=1} /^### (Latency|Layout candidates|Aggregated|Estimates|Decisions|Where|Warnings|Engine)/{show=0} \
	      show && !/^!\[/' $(DEMO_REPORT)/$(DEMO_SITE)/report.md
	@echo "Cluster: export KUBECONFIG=$(CLUSTER_DIR)/kubeconfig; $(CACHE)/bin/kubectl get llminferenceservices,inferencepools -A"
	@$(PY) scripts/demo_outro.py --site inventories/$(DEMO_SITE) --kubeconfig $(CLUSTER_DIR)/kubeconfig --kubectl $(CACHE)/bin/kubectl
