"""The table of transformations, which the layers below the API consult.

The frontend meets transformations inside user code (``grad(f)(x)`` in a body,
``jvp(f, (x,), (t,))``) and ``make_source`` shows the code behind them; neither may
import the API modules, which import the frontend.  Each API module registers its
transformations here when it is imported (``astjax/__init__.py`` imports them all),
and the lower layers look them up by name or by the function object.

>>> import astjax
>>> get("grad").function is astjax.grad, get("grad").inline
(True, True)
>>> entry_of(astjax.jvp).name
'jvp'
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional


@dataclass(frozen=True)
class Transformation:
    """One public transformation and how the lower layers may use it.

    ``inline``: written inside a transformed function with static arguments
    (``grad(f)``, ``vmap(g, in_axes=1)``), the frontend builds it at generation time
    and inlines its generated code.  ``code``: the Generated record behind a call of
    it (its signature is the transformation's own, documented where it registers).
    ``check``: validates a call's arguments before code is generated.  ``lift``: turns
    a nested def or lambda handed to it into a function it can take (``checkpoint``).
    """

    name: str
    function: Callable
    inline: bool = False
    code: Optional[Callable] = None
    check: Optional[Callable] = None
    lift: Optional[Callable] = None

    def main(self, *args):
        """The loaded main function of ``code(*args)``, its globals re-read."""
        gen = self.code(*args)
        gen.refresh()
        return gen.functions["main"]


_BY_NAME: dict = {}
_BY_ID: dict = {}


def register(name, function, *, inline=False, code=None, check=None,
             lift=None) -> Transformation:
    """Record ``function`` as the transformation ``name`` (re-registering replaces it)."""
    entry = Transformation(name, function, inline, code, check, lift)
    old = _BY_NAME.get(name)
    if old is not None:
        _BY_ID.pop(id(old.function), None)
    _BY_NAME[name] = entry
    _BY_ID[id(function)] = entry
    return entry


def get(name) -> Transformation:
    """The transformation registered as ``name``."""
    entry = _BY_NAME.get(name)
    if entry is None:   # importing any astjax module imports the package, which fills it
        raise KeyError(f"no transformation {name!r} is registered")
    return entry


def entry_of(obj) -> Optional[Transformation]:
    """The entry whose function is ``obj`` (by identity), or None."""
    entry = _BY_ID.get(id(obj))
    return entry if entry is not None and entry.function is obj else None


def is_transformation(obj, name) -> bool:
    """Whether ``obj`` is the transformation registered as ``name``."""
    entry = entry_of(obj)
    return entry is not None and entry.name == name


def inlinable(obj) -> bool:
    """Whether ``obj`` may be applied at generation time inside transformed code."""
    entry = entry_of(obj)
    return entry is not None and entry.inline


def names() -> list:
    """The registered names, in registration order."""
    return list(_BY_NAME)
