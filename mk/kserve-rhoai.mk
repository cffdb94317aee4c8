# OpenShift AI 3.5's KServe LLMInferenceService controller: cmd/llmisvc of red-hat-data-services/kserve
# (branch rhoai-3.5, module path github.com/kserve/kserve) built with the build tag `distro` (what its
# Dockerfile does: the OpenShift behaviour of the *_odh.go files), into .cache/bin/llmisvc-rhoai.
# tests/controlplane/kserve_controller.py runs it by default (KCP_KSERVE_FLAVOR=rhoai|upstream;
# docs/upstream.md says which test runs which).
#
# The Go module proxy does not serve this fork, so the build runs in a copy of
# tests/controlplane/kserve-rhoai (its go.mod requires github.com/kserve/kserve and restates the fork's
# replace pins) under .cache/kserve-rhoai, with `replace github.com/kserve/kserve => <snapshot>`, the
# snapshot being KSERVE_RHOAI_SNAPSHOT (default ../shared/upstream/kserve-rhoai-3.5.tar.gz beside the
# clone) unpacked under .cache/upstream (never into the repository). Every other dependency
# (github.com/openshift/api at the fork's pseudo-version, istio.io/client-go, GAIE v1.5.0, ...) comes
# from the module proxy, checked against tests/controlplane/kserve-rhoai/go.sum.
# The unpacked tree's path is written to .cache/kserve-rhoai/source: kserve_rhoai.py reads the
# fork's install (config/overlays/odh, rendered by `kubectl kustomize`) and CRDs from there.
#
# Build times measured 2026-11-28 on this 2-core machine while ~8 helpers built and tested (load 40-44):
#   first build ("cold" here: the Go module cache held most modules, the build cache had upstream KServe
#   v0.20.0 built with cgo on, which this CGO_ENABLED=0 build does not reuse): module download + go mod
#   tidy 116 s, then go build -tags distro 2001 s (33 min; about a third of that on an idle machine);
#   warm rebuild (build cache filled, go.mod unchanged): 62 s (mostly the link of a 132 MB binary).
# A truly empty Go build cache was not measured (it would cost every helper here half an hour of CPU).
# Each build appends its seconds to .cache/kserve-rhoai/build-times.jsonl.
.PHONY: kserve-rhoai kserve-rhoai-tidy

KRH_MOD      := $(ROOT)/tests/controlplane/kserve-rhoai
KRH_NAME     := kserve-rhoai-3.5
KSERVE_RHOAI_SNAPSHOT ?= $(ROOT)/../shared/upstream/$(KRH_NAME).tar.gz
KRH_SRC      := $(CACHE)/upstream/$(KRH_NAME)
KRH_BUILD    := $(CACHE)/kserve-rhoai
KRH_BIN      := $(CACHE)/bin/llmisvc-rhoai
KRH_GOENV    := GOTOOLCHAIN=local GOEXPERIMENT=$(KCP_GOEXP) CGO_ENABLED=0 GOFLAGS=-mod=mod

# Unpack the snapshot (once) and make the build copy of the module pointed at it.
define krh_copy
	@command -v $(GO) >/dev/null || { echo "kserve-rhoai: Go (1.26) is needed to build OpenShift AI's KServe" >&2; exit 1; }
	@test -f "$(KSERVE_RHOAI_SNAPSHOT)" || { echo "kserve-rhoai: no snapshot at KSERVE_RHOAI_SNAPSHOT=$(KSERVE_RHOAI_SNAPSHOT) (shared/upstream beside the clone; see its README)" >&2; exit 1; }
	@if [ ! -f $(KRH_SRC)/go.mod ]; then rm -rf $(KRH_SRC).tmp && mkdir -p $(KRH_SRC).tmp && \
	  tar -xzf "$(KSERVE_RHOAI_SNAPSHOT)" -C $(KRH_SRC).tmp --strip-components=1 && \
	  grep -q '^module github.com/kserve/kserve$$' $(KRH_SRC).tmp/go.mod && mv $(KRH_SRC).tmp $(KRH_SRC); fi
	rm -rf $(KRH_BUILD)/mod && mkdir -p $(KRH_BUILD)/mod && cp -R $(KRH_MOD)/. $(KRH_BUILD)/mod/
	cd $(KRH_BUILD)/mod && $(GO) mod edit -replace=github.com/kserve/kserve=$(KRH_SRC)
endef

$(KRH_BIN): $(KRH_MOD)/go.mod $(KRH_MOD)/go.sum $(ROOT)/mk/kserve-rhoai.mk
	$(krh_copy)
	@mkdir -p $(@D)
	@echo "kserve-rhoai: building github.com/kserve/kserve/cmd/llmisvc of $(KRH_NAME) with -tags distro (first build: minutes, then cached)"
	@t0=$$(date +%s); cd $(KRH_BUILD)/mod && $(GO_LINKED) $@ -- env $(KRH_GOENV) $(GO) build -tags distro -trimpath -o @OUT@ \
	  github.com/kserve/kserve/cmd/llmisvc && s=$$(( $$(date +%s) - t0 )) && echo "kserve-rhoai: built in $$s s" \
	  && echo "{\"what\": \"llmisvc-rhoai\", \"seconds\": $$s, \"at\": \"$$(date -u +%FT%TZ)\", \"load\": \"$$(cut -d' ' -f1-3 /proc/loadavg)\"}" >> $(KRH_BUILD)/build-times.jsonl
	echo $(KRH_SRC) > $(KRH_BUILD)/source

kserve-rhoai: $(KRH_BIN)

# make demo and the serving tests run it (kserve_controller.DEFAULT_FLAVOR).
controlplane: $(KRH_BIN)

# Maintainers: rewrite go.mod/go.sum after a snapshot change (go mod tidy in the copy).
kserve-rhoai-tidy:
	$(krh_copy)
	cd $(KRH_BUILD)/mod && $(KRH_GOENV) $(GO) mod tidy && $(GO) mod edit -dropreplace=github.com/kserve/kserve \
	  && cp go.mod go.sum $(KRH_MOD)/
