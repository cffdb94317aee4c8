# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one writer of rendered trees (delivery render and gitops): it owns exactly the files it wrote.

A render_dir is often a directory the user owns too: a clone of the repository Argo CD syncs, holding the
user's own Applications and kustomizations. So the writer keeps a manifest in the tree (``MANIFEST``, one
line per file it wrote: the file's sha256, the scope that wrote it, its path) and:

* writes a file only when its bytes change;
* removes, when a scope is written in full (``prune``), only the files of that scope's manifest entries
  that the new render no longer holds, and lists them;
* never overwrites or removes a file that is not in the manifest (a foreign file): a path of the render that
  a foreign file holds stops the write, naming the file. A file that already holds exactly the bytes the
  render would write (a tree written before the manifest existed) is taken into the manifest;
* never overwrites or removes a file of the manifest that was edited since it was written (its sha256
  differs): the edit would be lost, so the write stops, naming it;
* keeps every path under the root, symbolic links resolved: a path that leaves it stops the write.

Every check runs before the first write (:func:`plan`), so a refused write leaves the tree as it was.
Lives in module_utils: the k8s_apply module (delivery=render) writes with it too.
"""

from __future__ import annotations

import hashlib
import os

MANIFEST = ".inference-blueprints-manifest"
_HEADER = (
    "# inference.blueprints: the files a render wrote under this directory (sha256, scope, path). The render\n"
    "# updates and removes only these files, and only while their sha256 matches; do not edit.\n"
)


class TreeError(Exception):
    """A write the writer refuses; the message names the file(s) and what to do. Nothing was written."""


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def contained(root: str, rel: str) -> str:
    """The absolute path of ``rel`` under ``root``; raises TreeError when it would leave ``root`` (an
    absolute path, a '..' segment, or a symbolic link on the way that points outside)."""
    real_root = os.path.realpath(root)
    parts = rel.replace("\\", "/").split("/")
    if os.path.isabs(rel) or not rel or any(p in ("", ".", "..") for p in parts) or "\0" in rel:
        raise TreeError(f"refusing to write {rel!r}: the path must stay under {root} (no absolute path, '.' or '..')")
    path = os.path.join(root, *parts)
    real = os.path.realpath(path)
    if os.path.commonpath([real_root, real]) != real_root:
        raise TreeError(f"refusing to write {path}: it resolves to {real}, outside {root} (a symbolic link?)")
    return path


def read_manifest(root: str) -> dict[str, tuple[str, str]]:
    """{path: (sha256, scope)} of the files the writer wrote under ``root`` (empty when it wrote none)."""
    path = os.path.join(root, MANIFEST)
    if not os.path.isfile(path):
        return {}
    out = {}
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.rstrip("\n").split(" ", 2)
            if len(fields) != 3 or len(fields[0]) != 64:
                raise TreeError(
                    f"{path}:{number}: not a line of the render's manifest (sha256 scope path); restore the file "
                    "from version control (git checkout) or remove the line"
                )
            out[fields[2]] = (fields[0], fields[1])
    return out


def _manifest_text(entries: dict[str, tuple[str, str]]) -> str:
    return _HEADER + "".join(f"{h} {scope} {rel}\n" for rel, (h, scope) in sorted(entries.items()))


def _read(path: str) -> str | None:
    if os.path.isdir(path):
        raise TreeError(f"{path} is a directory where the render writes a file; move it away")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8", errors="surrogateescape") as fh:
        return fh.read()


class Plan:
    """What one write of a tree will do: per file an action (created, changed, removed, unchanged)."""

    def __init__(self, root: str):
        self.root = root
        self.old = read_manifest(root)
        self.entries = dict(self.old)
        self.writes: dict[str, str] = {}  # absolute path -> text
        self.removes: list[str] = []
        self.results: list[dict] = []
        self.foreign: list[str] = []
        self.edited: list[str] = []

    def changed(self) -> bool:
        return bool(self.writes or self.removes) or self.entries != self.old


def plan(root: str, scopes: dict[str, dict[str, str]], prune: bool = False) -> Plan:
    """Check a write of ``scopes`` ({scope: {path under root: text}}); raise TreeError (nothing written) when it
    would leave root, overwrite a foreign or edited file, or remove an edited one. With ``prune`` each scope
    given is written in full: its files the manifest lists and ``scopes`` no longer holds are removed."""
    p = Plan(root)
    for scope, files in sorted(scopes.items()):
        if not scope or " " in scope:
            raise ValueError(f"scope {scope!r}: one word")
        for rel, text in sorted(files.items()):
            _plan_file(p, rel, text, scope)
    if prune:
        wanted = {rel for files in scopes.values() for rel in files}
        for rel, (h, owner) in sorted(p.old.items()):
            if owner in scopes and rel not in wanted:
                _plan_removal(p, rel, h)
    _refuse(p)
    return p


def _plan_file(p: Plan, rel: str, text: str, scope: str) -> None:
    if rel == MANIFEST:
        raise TreeError(f"refusing to write {rel}: the name of the render's own manifest")
    path = contained(p.root, rel)
    blocked = _file_on_the_way(p.root, rel)
    if blocked:
        p.foreign.append(blocked)  # a file of the user's where the tree needs a directory
        return
    on_disk = _read(path)
    known = p.old.get(rel)
    if on_disk is None:
        action = "created"
    elif on_disk == text:
        action = "unchanged"  # also a foreign file that holds exactly these bytes: taken into the manifest
    elif known is None:
        p.foreign.append(path)
        return
    elif sha256(on_disk) != known[0]:
        p.edited.append(path)
        return
    else:
        action = "changed"
    if action != "unchanged":
        p.writes[path] = text
    p.entries[rel] = (sha256(text), scope)
    p.results.append({"path": path, "action": action})


def _file_on_the_way(root: str, rel: str) -> str | None:
    parts = rel.split("/")[:-1]
    for i in range(1, len(parts) + 1):
        directory = os.path.join(root, *parts[:i])
        if os.path.lexists(directory) and not os.path.isdir(directory):
            return directory
    return None


def _plan_removal(p: Plan, rel: str, known: str) -> None:
    path = contained(p.root, rel)
    on_disk = _read(path)
    if on_disk is not None and sha256(on_disk) != known:
        p.edited.append(path)
        return
    del p.entries[rel]
    if on_disk is not None:
        p.removes.append(path)
        p.results.append({"path": path, "action": "removed"})


def _refuse(p: Plan) -> None:
    problems = []
    if p.foreign:
        problems.append(
            f"{len(p.foreign)} file(s) the render would write are not its own (not in {MANIFEST}), so it will not "
            f"overwrite them: {', '.join(p.foreign)}. Move or rename them (they are yours: the render never changes "
            "them), or choose another render_dir"
        )
    if p.edited:
        problems.append(
            f"{len(p.edited)} file(s) the render wrote earlier were edited since (their sha256 differs from "
            f"{MANIFEST}), so the render will not overwrite or remove them: {', '.join(p.edited)}. Put the change in "
            "the inventory instead and restore the file (git checkout), or delete the file to let the render "
            "write it again"
        )
    if problems:
        raise TreeError(f"nothing written under {p.root}: " + "; ".join(problems))


def apply(p: Plan, check_mode: bool = False) -> list[dict]:
    """Carry out a checked plan (nothing in check mode); return its results."""
    if check_mode or not p.changed():
        return p.results
    try:
        for path in [*p.writes, *p.removes]:
            _inside(p.root, path)  # the last guard: nothing is written or removed outside the root
        for path, text in p.writes.items():
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.inference-blueprints.tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, path)
        for path in p.removes:
            os.remove(path)
            _remove_empty_parents(p.root, os.path.dirname(path))
        os.makedirs(p.root, exist_ok=True)
        with open(os.path.join(p.root, MANIFEST), "w", encoding="utf-8") as fh:
            fh.write(_manifest_text(p.entries))
    except OSError as e:
        raise TreeError(f"cannot write under {p.root}: {e}") from None
    return p.results


def _inside(root: str, path: str) -> None:
    real_root, real = os.path.realpath(root), os.path.realpath(path)
    if os.path.commonpath([real_root, real]) != real_root or real == real_root:
        raise TreeError(f"refusing to write {path}: it resolves to {real}, outside {root}")


def _remove_empty_parents(root: str, directory: str) -> None:
    root = os.path.abspath(root)
    directory = os.path.abspath(directory)
    while directory != root and directory.startswith(root + os.sep) and not os.listdir(directory):
        os.rmdir(directory)
        directory = os.path.dirname(directory)


def write(root: str, files: dict[str, str], scope: str, prune: bool = False, check_mode: bool = False) -> list[dict]:
    """Check, then write ``files`` under ``root`` as ``scope`` (see the module's docstring)."""
    return apply(plan(root, {scope: files}, prune), check_mode)


def summary(results: list[dict]) -> list[str]:
    """Lines for the user: every file added, changed or removed (unchanged ones counted)."""
    words = {"created": "added", "changed": "changed", "removed": "removed"}
    lines = [f"{words[r['action']]:<8} {r['path']}" for r in results if r["action"] in words]
    unchanged = sum(1 for r in results if r["action"] == "unchanged")
    return [*lines, f"{unchanged} file(s) unchanged"] if unchanged else lines
