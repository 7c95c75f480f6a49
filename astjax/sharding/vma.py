"""JAX's ``check_vma=True`` reverse mode inside a shard_map: varying manual axes.

Under ``check_vma=True`` every value inside a shard_map has a type: the mesh axes it
varies over (its *vma*).  ``in_specs`` splitting an input along ``a`` make it vary
over ``a``; ``P()`` inputs are invariant; psum/pmean/pmax/pmin make their result
invariant over their axes; all_gather, psum_scatter, ppermute, all_to_all, pvary and
axis_index give values that vary over theirs (what JAX 0.10 gives: all_gather's result
varies); any other operation takes the union of its operands'.  Where an invariant
value meets a varying one JAX inserts a ``pvary``, whose transpose is a psum: a
gradient with respect to a replicated parameter comes out summed over the devices.

astjax gets JAX's numbers without retyping the derivative code.  Its per-device
derivatives (check_vma=False's transposes: psum <-> psum...) are the exact transpose
of the program on per-device values, in which an invariant value is held as identical
copies.  The typed program's vjp is that transpose between two fixed linear maps,
applied here and nowhere else (``reverse``):

* the cotangent of an output invariant over axes A goes to the first device along A
  (index 0 on each of them), zeros elsewhere: per-device cotangents summing to it
  (any such split gives the same result, since the copies of an invariant output move
  together);
* the cotangent of an input invariant over axes A is the psum over A of its copies'
  cotangents (the transpose of copying it to every device: JAX's pvary).

So no collective's transpose changes, and a new collective needs only its entry in
``_RULES`` (a collective missing there is refused).  The types of the inputs are
what the driver, collectives and gradients recorded for the arrays a shard holds
(``record``); the outputs' come from reading the differentiated function's core form
(``output_types``).  An argument whose type is not known (an array computed from
others in the per-shard function with NumPy), a call astjax does not read, or reverse
mode read by another transformation there (``jit(grad(f))``, grad of grad) is an error
naming the user's line, never check_vma=False's numbers.
"""
from __future__ import annotations

import weakref

import numpy as np

from astjax.device import is_device_array
from astjax.sharding import collectives as sh
from astjax.sharding.errors import fail
from astjax.tree_util import tree_flatten, tree_leaves, tree_map, tree_unflatten

EMPTY = frozenset()


def _is_array(v):
    """Arrays have a type to look up; other values (Python numbers, which JAX treats
    as literal constants, functions, dtypes) are the same on every device."""
    return isinstance(v, (np.ndarray, np.generic)) or is_device_array(v)


# ------------------------------------------------------------ types of run-time values

def active():
    """The context of a check_vma=True shard (not a derived plan's), or None."""
    ctx = sh.current()
    return ctx if ctx is not None and ctx.check_vma is True else None


def _table(ctx):
    return ctx.extra.setdefault("vma", {})


def record(ctx, value, vma):
    """Remember the type of every array leaf of ``value`` (per shard, by identity)."""
    if ctx is None:
        return value
    table = _table(ctx)
    leaves = tree_leaves(value)
    for leaf in leaves:
        if not _is_array(leaf):
            continue
        key = id(leaf)
        try:
            ref = weakref.ref(leaf, lambda _r, key=key, t=table: t.pop(key, None))
        except TypeError:          # NumPy scalars: held (they are small)
            ref = (lambda obj: (lambda: obj))(leaf)
        table[key] = (ref, frozenset(vma))
    return value


def type_of_leaf(ctx, leaf):
    """The recorded vma of an array (None: not known); anything else (literals,
    functions, dtypes) is the same on every device."""
    if not _is_array(leaf):
        return EMPTY
    found = _table(ctx).get(id(leaf))
    if found is not None and found[0]() is leaf:
        return found[1]
    return None


def record_inputs(ctx, args, specs, manual):
    """A check_vma=True shard's inputs: each varies over the axes its spec splits.
    ``manual``: the shard_map's own manual axes, those the types speak of (not those
    of a named vmap around it, whose examples are not devices of this mesh)."""
    ctx.extra["vma_axes"] = tuple(manual)
    leaves, _ = tree_flatten(tuple(args))
    for leaf, spec in zip(leaves, specs):
        axes = spec.mesh_axes() if spec is not None else ()
        record(ctx, leaf, frozenset(a for a in axes if a in manual))


