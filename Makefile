# inference.blueprints: every set-up step lives here. Two entry points for a fresh clone:
#   make demo   the main job on the local control plane
#   make test   every test tier (lint, sanity, unit, render, integration, molecule)
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

ROOT        := $(CURDIR)
VENV        ?= $(ROOT)/.venv
CACHE       ?= $(ROOT)/.cache
COLL_DIR    := $(ROOT)/collections/ansible_collections/inference/blueprints
# Prefer Python 3.12 (newest ansible-core), fall back to 3.11.
PY_BOOT     ?= $(shell for p in $(HOME)/.pyenv/versions/3.12*/bin/python3.12 /usr/bin/python3.12 $(HOME)/.pyenv/versions/3.11*/bin/python3.11 python3.11 python3; do if command -v $$p >/dev/null 2>&1; then echo $$p; break; fi; done)
PY          := $(VENV)/bin/python
STAMP       := $(VENV)/.installed
# The venv's packages are installed by uv (from PyPI, the same resolution as pip's: the same versions were checked
# at 0.13.9), which takes 7 s where pip took 70-90 s of a fresh clone's set-up; pip stays in the venv for what
# runs it (tests/collection's wheel build)
UV_VERSION  := 0.13.9
UV_PIP      := $(VENV)/bin/uv pip install -q --compile-bytecode --python $(PY)
COLL_STAMP  := $(CACHE)/collections/.installed
# every Go binary is linked outside the clone and copied in (scripts/go_build_linked.sh says why); GO_LINKS moves it
GO_LINKED   := $(ROOT)/scripts/go_build_linked.sh

export PATH := $(VENV)/bin:$(PATH)
export ANSIBLE_COLLECTIONS_PATH := $(CACHE)/collections
export ANSIBLE_CONFIG := $(ROOT)/ansible.cfg
export PYTHONDONTWRITEBYTECODE := 1

