"""Fresh, readable, deterministic names for generated code.

Names derive from the user's own (``outputs``, ``outputs_dot``, ``d_W``); a clash
gets a numeric suffix (``outputs_2``).  The same input always yields the same names,
so generated source is stable and diffable.
"""
from __future__ import annotations

import keyword
import re

_ident = re.compile(r"[^0-9a-zA-Z_]")


class NameGen:
    def __init__(self, reserved=()):
        self.used: set[str] = set(reserved)

    def reserve(self, name: str) -> str:
        self.used.add(name)
        return name

    def fresh(self, base: str) -> str:
        base = _ident.sub("_", base) or "t"
        if base[0].isdigit():
            base = "v" + base
        if keyword.iskeyword(base) or base in ("np", "ra", "rt", "rb", "math", "jr", "dbg", "sh"):
            base = base + "_"
        if base not in self.used:
            self.used.add(base)
            return base
        stem = re.sub(r"_\d+$", "", base)
        i = 2
        while f"{stem}_{i}" in self.used:
            i += 1
        name = f"{stem}_{i}"
        self.used.add(name)
        return name
