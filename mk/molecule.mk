# Molecule scenarios, one per blueprint (molecule/<blueprint>/).
.PHONY: molecule
molecule: setup controlplane
	@set -e; for s in $$(ls -d molecule/*/ 2>/dev/null | xargs -rn1 basename); do \
	  echo "== molecule test -s $$s"; molecule test -s $$s; done
