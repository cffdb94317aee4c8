"""The one writer of rendered trees (module_utils/render_tree.py): nothing outside its root, nothing it did not
write (issue 31 items 2 and 4). tests/render/test_render_dir_ownership.py runs the playbooks on a git clone."""

from __future__ import annotations

import os

import pytest
from ansible_collections.inference.blueprints.plugins.module_utils import k8s_apply, render_tree
from ansible_collections.inference.blueprints.plugins.module_utils.render_tree import MANIFEST, TreeError


def _cm(name: str, namespace: str = "llm-chat") -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}}


def _all_files(path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    "obj",
    [
        _cm("x", namespace="../../../escaped"),  # a namespace (from a host or namespace name) that climbs out
        _cm("x", namespace="/tmp/escaped"),  # an absolute one  # noqa: S108 - the path the test refuses
        _cm("../../../../escaped/x"),  # a name that climbs out of its directory
    ],
)
def test_the_writer_never_writes_outside_its_root(tmp_path, obj):
    root = tmp_path / "render" / "chat-east-1"
    with pytest.raises(TreeError, match="refusing to write"):
        k8s_apply.render([_cm("fine"), obj], str(root), None, False)
    assert _all_files(tmp_path) == set()  # not even the good object: the check runs before the first write


def test_a_symbolic_link_out_of_the_root_is_not_followed(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    outside.mkdir()
    root.mkdir()
    os.symlink(outside, root / "llm-chat")
    with pytest.raises(TreeError, match="outside"):
        render_tree.write(str(root), {"llm-chat/configmap.yaml": "kind: ConfigMap\n"}, "serving")
    assert not list(outside.iterdir())


def test_foreign_and_edited_files_are_never_overwritten_or_removed(tmp_path):
    (tmp_path / "mine.yaml").write_text("the user's\n")
    first = render_tree.write(str(tmp_path), {"a.yaml": "a\n", "d/b.yaml": "b\n"}, "serving", prune=True)
    assert sorted(r["action"] for r in first) == ["created", "created"]
    assert render_tree.write(str(tmp_path), {"a.yaml": "a\n", "d/b.yaml": "b\n"}, "serving", prune=True) == [
        {"path": str(tmp_path / "a.yaml"), "action": "unchanged"},
        {"path": str(tmp_path / "d/b.yaml"), "action": "unchanged"},
    ]
    # a path of the render held by a file it did not write: refused, naming it, nothing written
    with pytest.raises(TreeError, match="not its own") as e:
        render_tree.write(str(tmp_path), {"a.yaml": "a2\n", "mine.yaml": "ours\n"}, "serving", prune=True)
    assert str(tmp_path / "mine.yaml") in str(e.value)
    assert (tmp_path / "a.yaml").read_text() == "a\n" and (tmp_path / "mine.yaml").read_text() == "the user's\n"
    # a file it wrote and the user edited: neither overwritten nor removed
    (tmp_path / "d/b.yaml").write_text("b, edited\n")
    for files in ({"a.yaml": "a\n", "d/b.yaml": "b2\n"}, {"a.yaml": "a\n"}):
        with pytest.raises(TreeError, match="edited since"):
            render_tree.write(str(tmp_path), files, "serving", prune=True)
        assert (tmp_path / "d/b.yaml").read_text() == "b, edited\n"
    # once restored, a file the render no longer holds is removed (its empty directory too); the user's stays
    (tmp_path / "d/b.yaml").write_text("b\n")
    out = render_tree.write(str(tmp_path), {"a.yaml": "a\n"}, "serving", prune=True)
    assert {"path": str(tmp_path / "d/b.yaml"), "action": "removed"} in out
    assert _all_files(tmp_path) == {"a.yaml", "mine.yaml", MANIFEST}


def test_a_scope_prunes_only_its_own_files_and_check_mode_writes_nothing(tmp_path):
    render_tree.write(str(tmp_path), {"p.yaml": "p\n"}, "platform", prune=True)
    render_tree.write(str(tmp_path), {"s.yaml": "s\n"}, "serving", prune=True)
    render_tree.write(str(tmp_path), {"s2.yaml": "s\n"}, "serving", prune=True)
    assert _all_files(tmp_path) == {"p.yaml", "s2.yaml", MANIFEST}
    manifest = (tmp_path / MANIFEST).read_text()
    out = render_tree.write(str(tmp_path), {"s3.yaml": "s\n"}, "serving", prune=True, check_mode=True)
    assert sorted(r["action"] for r in out) == ["created", "removed"]
    assert _all_files(tmp_path) == {"p.yaml", "s2.yaml", MANIFEST} and (tmp_path / MANIFEST).read_text() == manifest


def test_a_file_holding_exactly_the_renders_bytes_is_taken_over(tmp_path):
    """A tree written before the manifest existed: its files are the render's own bytes, so they join it."""
    (tmp_path / "a.yaml").write_text("a\n")
    assert render_tree.write(str(tmp_path), {"a.yaml": "a\n"}, "serving") == [
        {"path": str(tmp_path / "a.yaml"), "action": "unchanged"}
    ]
    assert "serving a.yaml" in (tmp_path / MANIFEST).read_text()


def test_a_file_where_the_tree_needs_a_directory_is_refused_before_anything_is_written(tmp_path):
    (tmp_path / "clusters").write_text("the user's notes\n")
    with pytest.raises(TreeError, match="not its own") as e:
        render_tree.write(str(tmp_path), {"a.yaml": "a\n", "clusters/c1/b.yaml": "b\n"}, "c1", prune=True)
    assert str(tmp_path / "clusters") in str(e.value)
    assert _all_files(tmp_path) == {"clusters"}
