# Molecule scenarios, one per blueprint (molecule/<blueprint>/; molecule/shared holds the
# create/destroy/converge playbooks they share). Each scenario starts and stops its own local
# control plane of the profile the blueprint's example site needs.
# CLUSTER_OWNER_PID (the recipe shell): the plane a scenario starts stops when that shell is gone,
# so an interrupted `make test` leaves no control plane behind (tests/controlplane/cluster.py).
.PHONY: molecule
MOLECULE_SCENARIOS ?= $(sort $(patsubst molecule/%/molecule.yml,%,$(wildcard molecule/*/molecule.yml)))

# Every scenario runs even when one fails (as make -k does for tiers); the target fails naming them.
molecule: setup controlplane
	@failed=""; for s in $(MOLECULE_SCENARIOS); do \
	  start=$$(date +%s); echo "== molecule test -s $$s"; \
	  CLUSTER_OWNER_PID=$$$$ molecule test -s $$s || failed="$$failed $$s"; \
	  echo "== molecule $$s: $$(( $$(date +%s) - start )) s"; done; \
	if [ -n "$$failed" ]; then echo "== molecule scenarios failed:$$failed"; exit 1; fi
