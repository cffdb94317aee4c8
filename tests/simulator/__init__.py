"""Test-side status simulator for the local control plane (never shipped in the collection)."""

from .simulator import CONFIG_NAME, CONFIG_NAMESPACE, Simulator, load_catalog

__all__ = ["CONFIG_NAME", "CONFIG_NAMESPACE", "Simulator", "load_catalog"]
