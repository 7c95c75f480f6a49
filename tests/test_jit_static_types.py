"""jit's static arguments key the code by value and type.

``2``, ``2.0``, ``True`` and ``np.int32(2)`` compare equal and hash alike, but NumPy's
results differ with them: ``x // n`` stays integer for an int ``n``, ``np.full(2, n)``
takes ``n``'s dtype.  One cache entry served them all, so the second call returned the
first one's dtype with no error (``jax.jit`` does the same; astjax follows NumPy).
"""
import numpy as np
import pytest

import astjax


def floor_div(x, n):
    return x // n


def filled(x, n):
    return np.full(2, n) + x[:2] * 0


def shaped(x, s):
    return np.zeros(s) + x[0]


VALUES = [2, 2.0, True, np.int32(2), np.float32(2.0), np.uint8(2)]


@pytest.mark.parametrize("f", [floor_div, filled])
def test_equal_static_values_of_other_types_get_their_own_code(f):
    x = np.arange(6)
    for kwargs in ({"static_argnums": 1}, {"static_argnames": "n"}):
        fast = astjax.jit(f, **kwargs)
        for _ in range(2):              # (the second round takes the fast path)
            for n in VALUES:
                got = fast(x, n) if "static_argnums" in kwargs else fast(x, n=n)
                want = f(x, n)
                assert got.dtype == want.dtype, (n, got.dtype, want.dtype)
                np.testing.assert_array_equal(got, want)


def test_tuples_of_static_values():
    fast = astjax.jit(shaped, static_argnums=1)
    np.testing.assert_array_equal(fast(np.ones(2), (2, 3)), shaped(np.ones(2), (2, 3)))
    with pytest.raises(TypeError):      # NumPy refuses a float in a shape; so must jit
        fast(np.ones(2), (2.0, 3))
