"""astjax: JAX's composable transformations for existing NumPy code, by rewriting source.

    import numpy as np
    from astjax import grad

    def loss(params, batch): ...
    dloss = grad(loss)          # generated Python, printable with make_source
"""
from astjax.errors import (AstjaxError, DifferentiationError, SourceError, TransformError,
                           UnsupportedSyntaxError)
from astjax.api import (clear_cache, grad, make_source, stop_gradient, value_and_grad, vjp)
from astjax.forward_api import hessian, jacfwd, jacobian, jacrev, jvp, linearize
from astjax.batch_api import vmap
from astjax.jit_api import jit
from astjax.shapes import ShapeDtypeStruct, eval_shape
from astjax import lax, tree_util
from astjax import debug, random
from astjax.debug import pure_callback
from astjax import sharding
from astjax.sharding import (device_count, devices, distributed, make_mesh, pmap,
                             shard_map)
from astjax.custom_rules import custom_jvp, custom_vjp
from astjax.checkpointing import checkpoint, checkpoint_policies, remat
from astjax.device import device_get, device_put

__version__ = "0.1.0"

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "linearize", "jacfwd", "jacrev",
           "jacobian", "hessian", "vmap", "jit", "eval_shape", "ShapeDtypeStruct",
           "stop_gradient", "make_source", "clear_cache", "custom_jvp", "custom_vjp",
           "device_put", "device_get",
           "checkpoint", "remat", "checkpoint_policies",
           "tree_util", "lax", "random", "debug", "pure_callback", "AstjaxError",
           "TransformError", "SourceError", "UnsupportedSyntaxError", "DifferentiationError",
           "sharding", "shard_map", "pmap", "make_mesh", "devices", "device_count",
           "distributed"]
