# The planner's test oracle (issues 9 and 27, docs/planner.md "aiconfigurator as an oracle"): aiconfigurator from
# pyproject's `oracle` extra, installed into the venv only by these targets (no test imports it: the tests read the
# checked-in tests/unit/planner/oracle/aiconfigurator.json).
ORACLE_STAMP := $(VENV)/.oracle

$(ORACLE_STAMP): $(STAMP) pyproject.toml
	$(UV_PIP) -e '.[oracle]'
	touch $@

.PHONY: oracle oracle-setup

oracle-setup: $(ORACLE_STAMP)

# Regenerates the oracle grid (estimates reused from the checked-in file; ORACLE_ARGS="--best" reruns
# aiconfigurator's best-configuration search, ORACLE_ARGS="27b-h100-chat ..." only those points).
oracle: $(ORACLE_STAMP)
	nice -n 10 $(PY) tests/bench/planner_oracle.py $(ORACLE_ARGS)
