# OpenShift's SecurityContextConstraints admission for the local control plane
# (tests/controlplane/scc_admission.py): sccwebhook, OpenShift's own admission plugin
# (github.com/openshift/apiserver-library-go pkg/securitycontextconstraints/sccadmission) served as
# an admission webhook, plus OpenShift's default SCCs and their RBAC as the kube-apiserver operator
# ships them. Both go into .cache; nothing of OpenShift is copied into the repository.
#
# Build: tests/controlplane/scc/go.mod is copied to .cache/scc and there replaces
# github.com/openshift/apiserver-library-go and github.com/openshift/library-go (the Go module proxy
# refuses both) with the snapshots of ../shared/upstream (SCC_SNAPSHOTS), unpacked under
# .cache/upstream. Everything else, k8s.io/kubernetes v1.33.2 internals included (the version
# apiserver-library-go's go.mod pins), comes from the module proxy, checked against scc/go.sum.
# Cold build on this 2-core machine with ~8 other builds running (load 35-45): 1875 s (31 min; 42 s of it
# downloading modules): k8s.io/kubernetes v1.33 is a second Kubernetes beside the plane's v1.36, so little of
# the Go build cache is shared. Warm (Go build cache filled, a fresh clone's first build): 3-8 s (3 s at load 2,
# 8 s in make test of a fresh clone, 2026-11-29; every build appends its seconds to .cache/scc/build-times.jsonl). Rebuilt only when scc/*.go, go.mod/go.sum or this file change.
#
# Default SCCs: bindata/bootkube/scc-manifests of github.com/openshift/cluster-kube-apiserver-operator
# at SCC_OPERATOR_COMMIT (the proxy refuses that module): read from SCC_OPERATOR_GIT, a git
# directory holding that commit (default: the local mirror, else the copy a build left in
# ~/.cache/inference-blueprints, else the GitHub repository). Beside them,
# OpenShift AI's own SCC (SCC_RHOAI_FILE of the OpenShift AI 3.5 KServe snapshot).
.PHONY: scc scc-tidy

