"""atl-egg in Python: ATL functions compiled to native code, called on
NumPy arrays, differentiated with a JAX-shaped API.

    import atl_egg as ae
    n, m = ae.sizes("n m")

    @ae.function
    def loss(w: ae.R[n], X: ae.R[m, n], y: ae.R[m]):
        return ae.sum(m, lambda i: ae.log(1 + ae.exp(-y[i] * ae.sum(n, lambda j: X[i, j] * w[j]))))

    value, dw = ae.value_and_grad(loss)(w, X, y)     # wrt w, the first argument

Functions come from Python (:func:`function`, traced on symbolic index
objects), from ATL text or from ``.atl`` files (:func:`load`). Each is a
:class:`Function`: call it on arrays (compiled on the first call, cached
on disk), print it (``atl_source()``), differentiate it (:func:`grad`,
:func:`value_and_grad`, :func:`jvp`, :func:`vjp`, :func:`hvp`), or use it
inside PyTorch or JAX (:func:`to_torch`, :func:`to_jax`). See
docs/python.md in the repository.
"""

import builtins

from ._function import AtlError, Function, PreparedRelation, load
from ._interop import to_jax, to_torch
from ._trace import (
    BLACK_BOXES,
    Pair,
    R,
    Relation,
    TraceError,
    exists,
    function,
    gen,
    let,
    pair,
    sizes,
    sum,  # noqa: A004 (ATL's name)
    tuple_ as tuple,  # noqa: A004 (ATL's name)
    where,
)
from ._transforms import grad, hvp, jvp, value_and_grad, vjp

# `sum`, `pow` and `tuple` are ATL's names but Python's builtins too: they
# are used as `ae.sum`, never brought in by `from atl_egg import *`.
__all__ = [
    "AtlError", "Function", "PreparedRelation", "load", "function", "TraceError",
    "grad", "value_and_grad", "jvp", "vjp", "hvp", "to_torch", "to_jax",
    "R", "Pair", "Relation", "sizes", "gen", "exists", "where", "let", "pair",
] + [name for name in BLACK_BOXES if not hasattr(builtins, name)]

# The black boxes of the compiler's table, by their ATL names (`ae.exp`,
# `ae.pow`, `ae.lgamma`, ...).
globals().update(BLACK_BOXES)