def _manual(ctx):
    return ctx.extra.get("vma_axes", tuple(ctx.axis_sizes))


def collective_result(name, x, out, axes):
    """Record the type of a collective's result (only inside a check_vma=True shard)."""
    ctx = active()
    if ctx is None:
        return out
    rule = _RULES[name]
    if name == "axis_index":
        return record(ctx, out, frozenset(axes))
    for xl, ol in zip(tree_leaves(x), tree_leaves(out)):
        t = type_of_leaf(ctx, xl)
        if t is None and rule == "reduce" and set(_manual(ctx)) <= set(axes):
            t = EMPTY             # reduced over every manual axis: invariant whatever x was
        if t is not None:
            record(ctx, ol, _apply(rule, t, axes))
    return out


# What each collective does to the type of its operand.
_RULES = {"psum": "reduce", "pmean": "reduce", "pmax": "reduce", "pmin": "reduce",
          "all_gather": "vary", "psum_scatter": "vary", "ppermute": "vary",
          "all_to_all": "vary", "pvary": "vary", "pcast": "vary", "axis_index": "vary",
          "axis_size": "static", "ppermute_inverse": "static"}


sh._TYPING[:] = [collective_result]

# "static" primitives whose result may depend on array values (a loop's count)
_VALUED = {"range", "clamp_index", "item_index", "format_string"}


def _apply(rule, t, axes):
    if rule == "reduce":
        return t - frozenset(axes)
    if rule == "vary":
        return t | frozenset(axes)
    return EMPTY


def _axes(value):
    return (value,) if isinstance(value, str) else tuple(value)


# ----------------------------------------------- types of a function's values (static)

class _Unknown(Exception):
    def __init__(self, message, loc=None):
        super().__init__(message)
        self.loc = loc


def _join(a, b):
    """The type of a value that is ``a`` or ``b`` (branches, loop iterations)."""
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0]:
        if a[0] == "seq" and len(a[1]) == len(b[1]):
            return ("seq", tuple(_join(x, y) for x, y in zip(a[1], b[1])))
        if a[0] == "dict" and a[1].keys() == b[1].keys():
            return ("dict", {k: _join(a[1][k], b[1][k]) for k in a[1]})
        if a[0] == "list":
            return ("list", _join(a[1], b[1]))
    return _flat(a) | _flat(b)


def _flat(t):
    """Every axis a (possibly structured) type mentions."""
    if t is None:
        return EMPTY
    if isinstance(t, frozenset):
        return t
    if t[0] == "seq":
        return frozenset().union(*[_flat(x) for x in t[1]]) if t[1] else EMPTY
    if t[0] == "dict":
        return frozenset().union(*[_flat(x) for x in t[1].values()]) if t[1] else EMPTY
    return _flat(t[1])


def value_type(ctx, value):
    """The structured type of a run-time value (None where a leaf is not known)."""
    if isinstance(value, (tuple, list)) and not hasattr(value, "_fields"):
        return ("seq", tuple(value_type(ctx, v) for v in value))
    if isinstance(value, dict):
        return ("dict", {k: value_type(ctx, v) for k, v in value.items()})
    leaves = tree_leaves(value)
    if len(leaves) == 1 and leaves[0] is value:
        return type_of_leaf(ctx, value)
    types = {type_of_leaf(ctx, v) for v in leaves}
    # another pytree (a namedtuple...): one type for all its leaves, or not known
    return types.pop() if len(types) == 1 else None if types else EMPTY


def _has_unknown(t):
    if t is None:
        return True
    if isinstance(t, frozenset):
        return False
    if t[0] == "seq":
        return any(_has_unknown(x) for x in t[1])
    if t[0] == "dict":
        return any(_has_unknown(x) for x in t[1].values())
    return _has_unknown(t[1])


