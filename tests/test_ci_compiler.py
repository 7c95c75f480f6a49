"""CI runs the compiled kernels' tests: they skip where no C compiler works (a user's
machine without one), which in CI would silently drop thousands of them."""
from __future__ import annotations

import os

import pytest

from astjax.kernels import compile as cc


@pytest.mark.skipif(not os.environ.get("CI"), reason="outside CI a machine may lack cc")
def test_ci_has_a_working_c_compiler():
    ok, why = cc.available()
    assert ok, f"CI must compile the C kernels (their tests would all skip): {why}"
