# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Callback: a YAML syntax error in an inventory's group_vars or host_vars is reported with its
file, line and column.

ansible-core (2.21 here) loads those files in its host_group_vars vars plugin, which re-raises any
error as a new ``AnsibleParserError`` made from the message text alone
(``raise AnsibleParserError(to_native(e))`` in lib/ansible/plugins/vars/host_group_vars.py): the
parser knew the file and line, the user sees only "YAML parsing failed: ...", even at -vvv
(docs/reliability.md, cases chat-yaml-flow and edge-yaml-indent). Before the first play, this
callback parses the same files with the same loader and prints the parser's own error, which
names them. Part of the collection, like apply_summary, so that it loads wherever the collection
does (ansible-runner and AAP replace the project's callback_plugins path); the repository's
ansible.cfg enables it.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: inventory_syntax
author: inference.blueprints contributors (@inference-blueprints)
type: aggregate
short_description: Name the file and line of a YAML syntax error in group_vars and host_vars
description:
  - Before the first play, parses every file under the inventory's (and the playbook directory's)
    C(group_vars) and C(host_vars) and prints the YAML parser's error, with its file, line and
    column, for any that does not parse.
requirements:
  - enabled in ansible.cfg (callbacks_enabled = inference.blueprints.inventory_syntax)
"""

import os

from ansible.errors import AnsibleError
from ansible.plugins.callback import CallbackBase
from ansible_collections.inference.blueprints.plugins.module_utils.inventory_files import var_files as _var_files


def _parse(loader, path):
    """Parse a file without touching the loader's file cache (the vars plugin must still load it
    itself, marked as the trusted template source it is)."""
    try:
        return loader.load_from_file(path, cache="none")  # ansible-core >= 2.19
    except TypeError:
        return loader.load_from_file(path, cache=False)  # 2.16-2.18: cache is a bool


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "inference.blueprints.inventory_syntax"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._checked = False

    def v2_playbook_on_play_start(self, play):
        if self._checked:
            return
        self._checked = True
        try:
            manager = play.get_variable_manager()
            loader = play._loader
            sources = list(getattr(manager._inventory, "_sources", None) or [])
        except AttributeError:
            return
        dirs = []
        for source in sources:
            path = os.path.realpath(str(source))
            dirs.append(path if os.path.isdir(path) else os.path.dirname(path))
        dirs.append(os.path.realpath(loader.get_basedir()))
        for directory in dict.fromkeys(dirs):
            for path in _var_files(directory):
                try:
                    _parse(loader, path)
                except AnsibleError as exc:
                    if "YAML" in type(exc).__name__ or "YAML" in str(exc):
                        self._display.error(exc)
