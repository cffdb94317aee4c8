# Molecule scenarios, one per blueprint (molecule/<blueprint>/; molecule/shared holds the
# create/destroy/converge playbooks they share). Each scenario starts and stops its own local
# control plane of the profile the blueprint's example site needs.
.PHONY: molecule
MOLECULE_SCENARIOS ?= $(sort $(patsubst molecule/%/molecule.yml,%,$(wildcard molecule/*/molecule.yml)))

molecule: setup controlplane
	@set -e; for s in $(MOLECULE_SCENARIOS); do \
	  echo "== molecule test -s $$s"; molecule test -s $$s; done