# the site profiles of the local control plane: one file each (tests/controlplane/profiles/)
PROFILES    := $(sort $(notdir $(basename $(wildcard tests/controlplane/profiles/*.yaml))))
space       := $(subst ,, )

.PHONY: help setup lint ruff ansible-lint sanity unit pytest pytest-reliability pytest-rest pytest-integration pytest-heavy test demo bench clean docs-reference

help:
	@echo "make demo          plan, render and converge the example chat site on the local control plane"
	@echo "make test          every test tier; sets itself up from a fresh clone"
	@echo "make cluster-up    start the local control plane (PROFILE=$(subst $(space),|,$(PROFILES)))"
	@echo "make cluster-down  stop it"
	@echo "make stage-artifacts SITE=inventories/example-rag   stage a site's pvc:// weights claims on the local control plane"
	@echo "make bench         benchmarks (print figures)"
	@echo "make docs-reference  regenerate the site-variable reference from the schema"

# ---------------------------------------------------------------- setup
$(STAMP): pyproject.toml
	@test -n "$(PY_BOOT)" || { echo "no python3.12 or python3.11 found" >&2; exit 1; }
	$(PY_BOOT) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check 'uv==$(UV_VERSION)'
	$(UV_PIP) --upgrade pip -e '.[test]'
	touch $@

$(COLL_STAMP): $(STAMP) scripts/fetch_collections.py
	$(PY) scripts/fetch_collections.py --dest $(CACHE)/collections
	touch $@

setup: $(STAMP) $(COLL_STAMP)

# ---------------------------------------------------------------- static checks
ruff: setup
	ruff check .
	ruff format --check collections/ansible_collections/inference/blueprints/plugins tests scripts plugins

ansible-lint: setup
	ansible-lint --offline --profile production

sanity: setup
	$(PY) scripts/ansible_test_offline.py sanity

lint: ruff ansible-lint

# the site-variable reference (the collection's docs/site-variables.md and the site module's notes), generated from
# the validator's schema, the blueprints and the example inventories; tests/unit/test_site_reference.py checks it
docs-reference: setup
	$(PY) scripts/site_reference.py

# ---------------------------------------------------------------- tests
unit: setup
	$(PY) -m pytest -q tests/unit

include mk/*.mk

PYTEST      := $(PY) -m pytest -q -p no:cacheprovider --durations=30

pytest: setup controlplane egctl autoscaling
	$(PYTEST) tests --ignore=tests/bench

# The same tests as three sessions that make test runs side by side: the reliability catalogue (one
# control plane for the package), the integration converges, and the rest. Their tests spend much of
# their time waiting on control planes, controllers and the playbooks' own waits, so three sessions on
# two cores finish sooner than two (one session of integration and the rest took 62 of make test's 67
# minutes in CI at stop 32, while the other slot ran everything else in 50). Each session prints its
# seconds per test file (tests/conftest.py) so the split can be kept even.
pytest-reliability: setup controlplane
	$(PYTEST) -m "not heavy" tests/reliability

# tests/autoscaling (the KEDA operator, its metrics server and Prometheus, mk/autoscaling.mk: 24 s to build with
# a warm Go cache) and tests/gitops (Argo CD: the chat example's tree, the sovereign burst on two planes) run with
# the integration converges, beside the rest, their heavy tests left out (pytest-heavy). In an emulation of CI at
# stop 41 the session took 46 min (test_activation 150 s, test_argocd_sync 142 s, test_sovereign_two_clusters
# 353 s), the rest 54.5 min, the reliability catalogue 34 min and then molecule 20.5 min.
# tests/faults (faults of a running site on the KServe plane) moved here from the rest at stop 42 and back at stop 43:
# an emulation of CI at stop 43 had this session at 76 min (tests/faults 8.8 of them) and the rest at 77 with the
# canary runs (21 min), which then left make test for pytest-heavy.
pytest-integration: setup controlplane egctl autoscaling
	$(PYTEST) -m "not heavy" tests/integration tests/autoscaling tests/gitops

# Tests whose load a 2-core machine cannot carry beside make test's sessions (marker heavy): the HPA at the plan's
# load through the router (tests/autoscaling/test_hpa.py: 40 and 120 req/s sent by loadgen; about 3.5 and 3 minutes
# alone) and every example's tree synced by Argo CD (tests/gitops/test_every_example_syncs.py, four planes). Stop
# 40's CI with the batch HPA test and every example's sync ran 70 minutes, CPU-bound; an emulation of CI at stop 42
# with both HPA tests in the rest session (and tests/faults in the integration session) had none of its three
# pytest sessions done after 60 minutes. Since stop 43 also the canary's three runs (tests/slo/test_canary.py: their
# gates compare latencies of mock servers, which make test's load stretched up to 11x in an emulation of CI).
#
# Since stop 44 also tests/integration/test_placement.py (every example on planes of its own, nine in all: 20 of the
# integration session's 83 minutes in stop 43's CI, which ran out of its 90): molecule's six scenarios converge the
# same examples on the same profiles, and their verify runs the same checks (tests/placement_checks.py), so make test
# keeps the checks and drops the second converge of each example.
#
# Since 2026-12-01 also three of the teardown catalogue's seven sites (tests/reliability/test_teardown.py: rag, batch
# and the edge fleet; 515 s of the reliability session in an emulation of CI that took 65 minutes).
pytest-heavy: setup controlplane egctl autoscaling
	$(PYTEST) -m heavy tests/autoscaling tests/gitops tests/slo/test_canary.py tests/integration/test_placement.py \
	  tests/reliability/test_teardown.py

pytest-rest: setup controlplane egctl
	$(PYTEST) -m "not heavy" tests --ignore=tests/bench --ignore=tests/reliability --ignore=tests/integration \
	  --ignore=tests/autoscaling --ignore=tests/gitops

# Every tier runs even when an earlier one fails (make -k), so one run shows every failure;
# the exit code is non-zero when any failed. Three tiers at a time (-j3): lint, sanity and the
# molecule scenarios run beside the pytest sessions; each tier's output is printed whole when it ends.
test:
	$(MAKE) --no-print-directory -k -j3 --output-sync=target lint sanity pytest-rest pytest-integration pytest-reliability molecule-a molecule-b

bench: setup controlplane egctl
	$(PY) -m pytest -q -s tests/bench

clean: cluster-down
	rm -rf $(VENV) $(CACHE) .cluster reports render
