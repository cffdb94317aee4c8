# Local control plane: kube-apiserver + kube-controller-manager + kube-scheduler + kubectl of
# Kubernetes v1.36 built from the published Go modules (tests/controlplane/go.mod), embedded
# etcd, the upstream CRDs read from the upstream projects' Go modules (crdsources/), and the
# upstream components that run beside it, each built from its published module by a go.mod of
# its own: kwok, the node agent (sigs.k8s.io/kwok, tests/controlplane/kwok/go.mod), the
# LeaderWorkerSet controller (sigs.k8s.io/lws, tests/controlplane/lws/go.mod) and KServe's
# LLMInferenceService controller (cmd/llmisvc of github.com/kserve/kserve,
# tests/controlplane/kserve/go.mod; KCP_KSERVE=0 leaves it out). The test-side status simulator
# (tests/simulator) plays the rest. See tests/controlplane/README.md.
.PHONY: controlplane cluster-up cluster-down

KCP_DIR     := $(ROOT)/tests/controlplane
KCP_BIN     := $(CACHE)/bin/kcp
KCP_CRDS    := $(CACHE)/crds/crds.json
KCP_SRCS    := $(wildcard $(KCP_DIR)/cmd/kcp/*.go) $(KCP_DIR)/go.mod $(KCP_DIR)/go.sum
KSERVE_DIR  := $(KCP_DIR)/kserve
KSERVE_BIN  := $(CACHE)/bin/llmisvc
KSERVE_VER  := $(shell sed -n 's|^[[:space:]]*github.com/kserve/kserve \(v[^ ]*\).*|\1|p' $(KSERVE_DIR)/go.mod)
KWOK_DIR    := $(KCP_DIR)/kwok
KWOK_BIN    := $(CACHE)/bin/kwok
LWS_DIR     := $(KCP_DIR)/lws
LWS_BIN     := $(CACHE)/bin/lws
CLUSTER_DIR ?= $(ROOT)/.cluster
PROFILE     ?= h100-8x2-rdma
GO          ?= go
# GOCACHE/GOMODCACHE stay at their defaults (outside the repo) so later builds reuse them.
# Go >= 1.27 turns the jsonv2 experiment on by default, which makes kube-apiserver publish
# broken OpenAPI (every kubectl apply fails): switch it off there; on 1.26 leave it unset.
KCP_GOVER   := $(shell GOTOOLCHAIN=local $(GO) env GOVERSION 2>/dev/null)
KCP_GOEXP   := $(if $(filter go1.20% go1.21% go1.22% go1.23% go1.24% go1.25% go1.26%,$(KCP_GOVER)),,nojsonv2)
KCP_GOENV   := GOTOOLCHAIN=local GOEXPERIMENT=$(KCP_GOEXP) GOFLAGS=
# Stamp kcp with the Kubernetes version it is built from (go.mod's k8s.io/kubernetes), as the release build does
# with -X: unstamped, /version and `kubectl version` say v0.0.0-master+$$Format:%H$$ and a client that reads the
# server's version (kubernetes.core, Argo CD, ...) sees no Kubernetes version at all.
KCP_K8S_VER := $(shell sed -n 's|^[[:space:]]*k8s.io/kubernetes \(v[^ ]*\).*|\1|p' $(KCP_DIR)/go.mod)
KCP_K8S_MM  := $(subst ., ,$(patsubst v%,%,$(KCP_K8S_VER)))
KCP_VERSION_X := $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
  -X $(p).gitVersion=$(KCP_K8S_VER) -X $(p).gitMajor=$(word 1,$(KCP_K8S_MM)) \
  -X $(p).gitMinor=$(word 2,$(KCP_K8S_MM)) -X $(p).gitTreeState=clean -X $(p).gitCommit=)

$(KCP_BIN): $(KCP_SRCS) mk/controlplane.mk
	@command -v $(GO) >/dev/null || { echo "controlplane: Go (1.26) is needed to build kube-apiserver" >&2; exit 1; }
	@mkdir -p $(@D)
	@echo "controlplane: building $@ with $(KCP_GOVER) (cold build: several minutes, then cached)"
	cd $(KCP_DIR) && $(GO_LINKED) $@ -- env $(KCP_GOENV) $(GO) build -trimpath -ldflags "$(KCP_VERSION_X)" -o @OUT@ ./cmd/kcp
	ln -sf kcp $(CACHE)/bin/kubectl

# KServe's own command, built from its published module: the kserve/go.mod requires it and
# repeats the replace pins of kserve's go.mod (replace directives apply only in a main module).
$(KSERVE_BIN): $(KSERVE_DIR)/go.mod $(KSERVE_DIR)/go.sum
	@command -v $(GO) >/dev/null || { echo "controlplane: Go (1.26) is needed to build the KServe controller" >&2; exit 1; }
	@mkdir -p $(@D)
	@echo "controlplane: building $@ (github.com/kserve/kserve/cmd/llmisvc $(KSERVE_VER)) with $(KCP_GOVER)"
	@echo "controlplane:   cold build: ~4-8 min on 2 cores; +1.4 GB Go build cache, +1.7 GB modules; cached afterwards"
	cd $(KSERVE_DIR) && $(GO_LINKED) $@ -- env $(KCP_GOENV) $(GO) build -trimpath -o @OUT@ github.com/kserve/kserve/cmd/llmisvc

# kwok and the LeaderWorkerSet controller: the same pattern (the upstream command built from its
# published module; these go.mods need no replace pins). Cold: ~2-4 min each on 2 cores.
$(KWOK_BIN): $(KWOK_DIR)/go.mod $(KWOK_DIR)/go.sum
	@mkdir -p $(@D)
	@echo "controlplane: building $@ (sigs.k8s.io/kwok/cmd/kwok) with $(KCP_GOVER)"
	cd $(KWOK_DIR) && $(GO_LINKED) $@ -- env $(KCP_GOENV) $(GO) build -trimpath -o @OUT@ sigs.k8s.io/kwok/cmd/kwok

$(LWS_BIN): $(LWS_DIR)/go.mod $(LWS_DIR)/go.sum
	@mkdir -p $(@D)
	@echo "controlplane: building $@ (sigs.k8s.io/lws/cmd) with $(KCP_GOVER)"
	cd $(LWS_DIR) && $(GO_LINKED) $@ -- env $(KCP_GOENV) $(GO) build -trimpath -o @OUT@ sigs.k8s.io/lws/cmd

$(KCP_CRDS): $(KCP_DIR)/crdsources/sources.yaml $(KCP_DIR)/crdsources/go.sum $(KCP_DIR)/crdsources/collect.py $(STAMP)
	$(PY) $(KCP_DIR)/crdsources/collect.py --out $@

controlplane: setup $(KCP_BIN) $(KCP_CRDS) $(KSERVE_BIN) $(KWOK_BIN) $(LWS_BIN)

cluster-up: controlplane
	$(PY) $(KCP_DIR)/cluster.py up --profile $(PROFILE) --dir $(CLUSTER_DIR)

cluster-down:
	@if [ -x $(PY) ]; then $(PY) $(KCP_DIR)/cluster.py down --dir $(CLUSTER_DIR); \
	else echo "cluster-down: nothing running"; fi

# What a site's storage team stages before its first converge, on the local control plane: the Bound claims of
# the site's pvc:// model artifacts (tests/controlplane/artifacts.py), e.g. make stage-artifacts SITE=inventories/example-rag
.PHONY: stage-artifacts
stage-artifacts: setup
	@test -n "$(SITE)" || { echo "stage-artifacts: give SITE=inventories/<site>" >&2; exit 2; }
	$(PY) $(KCP_DIR)/artifacts.py --site $(SITE) --kubeconfig $(CLUSTER_DIR)/kubeconfig
