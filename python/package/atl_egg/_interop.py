"""An atl-egg function inside PyTorch or JAX: the function's compiled code
forward, its compiled vector-Jacobian product backward.

Both take a function of tensors and reals (and relations, which get no
gradient) returning a real or a tensor; PyTorch and JAX are imported only
when these are called, and neither is a dependency of the package."""

import numpy as np


def _prepare(f):
    """``f`` as a Function, its compiled vjp (with respect to every real
    input) and which inputs are relations."""
    from ._transforms import _function, vjp

    f = _function(f)
    real = [n for n in f.inputs if f._kinds[n] == "real"]
    if not real:
        raise TypeError("%s has no real-valued input to differentiate" % f.name)
    back = vjp(f, wrt=real)
    return f, back, [f._kinds[n] == "real" for n in f.inputs]


def to_torch(f):
    """A function of PyTorch tensors computing ``f`` (forward: ``f``'s
    compiled code; backward: its compiled vjp), through a
    ``torch.autograd.Function``: ``loss = to_torch(f)(X, w, y)`` then
    ``loss.backward()``. Inputs are moved to the CPU as float64; the
    result is a float64 tensor on the first input's device."""
    import torch

    f, back, is_real = _prepare(f)

    def to_numpy(t):
        if torch.is_tensor(t):
            t = t.detach().cpu()
            return t.numpy() if t.dtype == torch.bool else t.to(torch.float64).numpy()
        return t

    class AtlFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            arrays = [to_numpy(a) for a in args]
            ctx.arrays = arrays
            device = next((a.device for a in args if torch.is_tensor(a)), None)
            ctx.device = device
            return torch.as_tensor(np.asarray(f(*arrays), dtype=np.float64), device=device)

        @staticmethod
        def backward(ctx, grad_output):
            ct = grad_output.detach().cpu().to(torch.float64).numpy()
            grads = iter(back(*ctx.arrays, ct if ct.ndim else float(ct)))
            return tuple(
                torch.as_tensor(np.asarray(next(grads), dtype=np.float64), device=ctx.device)
                if real else None
                for real in is_real)

    def apply(*args):
        return AtlFunction.apply(*args)

    apply.__name__ = f.name
    apply.__doc__ = "%s as a PyTorch function (atl-egg's compiled code and vjp)" % f.name
    return apply


def to_jax(f):
    """A JAX function computing ``f`` on the CPU through
    ``jax.pure_callback``, with a ``jax.custom_vjp`` whose backward pass
    is ``f``'s compiled vjp: usable under ``jax.jit`` and ``jax.grad``.
    Computation is float64; the result has JAX's default float dtype
    (float64 with ``jax_enable_x64``)."""
    import jax
    import jax.numpy as jnp

    f, back, is_real = _prepare(f)
    dtype = jnp.result_type(float)

    def result_struct(args):
        shapes = f._result_shapes_from([np.shape(a) for a in args])
        if len(shapes) != 1:
            raise TypeError("to_jax takes a function returning a real or a tensor")
        return jax.ShapeDtypeStruct(shapes[0], dtype)

    def host_f(*args):
        return np.asarray(f(*[np.asarray(a) for a in args]), dtype=dtype)

    def host_vjp(*args):
        *xs, ct = [np.asarray(a) for a in args]
        grads = back(*xs, ct if ct.ndim else float(ct))
        return tuple(np.asarray(g, dtype=dtype) for g in grads)

    @jax.custom_vjp
    def call(*args):
        return jax.pure_callback(host_f, result_struct(args), *args)

    def fwd(*args):
        return call(*args), args

    def bwd(args, ct):
        structs = tuple(jax.ShapeDtypeStruct(np.shape(a), dtype)
                        for a, real in zip(args, is_real) if real)
        grads = iter(jax.pure_callback(host_vjp, structs, *args, ct))
        return tuple(next(grads) if real else None for real in is_real)

    call.defvjp(fwd, bwd)
    call.__name__ = f.name
    return call
