# Envoy Gateway's own translator, `egctl x translate` (issue 26): cmd/egctl of
# github.com/envoyproxy/gateway v1.9.0, the version whose CRDs the local control plane loads, built
# from the published Go module (tests/egctl/go.mod names it by version; nothing of it is in the repo)
# into .cache/bin/egctl, cached: rebuilt only when tests/egctl/go.mod or go.sum change.
# tests/integration/test_egctl_translate.py runs it over every rendered gateway object (sovereign burst
# on both clusters, the edge escalation, the AI grid's Envoy Gateway objects).
#
# cgo is off: egctl's module graph holds containers/storage, whose btrfs graph driver needs libbtrfs
# headers under cgo and is left out without it; translate uses none of it.
# The build's time is kept in .cache/bin/egctl.seconds; tests/bench/test_egctl_bench.py prints it with a
# warm rebuild's, and docs/sovereign-burst.md states the figures measured here.
.PHONY: egctl

EGCTL_DIR := $(ROOT)/tests/egctl
EGCTL_BIN := $(CACHE)/bin/egctl
EGCTL_VER := $(shell sed -n 's|^[[:space:]]*github.com/envoyproxy/gateway \(v[^ ]*\).*|\1|p' $(EGCTL_DIR)/go.mod)

$(EGCTL_BIN): $(EGCTL_DIR)/go.mod $(EGCTL_DIR)/go.sum
	@command -v $(GO) >/dev/null || { echo "egctl: Go (1.26) is needed to build Envoy Gateway's egctl" >&2; exit 1; }
	@mkdir -p $(@D)
	@echo "egctl: building $@ (github.com/envoyproxy/gateway/cmd/egctl $(EGCTL_VER)) with $(KCP_GOVER)"
	@echo "egctl:   cold build: see docs/sovereign-burst.md (tens of minutes on 2 busy cores); cached afterwards"
	start=$$(date +%s); cd $(EGCTL_DIR) && $(GO_LINKED) $@ -- env GOTOOLCHAIN=local GOFLAGS= CGO_ENABLED=0 $(GO) build -trimpath \
	  -o @OUT@ github.com/envoyproxy/gateway/cmd/egctl && echo $$(( $$(date +%s) - start )) > $@.seconds

egctl: setup $(EGCTL_BIN)