class _Typing:
    """Reads a core function once with the types of its parameters (an abstract
    interpretation: branches and loops join the types of their paths)."""

    def __init__(self, ctx, fn):
        self.ctx, self.fn = ctx, fn
        self.free = fn.env.current() if fn.env is not None else {}
        self.consts = {}          # variables holding a constant (axis names, perms)

    def static(self, op, env):
        """The Python value of a constant operand (an axis name), or raise."""
        from astjax.core import Const, Var
        if isinstance(op, Const):
            return op.value
        if isinstance(op, Var):
            if op.name in self.consts:
                return self.consts[op.name]
            if op.name not in env and op.name in self.free:
                return self.free[op.name]
        raise _Unknown("an axis_name that is not a constant")

    def note_const(self, s, env):
        """Remember constant axis names built in the function (``axes = ("i", "j")``)."""
        from astjax import core
        target = s.target if isinstance(s, (core.Prim, core.Copy)) else None
        if target is None:
            return
        self.consts.pop(target, None)
        try:
            if isinstance(s, core.Copy):
                value = self.static(s.value, env)
            elif s.prim in ("make_tuple", "make_list"):
                value = tuple(self.static(a, env) for a in s.args[0])
            else:
                return
        except _Unknown:
            return
        if isinstance(value, str) or isinstance(value, tuple) and all(
                isinstance(a, str) for a in value):
            self.consts[target] = value

    def atom(self, op, env):
        from astjax.core import Const, Index, SliceAtom, Var
        if isinstance(op, Var):
            if op.name in env:
                return env[op.name]
            if op.name in self.free:
                t = value_type(self.ctx, self.free[op.name])
                if _has_unknown(t):
                    raise _Unknown(f"the value {op.name!r} it reads from outside (an array "
                                   "whose variation across devices astjax does not know)")
                return t
            return EMPTY
        if isinstance(op, Const):
            t = value_type(self.ctx, op.value)
            if _has_unknown(t):
                raise _Unknown("a constant array whose variation across devices astjax "
                               "does not know")
            return t
        if isinstance(op, (Index, SliceAtom)):
            return frozenset().union(*[_flat(self.atom(a, env)) for a in op.atoms()]) \
                if op.atoms() else EMPTY
        if isinstance(op, tuple):
            return ("seq", tuple(self.atom(a, env) for a in op))
        return EMPTY

    def operands(self, s, env):
        out = EMPTY
        for a in list(s.args) + list(s.kwargs.values()):
            out |= _flat(self.atom(a, env))
        return out

    def prim(self, s, env):
        from astjax import primitives as P
        from astjax.core import Const, Index
        name = s.prim
        if name in _RULES:
            if _RULES[name] == "static":
                return EMPTY
            axes_arg = s.args[0] if name in ("axis_index", "axis_size") else s.args[1]
            try:
                axes = _axes(self.static(axes_arg, env))
            except _Unknown as e:
                raise _Unknown(f"{name}: {e}", s.loc) from None
            if name == "axis_index":
                return frozenset(axes)
            return _apply(_RULES[name], _flat(self.atom(s.args[0], env)), axes)
        prim = P.REGISTRY.get(name)
        if name == "reverse_mode_guard":
            raise _Unknown("reverse mode inside the differentiated function (grad of grad, "
                           "a vjp in it)", s.loc)
        if prim is not None and prim.code.startswith("sh."):
            raise _Unknown(f"sh.{name}, whose effect on varying axes astjax does not type",
                           s.loc)
        if name in ("make_tuple", "make_list"):
            return ("seq", tuple(self.atom(a, env) for a in s.args[0]))
        if name == "make_dict" and isinstance(s.args[0], Const):
            return ("dict", dict(zip(s.args[0].value,
                                     (self.atom(a, env) for a in s.args[1]))))
        if name == "getitem":
            base = self.atom(s.args[0], env)
            idx = s.args[1]
            if isinstance(idx, Index) and len(idx.items) == 1 and \
                    isinstance(idx.items[0], Const) and isinstance(base, tuple):
                key = idx.items[0].value
                if base[0] == "seq" and isinstance(key, int) and -len(base[1]) <= key < \
                        len(base[1]):
                    return base[1][key]
                if base[0] == "dict" and key in base[1]:
                    return base[1][key]
                if base[0] == "list":
                    return base[1]
            return _flat(base) | _flat(self.atom(idx, env))
        if name in ("compact", "instantiate", "as_sequence", "stop_gradient"):
            return self.atom(s.args[0], env)
        if name == "append_owned":
            seq = self.atom(s.args[0], env)
            item = self.atom(s.args[1], env)
            old = seq[1] if isinstance(seq, tuple) and seq[0] == "list" else \
                _join_items(seq)
            return ("list", _join(old, item))
        if name == "tree_stack":
            seq = self.atom(s.args[0], env)
            return seq[1] if isinstance(seq, tuple) and seq[0] == "list" else _flat(seq)
        if name == "tree_index":
            tree = self.atom(s.args[0], env)
            extra = _flat(self.atom(s.args[1], env))
            return _map(tree, lambda t: t | extra)
        if prim is not None and prim.kind == "static" and name not in _VALUED:
            return EMPTY          # shapes, lengths, dtypes: Python values, the same everywhere
        return self.operands(s, env)

    def run(self, stmts, env):
        from astjax import core
        for s in stmts:
            if isinstance(s, core.Prim):
                t = self.prim(s, env)
                if s.target:
                    env[s.target] = t
                    self.note_const(s, env)
            elif isinstance(s, core.Copy):
                env[s.target] = self.atom(s.value, env)
                self.note_const(s, env)
            elif isinstance(s, core.SetItem):
                env[s.target] = _join(env.get(s.target, EMPTY),
                                      _flat(self.atom(s.value, env)) |
                                      _flat(self.atom(s.index, env)))
            elif isinstance(s, core.External):
                t = EMPTY
                for a in list(s.args) + list(s.kwargs.values()):
                    t |= _flat(self.atom(a, env))
                if s.target:
                    if t:
                        raise _Unknown("a call astjax does not read receives a value that "
                                       "varies across devices", s.loc)
                    env[s.target] = EMPTY
            elif isinstance(s, core.If):
                test = _flat(self.atom(s.test, env)) if not isinstance(s.test, core.Prim) \
                    else _flat(self.prim(s.test, env))
                a, b = dict(env), dict(env)
                self.run(s.body, a)
                self.run(s.orelse, b)
                self._merge(env, [a, b], test)
            elif isinstance(s, core.For):
                it = self.prim(s.iter, env) if isinstance(s.iter, core.Prim) else \
                    self.atom(s.iter, env)
                self._loop(env, lambda e: (_flat(it), self._for_body(s, e, it)))
            elif isinstance(s, core.While):
                self._loop(env, lambda e: self._while_body(s, e))
            elif isinstance(s, core.Return):
                return self.atom(s.value, env)
        return None

    def _for_body(self, s, env, it):
        env[s.target] = _flat(it)
        self.run(s.body, env)

    def _while_body(self, s, env):
        self.run(s.test_body, env)
        test = _flat(self.atom(s.test, env))
        self.run(s.body, env)
        return test, None

    def _loop(self, env, step):
        """Iterate the body's types to their fixed point (types only grow)."""
        for _ in range(64):
            trial = dict(env)
            test, _ = step(trial)
            before = dict(env)
            self._merge(env, [trial], test, check=False)
            if env == before:        # settled: check the condition on the final types
                self._merge(env, [trial], test)
                return
        raise _Unknown("a loop whose types do not settle")

    @staticmethod
    def _merge(env, branches, test, check=True):
        """Join the branches' types.  A branch (or loop) whose condition varies where a
        value it assigns does not: JAX types such a ``lax.cond``/``while_loop`` result
        by the branches alone (invariant, although the devices took different
        branches), so its gradients follow no typing astjax can reproduce: refused."""
        names = set().union(*[b.keys() for b in branches])
        for n in names:
            t = env.get(n)
            for b in branches:
                if b.get(n) is not t:
                    t = _join(t, b.get(n))
            if check and test and any(b.get(n) is not env.get(n) for b in branches):
                if not _covers(t, test):
                    raise _Unknown(
                        f"a branch or loop whose condition varies across devices (over "
                        f"{sorted(test)}) but whose result does not (JAX types a "
                        "lax.cond/while_loop result by its branches alone)")
            env[n] = t


