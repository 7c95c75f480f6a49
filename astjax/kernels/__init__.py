"""Compiled kernels for ``jit``: the kernel IR (``ir``), its C rendering (``c``), the
compiler driver and on-disk cache (``compile``), the host-side call (``runtime``), and
the ``"c"`` backend that puts them together (``backend``)."""
from astjax.kernels.compile import (CompilerUnavailable, KernelCompileError, available,
                                    cache_dir, reset)

__all__ = ["CompilerUnavailable", "KernelCompileError", "available", "cache_dir", "reset"]
