"""What compiled kernels are specialized on, and what the fusion plan gives them.

* Keyword arguments key jit's code as positional ones do (structure, dtype, rank):
  ``f(x, s=np.float32(2))`` and ``f(x, s=2.0)`` each get the kernel variant NumPy's
  promotion asks for, in any call order, and an array passed by keyword is known to
  be an array (its slices fuse into the kernel).
* A member that reads nothing of a group yet (``... + amplitude * injection``) joins
  the group when a later member reads it: the wave step is one kernel.
The oracle is NumPy (values and dtypes, bit for bit).
"""
from __future__ import annotations

import os
import re
import tempfile

import numpy as np
import pytest

import astjax
from astjax.kernels import compile as cc

pytestmark = pytest.mark.skipif(not cc.available()[0],
                                reason=f"no C compiler: {cc.available()[1]}")


@pytest.fixture(autouse=True, scope="module")
def _own_cache():
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="astjax_cksp_cache_")
    yield
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old


def scaled(x, s=1.0):
    y = x[1:] - x[:-1]
    return y * s + y


def scaled_kw_only(x, *, s):
    return x * s + x / s


def same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    assert np.array_equal(got, want)


SCALES = [np.float32(2.1), 2.1, np.float64(2.1), 3, np.int64(3), np.float32(0.3),
          np.array(2.5, np.float32), np.array([1.5], np.float64), True]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("fn", [scaled, scaled_kw_only], ids=lambda f: f.__name__)
def test_keyword_argument_dtypes_pick_the_kernel_variant(fn, dtype):
    x = (np.arange(12).reshape(3, 4) * 1.7).astype(dtype)
    j = astjax.jit(fn, backend="c")
    for s in SCALES + SCALES[::-1]:          # every order: nothing sticks from before
        with np.errstate(all="ignore"):
            same(j(x, s=s), fn(x, s=s))


def test_keyword_and_positional_calls_agree():
    x = np.linspace(-1, 1, 10, dtype=np.float32)
    j = astjax.jit(scaled, backend="c")
    for s in (np.float32(2), 2.0, np.float64(2)):
        same(j(x, s=s), scaled(x, s))
        same(j(x, s), scaled(x, s))
        same(j(x=x, s=s), scaled(x, s))


def test_an_array_passed_by_keyword_fuses_its_slices():
    x = np.linspace(-1, 1, 10, dtype=np.float32)
    src = astjax.make_source(astjax.jit(scaled, backend="c"))(x=x, s=np.float32(2))
    host = src.split("def scaled_group")[0]
    assert re.search(r"= scaled_kernel\(x, s\)", host), host
    assert not any("x[1:]" in line for line in host.splitlines()
                   if not line.strip().startswith("#"))
    # and the kernel is shown for the dtypes of this call (float32), not float64
    assert "shown for float64" not in src.split("scaled_kernel_c")[1]


def step(present, past, kappa, injection, amplitude, c):
    lap = np.pad(present[1:] - present[:-1], (0, 1))
    return 2.0 * present - past + c * lap * kappa + amplitude * injection


def unconnected_unused(x, y, a):
    z = x * 2.0 + 1.0
    w = a * y                 # read by nothing of the group: computed, returned apart
    return z - x, w


def test_an_unconnected_member_joins_the_group_that_reads_it():
    r = np.random.default_rng(0)
    args = [r.standard_normal(50).astype(np.float32) for _ in range(4)]
    args += [np.float32(0.7), np.float32(1e-3)]
    j = astjax.jit(step, backend="c")
    same(j(*args), step(*args))
    src = astjax.make_source(j)(*args)
    host = src.split("\n\n\n")[0]
    assert len(re.findall(r"_kernel\(", host)) == 1, host


def test_an_unconnected_member_no_one_reads_stays_correct():
    r = np.random.default_rng(1)
    x, y = r.standard_normal(20), r.standard_normal(20).astype(np.float32)
    j = astjax.jit(unconnected_unused, backend="c")
    for a in (np.float32(3), 3.0, np.float64(3)):
        for got, want in zip(j(x, y, a), unconnected_unused(x, y, a)):
            same(got, want)