def _covers(t, axes):
    """Every leaf of the (structured) type varies over all of ``axes``."""
    if t is None:
        return False
    if isinstance(t, frozenset):
        return axes <= t
    if t[0] == "seq":
        return all(_covers(x, axes) for x in t[1])
    if t[0] == "dict":
        return all(_covers(x, axes) for x in t[1].values())
    return _covers(t[1], axes)


def _join_items(t):
    if isinstance(t, tuple) and t[0] == "seq":
        out = None
        for x in t[1]:
            out = _join(out, x)
        return out
    return t


def _map(t, f):
    if t is None:
        return None
    if isinstance(t, frozenset):
        return f(t)
    if t[0] == "seq":
        return ("seq", tuple(_map(x, f) for x in t[1]))
    if t[0] == "dict":
        return ("dict", {k: _map(x, f) for k, x in t[1].items()})
    return ("list", _map(t[1], f))


def output_types(ctx, fun, fn, values, what):
    """The structured type of what ``fn`` (a core function: the forward sweep of
    ``fun``'s vjp) returns on ``values`` inside this shard."""
    from astjax.binding import function_arguments
    from astjax.generation import cached
    static = function_arguments(values)
    typing = _Typing(ctx, fn)
    env = {}
    for i, (p, v) in enumerate(zip(fn.params, values)):
        t = value_type(ctx, v)
        if _has_unknown(t):
            fail(f"{what} inside a shard_map with check_vma=True: astjax does not know "
                 f"how argument {i} ({p}) varies across devices (an array the per-shard "
                 "function computed with NumPy, or a pytree mixing varying and "
                 "replicated arrays other than a tuple, list or dict; astjax types the "
                 "shard_map's inputs, collectives' results and gradients)",
                 "pass the shard_map's inputs (or a collective's result) directly and "
                 "compute inside the differentiated function, or use check_vma=False")
        env[p] = t
    # the types depend on the parameters' and the free arrays' only: typed once each
    free = tuple((k, _hashable(value_type(ctx, v))) for k, v in typing.free.items()
                 if any(_is_array(x) for x in tree_leaves(v)))
    key = ("vma types", static, tuple(_hashable(env[p]) for p in fn.params), free)
    try:
        return cached(fun, key, lambda: typing.run(fn.body, env))
    except _Unknown as e:
        where = f" ({e.loc.filename}:{e.loc.lineno})" if e.loc is not None else ""
        fail(f"{what} inside a shard_map with check_vma=True: astjax cannot type "
             f"{e}{where}, so it cannot give JAX's check_vma=True gradient",
             "pass check_vma=False to shard_map (JAX's check_vma=False gradients), or "
             "take the gradient of the whole shard_map'ed function from outside")


