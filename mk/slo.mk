# guidellm for the SLO benchmark and its tests (issue 13, docs/verify.md): the version pinned in
# pyproject's `guidellm` extra, installed without its declared dependencies (torch and datasets, ~3 GB,
# serve only its dataset pipeline); the ones the benchmark imports are in the `test` extra.
GUIDELLM_STAMP := $(VENV)/.guidellm

$(GUIDELLM_STAMP): $(STAMP) pyproject.toml
	$(UV_PIP) --no-deps \
	  "$$($(PY) -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["guidellm"][0])')"
	touch $@

setup: $(GUIDELLM_STAMP)