SCC_DIR       := $(ROOT)/tests/controlplane/scc
SCC_BUILD     := $(CACHE)/scc
SCC_BIN       := $(CACHE)/bin/sccwebhook
SCC_UPSTREAM  := $(CACHE)/upstream
SCC_SNAPSHOTS ?= $(ROOT)/../shared/upstream
SCC_ALG       := openshift-apiserver-library-go-a8019f39f670
SCC_LIBGO     := openshift-library-go-73c7662bc565
SCC_GOENV     := GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
SCC_OPERATOR_COMMIT := c813e820bb94cf2af88a6343c8554624c334c04c
SCC_OPERATOR_GIT    ?= $(firstword $(wildcard /work/.mirror/openshift+cluster-kube-apiserver-operator/repo) https://github.com/openshift/cluster-kube-apiserver-operator.git)
SCC_MANIFESTS := $(SCC_UPSTREAM)/scc-manifests
# the manifests' archive, kept beside the Go caches (outside the repo): a fresh clone on a machine without the mirror
# and without GitHub reads it from there
SCC_HOME_COPY := $(HOME)/.cache/inference-blueprints/scc-manifests-$(SCC_OPERATOR_COMMIT).tar
SCC_NO_MANIFESTS = scc: OpenShift's default SCCs (bindata/bootkube/scc-manifests of \
  github.com/openshift/cluster-kube-apiserver-operator at $(SCC_OPERATOR_COMMIT)) could not be read: no git directory at \
  SCC_OPERATOR_GIT=$(SCC_OPERATOR_GIT) holds that commit, there is no copy at $(SCC_HOME_COPY), and GitHub did not \
  answer. Point SCC_OPERATOR_GIT at a clone or mirror of that repository that holds the commit, or put a tar archive \
  of that directory at $(SCC_HOME_COPY).
# OpenShift AI's SCC for LLMInferenceService workloads and its ClusterRole, as OpenShift AI 3.5 installs them
SCC_RHOAI      := kserve-rhoai-3.5
SCC_RHOAI_FILE := config/overlays/odh/rbac/llmisvc/llm-svc-scc.yaml

# snapshot tarball -> unpacked dir under .cache/upstream (top folder stripped)
define scc_unpack
	@if [ ! -f $(SCC_UPSTREAM)/$(1)/go.mod ]; then test -f $(SCC_SNAPSHOTS)/$(1).tar.gz || \
	  { echo "scc: no snapshot $(SCC_SNAPSHOTS)/$(1).tar.gz (shared/upstream beside the clone; see its README)" >&2; exit 1; }; \
	  rm -rf $(SCC_UPSTREAM)/$(1).tmp && mkdir -p $(SCC_UPSTREAM)/$(1).tmp && \
	  tar -xzf $(SCC_SNAPSHOTS)/$(1).tar.gz -C $(SCC_UPSTREAM)/$(1).tmp --strip-components=1 && \
	  mv $(SCC_UPSTREAM)/$(1).tmp $(SCC_UPSTREAM)/$(1); fi
endef

define scc_copy
	@command -v $(GO) >/dev/null || { echo "scc: Go (1.26) is needed to build the SCC admission webhook" >&2; exit 1; }
	$(call scc_unpack,$(SCC_ALG))
	$(call scc_unpack,$(SCC_LIBGO))
	mkdir -p $(SCC_BUILD) && cp $(SCC_DIR)/*.go $(SCC_DIR)/go.mod $(SCC_DIR)/go.sum $(SCC_BUILD)/
	cd $(SCC_BUILD) && $(GO) mod edit \
	  -replace=github.com/openshift/apiserver-library-go=$(SCC_UPSTREAM)/$(SCC_ALG) \
	  -replace=github.com/openshift/library-go=$(SCC_UPSTREAM)/$(SCC_LIBGO)
endef

$(SCC_BIN): $(wildcard $(SCC_DIR)/*.go) $(SCC_DIR)/go.mod $(SCC_DIR)/go.sum $(ROOT)/mk/scc.mk
	$(scc_copy)
	@mkdir -p $(@D)
	@echo "scc: building sccwebhook (apiserver-library-go sccadmission, k8s.io/kubernetes v1.33.2)"
	@t0=$$(date +%s); cd $(SCC_BUILD) && $(GO_LINKED) $@ -- env $(SCC_GOENV) $(GO) build -trimpath -o @OUT@ . \
	  && s=$$(( $$(date +%s) - t0 )) && echo "scc: built in $$s s" \
	  && echo "{\"what\": \"sccwebhook\", \"seconds\": $$s, \"at\": \"$$(date -u +%FT%TZ)\", \"load\": \"$$(cut -d' ' -f1-3 /proc/loadavg)\"}" >> $(SCC_BUILD)/build-times.jsonl

$(SCC_MANIFESTS)/.commit: $(ROOT)/mk/scc.mk
	rm -rf $(SCC_MANIFESTS).tmp && mkdir -p $(SCC_MANIFESTS).tmp $(dir $(SCC_HOME_COPY))
	@if [ -d "$(SCC_OPERATOR_GIT)" ]; then git --git-dir="$(SCC_OPERATOR_GIT)" archive $(SCC_OPERATOR_COMMIT) bindata/bootkube/scc-manifests; \
	elif [ -f "$(SCC_HOME_COPY)" ]; then cat "$(SCC_HOME_COPY)"; \
	else d=$$(mktemp -d) && git -C $$d init -q && git -C $$d fetch -q --depth=1 "$(SCC_OPERATOR_GIT)" $(SCC_OPERATOR_COMMIT) \
	  && git -C $$d archive FETCH_HEAD bindata/bootkube/scc-manifests; rm -rf $$d; fi > $(SCC_MANIFESTS).tmp.tar
	@[ -s $(SCC_MANIFESTS).tmp.tar ] || { echo "$(SCC_NO_MANIFESTS)" >&2; rm -f $(SCC_MANIFESTS).tmp.tar; exit 1; }
	tar -x -f $(SCC_MANIFESTS).tmp.tar -C $(SCC_MANIFESTS).tmp --strip-components=3 --wildcards '*.yaml'
	@ls $(SCC_MANIFESTS).tmp/*scc-restricted-v2.yaml >/dev/null
	mv $(SCC_MANIFESTS).tmp.tar $(SCC_HOME_COPY)
	tar -xzf $(SCC_SNAPSHOTS)/$(SCC_RHOAI).tar.gz -O $(SCC_RHOAI)/$(SCC_RHOAI_FILE) > $(SCC_MANIFESTS).tmp/zz-openshift-ai-llm-svc-scc.yaml
	rm -rf $(SCC_MANIFESTS) && mv $(SCC_MANIFESTS).tmp $(SCC_MANIFESTS)
	echo "github.com/openshift/cluster-kube-apiserver-operator $(SCC_OPERATOR_COMMIT)" > $@

scc: $(SCC_BIN) $(SCC_MANIFESTS)/.commit

# Every plane runs it by default (scc_admission.DEFAULT_ENABLED): part of controlplane, so of make demo and
# every test session.
controlplane: scc

# Maintainers: rewrite scc/go.mod and go.sum after a version change (go mod tidy in the copy).
scc-tidy:
	$(scc_copy)
	cd $(SCC_BUILD) && $(SCC_GOENV) $(GO) mod tidy && $(GO) mod edit \
	  -dropreplace=github.com/openshift/apiserver-library-go -dropreplace=github.com/openshift/library-go \
	  && cp go.mod go.sum $(SCC_DIR)/