def _first(t):
    """The type of a pair's first item."""
    if isinstance(t, tuple) and t[0] == "seq" and len(t[1]) == 2:
        return t[1][0]
    return _flat(t)


def _hashable(t):
    if t is None or isinstance(t, frozenset):
        return t
    if t[0] == "dict":
        return ("dict", tuple(sorted(((repr(k), _hashable(x)) for k, x in t[1].items()))))
    if t[0] == "seq":
        return ("seq", tuple(_hashable(x) for x in t[1]))
    return (t[0], _hashable(t[1]))


def _leaf_types(t, value):
    """One vma per leaf of ``value`` from its structured type (a type that lost the
    structure of several leaves of different types is refused, never guessed)."""
    n = len(tree_leaves(value))
    if isinstance(t, frozenset):
        return [t] * n
    if t[0] == "seq" and isinstance(value, (tuple, list)) and len(value) == len(t[1]):
        return [x for sub, v in zip(t[1], value) for x in _leaf_types(sub, v)]
    if t[0] == "dict" and isinstance(value, dict) and set(value) == set(t[1]):
        order = tree_flatten(value)[1]
        keys = tree_unflatten(order, list(range(len(tree_leaves(value)))))
        per = {}
        for k in value:
            for i, x in zip(tree_leaves(keys[k]), _leaf_types(t[1][k], value[k])):
                per[i] = x
        return [per[i] for i in range(len(per))]
    flat = _flat(t)
    if n > 1 and flat and any(_flat(x) != flat for x in _parts(t)):
        fail("a result of the differentiated function inside a shard_map with "
             "check_vma=True is a pytree astjax did not follow, whose parts vary over "
             "different devices' axes",
             "return a tuple, list or dict, or use check_vma=False")
    return [flat] * n


def _parts(t):
    if isinstance(t, frozenset):
        return [t]
    if t[0] == "seq":
        return [p for x in t[1] for p in _parts(x)]
    if t[0] == "dict":
        return [p for x in t[1].values() for p in _parts(x)]
    return _parts(t[1])


# ------------------------------------------------------------------ the two boundaries

def _first_along(ctx, axes):
    """True on the devices at index 0 along every axis of ``axes``."""
    return all(int(ctx.comm.index((a,))) == 0 for a in axes)


