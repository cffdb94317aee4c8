.PHONY: demo
demo: setup
	$(PY) -m ansible_collections.inference.blueprints.plugins.module_utils.cli demo
