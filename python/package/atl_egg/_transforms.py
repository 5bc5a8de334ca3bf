"""The derivatives of a function, each a compiled :class:`Function` on
NumPy arrays, with the conventions of JAX: ``wrt`` (JAX's ``argnums``)
defaults to the first argument; a name or an index gives one gradient,
a list or tuple of them a flat tuple of gradients. ``threads`` sets the
derivative's :attr:`Function.threads` (default: ``f``'s)."""

from ._function import Function, load


def _function(f):
    """``f`` as a Function: a Function, a traced Python function, a path
    or ATL text."""
    if isinstance(f, Function):
        return f
    if callable(f):
        from ._trace import function

        return function(f)
    return load(f)


def _resolve_wrt(f, wrt):
    """The names to differentiate with respect to, and whether the result
    is a tuple (``wrt`` a list or tuple)."""
    if wrt is None:
        if not f.inputs:
            raise TypeError("%s has no inputs to differentiate with respect to" % f.name)
        wrt = f.inputs[0]
    several = isinstance(wrt, (list, tuple))
    names = []
    for w in (wrt if several else [wrt]):
        if isinstance(w, bool) or not isinstance(w, (int, str)):
            raise TypeError("wrt takes input names or positions, got %r" % (w,))
        if isinstance(w, int):
            if not -len(f.inputs) <= w < len(f.inputs):
                raise ValueError("wrt=%d: %s has %d inputs (%s)"
                                 % (w, f.name, len(f.inputs), ", ".join(f.inputs)))
            w = f.inputs[w]
        elif w not in f.inputs:
            raise ValueError("wrt=%r: %s has no input %r (the inputs are %s)"
                             % (w, f.name, w, ", ".join(f.inputs)))
        if w in names:
            raise ValueError("wrt names %r twice" % w)
        names.append(w)
    if several and not names:
        raise ValueError("wrt is empty")
    return names, several


def _derivative(kind, f, wrt):
    f = _function(f)
    names, several = _resolve_wrt(f, wrt)
    program = f._program.derive(kind, names)
    return f, program, (len(names) if several and len(names) > 1 else 0), several


def _compiled(program, flatten, f, threads):
    """A Function of ``program`` whose threads are ``threads``, else ``f``'s,
    checking its inputs are finite as ``f`` does."""
    return Function(program, flatten, threads=f.threads if threads is None else threads,
                    check_finite=f.check_finite)


def _single_as_tuple(g, several, flatten):
    """A tuple of one gradient when ``wrt`` was a list of one name."""
    if several and flatten == 0:
        return _Tupled(g)
    return g


def grad(f, wrt=None, threads=None):
    """The gradient of ``f`` (a function returning a real) with respect to
    ``wrt``: a Function of ``f``'s inputs returning one array (``wrt`` a
    name or position, default the first input) or a tuple of arrays
    (``wrt`` a list or tuple)."""
    f, program, flatten, several = _derivative("grad", f, wrt)
    return _single_as_tuple(_compiled(program, flatten, f, threads), several, flatten)


def value_and_grad(f, wrt=None, threads=None):
    """``f`` and its gradient in one compiled call: a Function of ``f``'s
    inputs returning ``(value, gradient)``, the gradient as :func:`grad`
    gives it."""
    f, program, flatten, several = _derivative("grad", f, wrt)
    paired = f._program.paired_with(program)
    return _ValueAndGrad(_compiled(paired, 0, f, threads), flatten, several)


def jvp(f, wrt=None, threads=None):
    """The forward derivative: a Function of ``f``'s inputs followed by one
    tangent per ``wrt`` input (named ``d`` + the input's name), returning
    the tangent of ``f``'s result."""
    f, program, _, _ = _derivative("jvp", f, wrt)
    return _compiled(program, 0, f, threads)


def vjp(f, wrt=None, threads=None):
    """The reverse derivative: a Function of ``f``'s inputs followed by the
    cotangent ``ct`` of its result (of the result's type), returning the
    cotangent of each ``wrt`` input as :func:`grad` does."""
    f, program, flatten, several = _derivative("vjp", f, wrt)
    return _single_as_tuple(_compiled(program, flatten, f, threads), several, flatten)


def hvp(f, wrt=None, threads=None):
    """The Hessian-vector product of ``f`` (returning a real): a Function
    of ``f``'s inputs followed by one direction per ``wrt`` input (named
    ``d`` + the input's name), returning the derivative of the gradient
    along the directions, as :func:`grad` returns gradients."""
    f, program, flatten, several = _derivative("hvp", f, wrt)
    return _single_as_tuple(_compiled(program, flatten, f, threads), several, flatten)


class _Wrapped(Function):
    """A Function whose result is rearranged after the call."""

    def __init__(self, inner):  # noqa: D107 (shares the inner program)
        self.__dict__.update(inner.__dict__)

    def _rearrange(self, value):
        raise NotImplementedError

    def __call__(self, *args, **kwargs):
        return self._rearrange(Function.__call__(self, *args, **kwargs))


class _Tupled(_Wrapped):
    """The gradient of one input in a tuple of one (``wrt=["x"]``)."""

    def _rearrange(self, value):
        return (value,)


class _ValueAndGrad(_Wrapped):
    """``(value, gradients)`` from the pair program ``(pair f grad)``."""

    def __init__(self, inner, flatten, several):
        super().__init__(inner)
        self._grads_flatten = flatten
        self._several = several

    def _rearrange(self, value):
        from ._function import _unflatten

        v, g = value
        g = _unflatten(g, self._grads_flatten)
        if self._several and self._grads_flatten == 0:
            g = (g,)
        return v, g