def seed(ctx, out_types, cotangent):
    """Per-device cotangents of the outputs: an output invariant over axes A gets its
    cotangent on the first device along A and zeros on the others."""
    manual = set(_manual(ctx))
    leaves, tdef = tree_flatten(cotangent)
    out = []
    for c, t in zip(leaves, out_types):
        inv = tuple(sorted(manual - t))
        out.append(c if not inv or _first_along(ctx, inv) else c * 0)
    return tree_unflatten(tdef, out)


def total(ctx, in_types, cotangents):
    """The cotangent of an input invariant over axes A: the psum over A of its copies'
    (the transpose of handing it to every device: JAX's implicit pvary).  This and
    ``seed`` are the one place where check_vma=True's transposes differ from the
    per-device ones."""
    manual = _manual(ctx)
    leaves, tdef = tree_flatten(cotangents)
    out = []
    for c, t in zip(leaves, in_types):
        inv = tuple(a for a in manual if a not in t)
        if inv and np.issubdtype(np.dtype(getattr(c, "dtype", type(c))), np.inexact):
            c = ctx.comm.allreduce(sh._arr(c), inv, "sum")
        out.append(record(ctx, c, t))
    return tree_unflatten(tdef, out)


def reverse(ctx, fun, values, nums, has_aux, what, vjp_code):
    """``(out, aux, pullback)`` of ``fun`` at ``values`` with JAX's check_vma=True
    semantics: the per-device vjp (check_vma=False's exact transposes; ``vjp_code(nums)``
    is api.py's generated forward and backward sweeps) between the two boundaries.
    ``pullback(ct)`` gives one cotangent per argument in ``nums``."""
    from astjax.binding import call_bound
    gen = vjp_code(tuple(nums))
    # the forward sweep's core form returns (output, residuals): its output's type
    result_t = _first(output_types(ctx, fun, gen.core[0][0], values, what))
    if has_aux:
        result_t = _first(result_t)
    gen.refresh()
    out, residuals = call_bound(gen.functions["fwd"], values)
    aux = None
    if has_aux:
        out, aux = out
    out_types = _leaf_types(result_t, out)
    record_tree(ctx, out, out_types)
    in_types = [type_of_leaf(ctx, leaf) for k in nums for leaf in tree_leaves(values[k])]
    bwd = gen.functions["bwd"]

    def pullback(cotangent):
        cts = bwd(residuals, seed(ctx, out_types, cotangent))
        return total(ctx, in_types, tuple(cts))
    return out, aux, pullback


def record_tree(ctx, value, types):
    for leaf, t in zip(tree_leaves(value), types):
        record(ctx, leaf, t)
    return value


def ones_seed(out):
    return tree_map(lambda v: np.ones_like(v), out)


# ------------------------------------------------------- grad, value_and_grad, vjp here

def gradient(fun, values, argnums, has_aux, kind, vjp_code):
    """grad / value_and_grad of ``fun`` at bound ``values`` in a check_vma=True shard."""
    from astjax import runtime as rt
    from astjax.binding import fun_name, normalize_argnums
    ctx = active()
    fname = fun_name(fun)
    single, nums = normalize_argnums(argnums, len(values), fname)
    out, aux, pull = reverse(ctx, fun, values, nums, has_aux, kind, vjp_code)
    rt.check_scalar_output(out, fname)
    cts = pull(ones_seed(out))
    g = cts[0] if single else tuple(cts)
    if kind == "grad":
        return (g, aux) if has_aux else g
    return ((out, aux) if has_aux else out), g


def pullback(fun, values, nums, has_aux, check_cotangent, vjp_code):
    """vjp of ``fun`` at bound ``values`` in a check_vma=True shard: (out, vjp_fn[, aux])."""
    ctx = active()
    out, aux, pull = reverse(ctx, fun, values, tuple(nums), has_aux, "vjp", vjp_code)

    def vjp_fn(cotangent):
        check_cotangent(out, cotangent)
        return pull(cotangent)

    def refuse():
        fail("a vjp pullback made inside a shard_map with check_vma=True is transformed "
             "again (jit, vmap, jvp, grad of it): astjax gives JAX's check_vma=True "
             "cotangents only when it is called directly",
             "call it directly, or pass check_vma=False to shard_map")
    vjp_fn._astjax_generated = refuse
    vjp_fn._astjax_typed = True
    if has_aux:
        return out, vjp_fn, aux
    return out, vjp_fn
