"""Oracles and generated source for the composition matrix and the differential fuzzer.

Nothing here imports astjax: the oracles must be independent of the code they judge.

* pytrees of float arrays (tuples, lists, dicts) and their *specs* (the same
  containers with ``Leaf(shape)`` leaves), so wrappers can be emitted as source for
  any output structure;
* float64 finite differences with a fourth-order stencil (nested three deep, they
  still agree with exact third derivatives to about 1e-6);
* ``SourceModules``: writes Python text to a real file and imports it (astjax reads
  source, so generated programs and wrappers must live in files ``inspect`` finds);
* the random program generator of the fuzzer (``gen_program``) and its shrinker.
"""
from __future__ import annotations

import importlib.util
import itertools
import os
import sys
import tempfile
from dataclasses import dataclass, field

import numpy as np

# ----------------------------------------------------------------------------- pytrees


@dataclass(frozen=True)
class Leaf:
    """An array leaf of a spec: its shape."""

    shape: tuple


def is_leaf(x):
    return not isinstance(x, (tuple, list, dict))


def tmap(fn, *trees):
    """Map ``fn`` over the leaves of trees of identical structure (containers kept)."""
    t = trees[0]
    if isinstance(t, dict):
        return {k: tmap(fn, *(s[k] for s in trees)) for k in sorted(t, key=repr)}
    if isinstance(t, (tuple, list)):
        items = [tmap(fn, *(s[i] for s in trees)) for i in range(len(t))]
        return type(t)(items)
    return fn(*trees)


def leaves(t):
    if isinstance(t, dict):
        return [x for k in sorted(t, key=repr) for x in leaves(t[k])]
    if isinstance(t, (tuple, list)):
        return [x for v in t for x in leaves(v)]
    return [t]


def paths(t, prefix=""):
    """(index suffix such as "[0]['w']", leaf) for every leaf, in order."""
    if isinstance(t, dict):
        return [p for k in sorted(t, key=repr) for p in paths(t[k], f"{prefix}[{k!r}]")]
    if isinstance(t, (tuple, list)):
        return [p for i, v in enumerate(t) for p in paths(v, f"{prefix}[{i}]")]
    return [(prefix, t)]


def spec_of(t):
    return tmap(lambda x: Leaf(tuple(np.shape(x))), t)


def structure(t):
    """The containers of a tree with every leaf replaced by '*' (for comparisons)."""
    if isinstance(t, dict):
        return ("dict", tuple((k, structure(t[k])) for k in sorted(t, key=repr)))
    if isinstance(t, (tuple, list)):
        return (type(t).__name__, tuple(structure(v) for v in t))
    return "*"


def tree_expr(spec, root, leaf):
    """Python source building a tree like ``spec`` whose leaves are ``leaf(root + path)``."""
    if isinstance(spec, dict):
        return "{" + ", ".join(f"{k!r}: {tree_expr(v, f'{root}[{k!r}]', leaf)}"
                               for k, v in spec.items()) + "}"
    if isinstance(spec, (tuple, list)):
        items = [tree_expr(v, f"{root}[{i}]", leaf) for i, v in enumerate(spec)]
        if isinstance(spec, tuple):
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        return "[" + ", ".join(items) + "]"
    return leaf(root, spec)


def tree_add(a, b, alpha=1.0):
    return tmap(lambda u, v: np.asarray(u, np.float64) + alpha * np.asarray(v, np.float64), a, b)


def tree_scale(a, s):
    return tmap(lambda u: np.asarray(u, np.float64) * s, a)


def tree_stack(trees, axis=0):
    return tmap(lambda *xs: np.stack([np.asarray(x, np.float64) for x in xs], axis=axis), *trees)


def tree_take(t, i, axis=0):
    return tmap(lambda x: np.take(np.asarray(x), i, axis=axis), t)


# ----------------------------------------------------------------- finite differences

STEP = 1e-3


