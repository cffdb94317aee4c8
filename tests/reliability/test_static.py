"""Checks of the catalogue's own rules that need no cluster."""

from __future__ import annotations

from ansible_collections.inference.blueprints.plugins.module_utils.intent import inventory


def test_every_image_option_is_pinned_or_named_apart():
    """A new ``*_image(s)`` option of a role must be digest-pinned (PINNED_IMAGE_OPTIONS) or be
    a name the operator composes into a reference (IMAGE_NAME_OPTIONS): never silently a tag."""
    options = {k for role in inventory.component_names() for k in inventory.component_options(role)}
    images = {k for k in options if k.endswith(("_image", "_images"))}
    unclassified = images - set(inventory.PINNED_IMAGE_OPTIONS) - set(inventory.IMAGE_NAME_OPTIONS)
    assert not unclassified, f"classify these image options in intent/inventory.py: {sorted(unclassified)}"
    assert set(inventory.PINNED_IMAGE_OPTIONS) <= options, "a pinned image option no role has"
    for name in inventory.PINNED_IMAGE_OPTIONS:
        role = next(r for r in inventory.component_names() if name in inventory.component_options(r))
        rule = inventory.component_options(role)[name]
        check = (rule.elements.check if rule.type == "list" else rule.check) if rule else None
        assert check is not None, name
        assert check("quay.io/example/image:1.0"), f"{name} accepts a tag"
        assert not check("quay.io/example/image@sha256:" + "0" * 64), f"{name} refuses a digest"
