"""A module compiled with ``from __future__ import annotations``."""
from __future__ import annotations


def annotated(x: float) -> float:
    def local(y: list[int]) -> int:
        return len(y)

    return x + local([1])
