# Copyright: inference.blueprints contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes resource quantities: parse to bytes, format back (binary units)."""

from __future__ import annotations

import re

_UNITS = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
}
_QUANTITY = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$")


def parse(value) -> int:
    """Bytes of a quantity such as ``128Gi``, ``64G`` or ``1024``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    m = _QUANTITY.match(str(value))
    if not m or m.group(2) not in _UNITS:
        raise ValueError(f"{value!r} is not a memory quantity (e.g. 128Gi, 64G, 1024)")
    return int(float(m.group(1)) * _UNITS[m.group(2)])


def format_bytes(n: int) -> str:
    """The largest binary unit that divides ``n`` exactly (``137438953472`` -> ``128Gi``)."""
    for unit in ("Pi", "Ti", "Gi", "Mi", "Ki"):
        if n and n % _UNITS[unit] == 0:
            return f"{n // _UNITS[unit]}{unit}"
    return str(int(n))


def gib(value) -> str:
    """A GiB figure (int or float) as a quantity, in Mi when it is not whole."""
    value = float(value)
    if value.is_integer():
        return f"{int(value)}Gi"
    return f"{round(value * 1024)}Mi"
