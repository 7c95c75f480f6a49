"""A pytest plugin rehearsing the GPU session on the CPU (no GPU, no CuPy):

    PYTHONPATH=tests python -m pytest -q -p rehearse_gpu tests/test_cuda_gpu.py

``cupy`` is the fake of tests/fakecupy.py (arrays that refuse conversion to NumPy)
and the current CUDA device is the emulated one with an emulated graph capture
(tests/test_cuda_graph.py): the gpu-marked tests' own logic (their arguments,
expectations, entry-point names) runs before a GPU session spends device time on
it.  Transcendental accuracy, real launches and real capture are what only the GPU
run checks.
"""
import sys

import fakecupy
from astjax.kernels import cuda_runtime as cr

sys.modules["cupy"] = fakecupy.FAKE
cr.gpu_visible = lambda: True
_DEVICE: list = []


def _current():
    if not _DEVICE:
        import test_cuda_graph
        _DEVICE.append(test_cuda_graph._device())
    return _DEVICE[0]


cr.current_device = _current
