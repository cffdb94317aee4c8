# GitOps: Argo CD's application controller and repo server (github.com/argoproj/argo-cd/v3, the
# version tests/gitops/argocd/go.mod names) in one multi-call binary of ours, and Redis from Debian,
# for tests/gitops (docs/gitops.md).
#
# Argo CD's go.mod replaces github.com/argoproj/argo-cd/gitops-engine with its in-repository folder,
# at a pseudo-version the Go module proxy reachable here refuses. The build runs in a copy of
# tests/gitops/argocd under .cache/gitops (the repository is never written) which replaces it with
# ARGOCD_ENGINE_SNAPSHOT (default ../shared/upstream/argo-cd-<version>-gitops-engine.tar.gz beside
# the clone) unpacked under .cache/upstream. Every other dependency comes from the module proxy,
# checked against tests/gitops/argocd/go.sum.
#
# Build times (seconds) are appended to .cache/gitops/build-times.jsonl. Measured on this 2-core
# machine: cold (Argo CD's ~1,500 packages not in the Go build cache; the module cache warm, `go mod
# tidy` 50 s before it) 2347 s on 2026-11-28, load 40-44 with four other Go builds running beside it
# (user time 285 s: alone it is a few minutes). Warm (Go build cache filled, a rebuild when go.mod
# or this file changes): not measured yet; expected link only, about a minute.
.PHONY: gitops redis

GO_ARGOCD_MOD    := $(ROOT)/tests/gitops/argocd
ARGOCD_MODULE    := github.com/argoproj/argo-cd/v3
ARGOCD_ENGINE    := github.com/argoproj/argo-cd/gitops-engine
ARGOCD_VERSION   := $(shell sed -n 's|^[[:space:]]*$(ARGOCD_MODULE) \(v[^ ]*\).*|\1|p' $(GO_ARGOCD_MOD)/go.mod | head -1)
ARGOCD_ENGINE_SNAPSHOT ?= $(ROOT)/../shared/upstream/argo-cd-$(ARGOCD_VERSION)-gitops-engine.tar.gz
GITOPS_BUILD     := $(CACHE)/gitops
ARGOCD_UPSTREAM  := $(CACHE)/upstream/argo-cd-$(ARGOCD_VERSION)-gitops-engine
ARGOCD_BIN       := $(CACHE)/bin/argocd
GITOPS_GOENV     := GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod

$(ARGOCD_BIN): $(GO_ARGOCD_MOD)/go.mod $(GO_ARGOCD_MOD)/go.sum $(wildcard $(GO_ARGOCD_MOD)/cmd/*/*.go) $(ROOT)/mk/gitops.mk
	@command -v $(GO) >/dev/null || { echo "gitops: Go (1.26) is needed to build Argo CD" >&2; exit 1; }
	@test -f "$(ARGOCD_ENGINE_SNAPSHOT)" || { echo "gitops: $(ARGOCD_ENGINE) (Argo CD $(ARGOCD_VERSION)'s in-repository sync engine) is refused by the Go module proxy and there is no snapshot at ARGOCD_ENGINE_SNAPSHOT=$(ARGOCD_ENGINE_SNAPSHOT) (shared/upstream beside the clone; see its README)" >&2; exit 1; }
	@if [ ! -f $(ARGOCD_UPSTREAM)/go.mod ]; then rm -rf $(ARGOCD_UPSTREAM).tmp && mkdir -p $(ARGOCD_UPSTREAM).tmp && \
	  tar -xzf "$(ARGOCD_ENGINE_SNAPSHOT)" -C $(ARGOCD_UPSTREAM).tmp --strip-components=1 && \
	  grep -q '^module $(ARGOCD_ENGINE)$$' $(ARGOCD_UPSTREAM).tmp/go.mod && mv $(ARGOCD_UPSTREAM).tmp $(ARGOCD_UPSTREAM); fi
	rm -rf $(GITOPS_BUILD)/argocd && mkdir -p $(GITOPS_BUILD)/argocd $(CACHE)/bin
	cp -R $(GO_ARGOCD_MOD)/. $(GITOPS_BUILD)/argocd/
	cd $(GITOPS_BUILD)/argocd && $(GO) mod edit -replace=$(ARGOCD_ENGINE)=$(ARGOCD_UPSTREAM)
	@echo "gitops: building Argo CD $(ARGOCD_VERSION) (application controller, repo server) with $(ARGOCD_ENGINE) from $(ARGOCD_ENGINE_SNAPSHOT) (cold: many minutes, then cached)"
	@t0=$$(date +%s); cd $(GITOPS_BUILD)/argocd && $(GO_LINKED) $@ -- env $(GITOPS_GOENV) $(GO) build -trimpath \
	  -ldflags "-X $(ARGOCD_MODULE)/common.version=$(patsubst v%,%,$(ARGOCD_VERSION))" -o @OUT@ ./cmd/argocd \
	  && s=$$(( $$(date +%s) - t0 )) && echo "gitops: argocd built in $$s s" \
	  && echo "{\"what\": \"argocd\", \"seconds\": $$s, \"at\": \"$$(date -u +%FT%TZ)\", \"load\": \"$$(cut -d' ' -f1-3 /proc/loadavg)\"}" >> $(GITOPS_BUILD)/build-times.jsonl

# Redis (Argo CD's cache) from the distribution's packages, installed when missing like git.
redis:
	@command -v redis-server >/dev/null || { echo "gitops: installing redis-server (Debian package)"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get install -y -q redis-server; else sudo apt-get install -y -q redis-server; fi; }

gitops: $(ARGOCD_BIN) redis

# The test sessions that collect tests/gitops build Argo CD first (as the data plane's).
pytest pytest-integration pytest-heavy: gitops