def _stencil(f, point, h):
    """Fourth-order central difference of tree-valued ``f`` along ``point(s)``."""
    fp2, fp1, fm1, fm2 = f(point(2 * h)), f(point(h)), f(point(-h)), f(point(-2 * h))
    return tmap(lambda a, b, c, d: (-np.asarray(a, np.float64) + 8 * np.asarray(b, np.float64)
                                    - 8 * np.asarray(c, np.float64)
                                    + np.asarray(d, np.float64)) / (12 * h),
                fp2, fp1, fm1, fm2)


def fd_directional(f, args, tangents, h=STEP):
    """d/ds f(*(args + s * tangents)) at s = 0 (``tangents``: None entries are zero)."""
    def point(s):
        return tuple(a if t is None else tmap(lambda u, v: np.asarray(u, np.float64) + s * v,
                                              a, t)
                     for a, t in zip(args, tangents))
    return _stencil(lambda p: f(*p), point, h)


def fd_grad(f, args, argnum, h=STEP):
    """Gradient of scalar ``f`` w.r.t. ``args[argnum]`` (a tree), element by element."""
    arg = args[argnum]
    flat = paths(arg)
    grads = []
    for li, (_, leaf) in enumerate(flat):
        leaf = np.asarray(leaf, np.float64)
        g = np.zeros(leaf.shape)
        for j in range(leaf.size):
            def point(s, li=li, j=j):
                def bump(k, x):
                    x = np.array(x, np.float64)
                    if k == li:
                        x.reshape(-1)[j] += s
                    return x
                counter = itertools.count()
                new = tmap(lambda x: bump(next(counter), x), arg)
                return args[:argnum] + (new,) + args[argnum + 1:]
            g.reshape(-1)[j] = float(_stencil(lambda p: f(*p), point, h))
        grads.append(g)
    it = iter(grads)
    return tmap(lambda _: next(it), arg)


# ------------------------------------------------------------------------- comparing


class Mismatch(AssertionError):
    """The transformed function and its oracle disagree (structure, shape or value)."""


def assert_tree_close(actual, expected, rtol, atol, what="result"):
    if structure(actual) != structure(expected):
        raise Mismatch(f"{what}: structure {structure(actual)} != oracle's "
                       f"{structure(expected)}")
    for i, (a, e) in enumerate(zip(leaves(actual), leaves(expected))):
        a = np.asarray(a)
        e = np.asarray(e, np.float64)
        if a.shape != e.shape:
            raise Mismatch(f"{what}: leaf {i} has shape {a.shape}, oracle {e.shape}")
        if not np.all(np.isfinite(e)):
            continue
        scale = max(1.0, float(np.max(np.abs(e))) if e.size else 1.0)
        err = float(np.max(np.abs(a.astype(np.float64) - e))) if e.size else 0.0
        if not (err <= atol * scale + rtol * scale) or not np.all(np.isfinite(a)):
            raise Mismatch(f"{what}: leaf {i} differs by {err:.3g} (scale {scale:.3g})\n"
                           f"  astjax: {np.array2string(a.ravel()[:8], precision=6)}\n"
                           f"  oracle: {np.array2string(e.ravel()[:8], precision=6)}")


# ------------------------------------------------------------------ generated modules


class SourceModules:
    """Writes Python text to files in one temporary directory and imports them."""

    def __init__(self, prefix="astjax_gen"):
        self.dir = tempfile.mkdtemp(prefix=prefix + "_")
        self.prefix = prefix
        self.count = itertools.count()

    def load(self, source, globals_=None, name=None):
        name = name or f"{self.prefix}_{os.getpid()}_{next(self.count)}"
        path = os.path.join(self.dir, name + ".py")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(source)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        for k, v in (globals_ or {}).items():
            setattr(module, k, v)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        for k, v in (globals_ or {}).items():
            setattr(module, k, v)
        return module
