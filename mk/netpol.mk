# NetworkPolicy evaluation for the traffic-path tests (issue 32): tests/netpol/cmd/netpolcheck, a small command of
# ours around cyclonus's policy matcher (github.com/mattfenwick/cyclonus v0.5.6, served by the module proxy; named by
# version in tests/netpol/go.mod, nothing of it in the repo), built into .cache/bin/netpolcheck. Cold build: about
# 3 minutes on 2 busy cores (its k8s.io v0.30 modules are its own); warm: seconds (link only).
# tests/integration/test_traffic_paths.py uses it (NETPOLCHECK_BIN overrides the path).
.PHONY: netpol

NETPOL_DIR := $(ROOT)/tests/netpol
NETPOL_BIN := $(CACHE)/bin/netpolcheck

$(NETPOL_BIN): $(NETPOL_DIR)/go.mod $(NETPOL_DIR)/go.sum $(wildcard $(NETPOL_DIR)/cmd/netpolcheck/*.go)
	@command -v $(GO) >/dev/null || { echo "netpol: Go (1.26) is needed to build netpolcheck" >&2; exit 1; }
	@mkdir -p $(@D)
	cd $(NETPOL_DIR) && $(GO_LINKED) $@ -- env GOTOOLCHAIN=local GOFLAGS= $(GO) build -trimpath -o @OUT@ ./cmd/netpolcheck

netpol: $(NETPOL_BIN)

pytest pytest-integration: netpol
