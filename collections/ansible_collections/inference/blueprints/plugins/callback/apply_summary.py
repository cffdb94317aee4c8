# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Callback: at the end of a run, list what inference.blueprints.k8s_apply did.

Part of the collection (not a project-level plugin) so that it loads wherever the collection
does: ansible-runner, and so AAP, replace the project's callback_plugins path. The repository's
ansible.cfg enables it; it makes site runs say, per cluster, which objects were created,
configured, deleted or rendered (unchanged ones are counted, not listed).
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: apply_summary
author: inference.blueprints contributors (@inference-blueprints)
type: aggregate
short_description: Summarise the objects inference.blueprints.k8s_apply touched, per cluster
description:
  - At the end of the playbook, prints per host (cluster) the objects created, configured, deleted
    or rendered by C(inference.blueprints.k8s_apply), and how many were unchanged.
requirements:
  - enabled in ansible.cfg (callbacks_enabled = inference.blueprints.apply_summary)
"""

from collections import defaultdict

from ansible.plugins.callback import CallbackBase

_APPLY = {"inference.blueprints.k8s_apply", "k8s_apply"}
_WRITERS = {f"{p}{n}" for p in ("inference.blueprints.", "") for n in ("render", "platform", "gitops")}


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "inference.blueprints.apply_summary"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._seen = defaultdict(list)
        self._files: list[str] = []
        self._changes: dict[str, str] = {}

    def v2_runner_on_ok(self, result):
        if result._task.action in _WRITERS:
            # render/platform/gitops actions write files for clusters delivered by render or gitops
            for f in result._result.get("files") or []:
                self._files.append(f["path"] if isinstance(f, dict) else f)
            # what the writer added, changed and removed (module_utils/render_tree.py), listed at the end
            for f in result._result.get("file_changes") or []:
                self._changes[f["path"]] = f["action"]
            return
        if result._task.action not in _APPLY:
            return
        for obj in result._result.get("objects", []) or []:
            self._seen[result._host.get_name()].append(obj)

    def v2_playbook_on_stats(self, stats):
        if self._files or self._changes:
            import os

            files = sorted(set(self._files) | set(self._changes))
            self._display.banner("FILES (delivery render / gitops)")
            counts = {a: sum(1 for v in self._changes.values() if v == a) for a in ("created", "changed", "removed")}
            self._display.display(
                f"{len(files)} files under {os.path.commonpath(files)}: {counts['created']} added, "
                f"{counts['changed']} changed, {counts['removed']} removed"
            )
            words = {"created": "added", "changed": "changed", "removed": "removed"}
            for path, action in sorted(self._changes.items()):
                self._display.display(f"  {words.get(action, action):<8} {path}")
        if not self._seen:
            return
        self._display.banner("OBJECTS (inference.blueprints.k8s_apply)")
        for host in sorted(self._seen):
            objs = self._seen[host]
            unchanged = sum(1 for o in objs if o.get("action") == "unchanged")
            changed = len(objs) - unchanged
            self._display.display(f"{host}: {len(objs)} objects, {changed} changed, {unchanged} unchanged")
            for o in objs:
                if o.get("action") == "unchanged":
                    continue
                where = f"{o['namespace']}/" if o.get("namespace") else ""
                self._display.display(f"  {o['action']:<10} {o['kind']} {where}{o['name']}")
