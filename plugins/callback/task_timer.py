# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Project-level callback: where a run's time goes, task by task.

Not enabled by default. The benchmarks and anyone asking "why does a no-op re-run take 4 s"
turn it on for one run:

    ANSIBLE_CALLBACKS_ENABLED=task_timer ansible-playbook -i inventories/example-chat playbooks/platform.yml

ansible.posix's profile_tasks does the same, but that collection is not one this project installs.
"""

from __future__ import annotations

import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: task_timer
type: aggregate
short_description: Print the wall time of every play and task at the end of a run
description:
  - At the end of the playbook, prints each play and task with the seconds from its start to the
    next one's, slowest first, and the time since the callback was loaded (Ansible's own start-up
    before that is not counted).
requirements:
  - enable for one run with ANSIBLE_CALLBACKS_ENABLED=task_timer (the repository's ansible.cfg
    puts this directory on callback_plugins)
options:
  top:
    description: How many of the slowest entries to print (0 prints all).
    type: int
    default: 25
    env:
      - name: TASK_TIMER_TOP
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "task_timer"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._loaded = time.monotonic()
        self._current: tuple[str, float] | None = None
        self._rows: list[tuple[float, str]] = []

    def _mark(self, name: str) -> None:
        now = time.monotonic()
        if self._current:
            self._rows.append((now - self._current[1], self._current[0]))
        self._current = (name, now)

    def v2_playbook_on_play_start(self, play):
        self._mark(f"PLAY {play.get_name()}")

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._mark(task.get_name())

    def v2_playbook_on_handler_task_start(self, task):
        self._mark(f"HANDLER {task.get_name()}")

    def v2_playbook_on_stats(self, stats):
        self._mark("end")
        top = int(self.get_option("top"))
        rows = sorted(self._rows, reverse=True)
        self._display.banner("TASK TIMES (task_timer)")
        for seconds, name in rows[:top] if top else rows:
            self._display.display(f"{seconds:7.2f} s  {name}")
        total = time.monotonic() - self._loaded
        self._display.display(f"{total:7.2f} s  in all, since the callback loaded")
