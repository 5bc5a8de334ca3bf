"""ATL functions written in Python, by tracing.

A function decorated with :func:`function` is called once, at decoration,
on symbolic values: its parameters are symbolic inputs of the types their
annotations give, ``gen``/``sum``/``exists``/``let`` call the lambdas they
are given on fresh symbolic index variables (or bound values), and every
operation on these objects records the ATL expression it stands for,
with the line of the user's code that made it. The result is an ATL
program (``atl_source()``), checked by the compiler; an error, found by the
tracer or by the compiler's type checker, names the user's file and line.

Tracing (rather than reading the function's syntax tree) is chosen
because the function stays ordinary Python: helpers, loops that build
terms, closures and comprehensions all work, and only the operations on
symbolic values reach ATL; its one limit, that Python control flow
cannot depend on a symbolic value (``if x[i] > 0``), is reported at the
line that tries it, and ``where`` is the ATL way to branch.

Values used twice are computed once: a sub-expression that the function
uses in several places (a Python variable read twice) is ``let``-bound,
as close to its uses as its index variables allow.
"""

import builtins
import inspect
import itertools
import os
import re

from . import _native
from ._function import Function

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class TraceError(TypeError):
    """A Python function that cannot be turned into ATL: the message starts
    with the user's ``file:line``; ``filename`` and ``lineno`` say where."""

    def __init__(self, message, loc=None):
        self.filename, self.lineno = loc if loc else (None, None)
        prefix = "%s:%d: " % loc if loc else ""
        super().__init__(prefix + message)


def _user_location():
    """The file and line of the innermost frame outside this package."""
    frame = inspect.currentframe()
    try:
        while frame is not None:
            path = os.path.abspath(frame.f_code.co_filename)
            if os.path.dirname(path) != _PACKAGE_DIR:
                return (frame.f_code.co_filename, frame.f_lineno)
            frame = frame.f_back
        return None
    finally:
        del frame


# ---------------------------------------------------------------------------
# Affine index expressions: sizes, index variables, integers.


class Affine:
    """``constant + Σ coeff·name`` over sizes and index variables: a
    dimension or an index. ``+``, ``-`` and ``*`` by an integer stay
    affine; comparisons (``<``, ``<=``, ``==``, ``!=``, ``>``, ``>=``) make
    conditions for :func:`where`."""

    __slots__ = ("constant", "terms")

    def __init__(self, constant=0, terms=()):
        self.constant = constant
        self.terms = tuple(sorted((n, k) for n, k in terms if k != 0))

    def _combine(self, other, sign):
        other = _affine(other, "an index or size operand")
        terms = dict(self.terms)
        for n, k in other.terms:
            terms[n] = terms.get(n, 0) + sign * k
        return Affine(self.constant + sign * other.constant, terms.items())

    def __add__(self, other):
        return self._combine(other, 1)

    def __radd__(self, other):
        return self._combine(other, 1)

    def __sub__(self, other):
        return self._combine(other, -1)

    def __rsub__(self, other):
        return _affine(other, "an index or size operand")._combine(self, -1)

    def __neg__(self):
        return self * -1

    def __mul__(self, k):
        if isinstance(k, bool) or not isinstance(k, int):
            raise TraceError("an index or size may only be multiplied by an integer constant, "
                             "not %r" % (k,), _user_location())
        return Affine(self.constant * k, ((n, c * k) for n, c in self.terms))

    __rmul__ = __mul__

    def _cmp(self, op, other):
        return Cond(op, (self, _affine(other, "a comparison operand")), _user_location())

    def __lt__(self, other):
        return self._cmp("<", other)

    def __le__(self, other):
        return self._cmp("<=", other)

    def __gt__(self, other):
        return self._cmp(">", other)

    def __ge__(self, other):
        return self._cmp(">=", other)

    def __eq__(self, other):
        return self._cmp("==", other)

    def __ne__(self, other):
        return ~self._cmp("==", other)

    __hash__ = object.__hash__

    def __bool__(self):
        raise TraceError("a symbolic index or size has no truth value: Python control flow "
                         "cannot depend on it; use where(condition, value)", _user_location())

    def names(self):
        return [n for n, _ in self.terms]

    def atl(self):
        """The ATL text: ``n``, ``3``, ``(+ i 1)``, ``(- (+ m n) 1)``."""
        plus = [n if k == 1 else "(* %d %s)" % (k, n) for n, k in self.terms if k > 0]
        minus = [n if k == -1 else "(* %d %s)" % (-k, n) for n, k in self.terms if k < 0]
        if self.constant > 0 or not (plus or minus):
            plus.append(str(self.constant))
        elif self.constant < 0:
            minus.append(str(-self.constant))
        if not plus:
            plus = ["0"]
        text = plus[0] if len(plus) == 1 else "(+ %s)" % " ".join(plus)
        for m in minus:
            text = "(- %s %s)" % (text, m)
        return text

    def __repr__(self):
        return self.atl()


class Size(Affine):
    """A size: a non-negative integer known when the function is called
    (from the inputs' shapes, or ``sizes=``)."""

    __slots__ = ()

    def __init__(self, name):
        if not _is_name(name):
            raise TraceError("%r is not a valid size name" % (name,), _user_location())
        super().__init__(0, [(name, 1)])

    @property
    def name(self):
        return self.terms[0][0]

    __hash__ = object.__hash__


def sizes(names):
    """Sizes by name: ``n, m = sizes("n m")`` (one Size for one name)."""
    out = [Size(n) for n in names.replace(",", " ").split()]
    return out[0] if len(out) == 1 else tuple(out)


class Index(Affine):
    """An index variable bound by :func:`gen`, :func:`sum` or
    :func:`exists`, ranging over ``0 .. extent - 1``."""

    __slots__ = ()
    __hash__ = object.__hash__


def _affine(value, what):
    if isinstance(value, Affine):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return Affine(value)
    raise TraceError("%s must be an index, a size or an integer, not %s"
                     % (what, _kind_of(value)), _user_location())


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _is_name(name):
    return isinstance(name, str) and bool(_NAME.match(name)) and name not in _RESERVED


# The black boxes, from the compiler's table: (name, the name of its constant
# parameter or None, documentation line).
_BOXES = tuple(_native.black_boxes())

_RESERVED = {
    "fn", "size", "tensor", "relation", "pair", "fst", "snd", "gen", "sum", "get", "iverson",
    "let", "and", "or", "exists", "true", "false", "tuple", "proj", "vec", "R",
} | {name for name, _, _ in _BOXES}


# ---------------------------------------------------------------------------
# Types.


class _Type:
    """An ATL type: ``R``, ``R[n]``, ``R[m, n]``, ``Pair[A, B]``."""

    def atl(self):
        raise NotImplementedError


class _Real(_Type):
    def __getitem__(self, dims):
        dims = dims if isinstance(dims, tuple) else (dims,)
        t = self
        for d in reversed(dims):
            t = _Tensor(_affine(d, "a dimension"), t)
        return t

    def atl(self):
        return "R"

    def __repr__(self):
        return "R"

    def same(self, other):
        return isinstance(other, _Real)


class _Tensor(_Type):
    def __init__(self, dim, elem):
        self.dim, self.elem = dim, elem

    def atl(self):
        return "(tensor %s %s)" % (self.dim.atl(), self.elem.atl())

    def __repr__(self):
        return "[%s]%r" % (self.dim.atl(), self.elem)

    def same(self, other):
        return (isinstance(other, _Tensor) and self.dim.terms == other.dim.terms
                and self.dim.constant == other.dim.constant and self.elem.same(other.elem))

    def reals_only(self):
        t = self
        while isinstance(t, _Tensor):
            t = t.elem
        return isinstance(t, _Real)


class _Pair(_Type):
    def __init__(self, a, b):
        self.a, self.b = a, b

    def atl(self):
        return "(pair %s %s)" % (self.a.atl(), self.b.atl())

    def __repr__(self):
        return "(%r × %r)" % (self.a, self.b)

    def same(self, other):
        return isinstance(other, _Pair) and self.a.same(other.a) and self.b.same(other.b)


class _PairMaker:
    def __getitem__(self, types):
        if not isinstance(types, tuple) or len(types) < 2:
            raise TraceError("Pair[...] takes two types or more", _user_location())
        types = [_as_type(t) for t in types]
        t = types[-1]
        for a in reversed(types[:-1]):
            t = _Pair(a, t)
        return t


class _Relation:
    """The type of a relation input: ``Relation[n, n]``."""

    def __init__(self, dims):
        self.dims = dims

    def atl(self):
        return "(relation %s)" % " ".join(d.atl() for d in self.dims)


class _RelationMaker:
    def __getitem__(self, dims):
        dims = dims if isinstance(dims, tuple) else (dims,)
        return _Relation([_affine(d, "a dimension") for d in dims])


#: The reals; ``R[n]`` is a tensor of n reals, ``R[m, n]`` an m × n matrix.
R = _Real()
#: ``Pair[A, B]``: a pair type (``Pair[A, B, C]`` is ``Pair[A, Pair[B, C]]``).
Pair = _PairMaker()
#: ``Relation[n, n]``: a boolean relation input (a data-dependent sparsity).
Relation = _RelationMaker()


def _as_type(t):
    if isinstance(t, (_Type, _Relation)):
        return t
    if t is float:
        return R
    raise TraceError("%r is not an ATL type (R, R[n], Pair[A, B], Relation[n])" % (t,),
                     _user_location())


# ---------------------------------------------------------------------------
# Expressions.


_ids = itertools.count()


class Expr:
    """A symbolic ATL value of type ``type``. Arithmetic (``+ - * /``, unary
    ``-``, ``** k``) follows ATL, pointwise on tensors of the same shape
    (and a tensor times a real); ``x[i]``, ``x[i, j]`` read elements;
    ``p[0]``, ``p[1]`` (or ``.fst``, ``.snd``) the components of a pair."""

    __slots__ = ("op", "args", "type", "loc", "id")
    __array_ufunc__ = None  # NumPy numbers defer to Expr's reflected operators

    def __init__(self, op, args, type_, loc):
        self.op, self.args, self.type, self.loc = op, args, type_, loc
        self.id = next(_ids)

    __hash__ = object.__hash__

    def __bool__(self):
        raise TraceError("a symbolic value has no truth value: Python control flow cannot "
                         "depend on it; use where(condition, value)", _user_location())

    def _binary(self, op, other, reverse=False):
        loc = _user_location()
        other = _expr(other, loc)
        a, b = (other, self) if reverse else (self, other)
        return _arith(op, a, b, loc)

    def __add__(self, other):
        return self._binary("+", other)

    def __radd__(self, other):
        return self._binary("+", other, True)

    def __sub__(self, other):
        return self._binary("-", other)

    def __rsub__(self, other):
        return self._binary("-", other, True)

    def __mul__(self, other):
        return self._binary("*", other)

    def __rmul__(self, other):
        return self._binary("*", other, True)

    def __truediv__(self, other):
        return self._binary("/", other)

    def __rtruediv__(self, other):
        return self._binary("/", other, True)

    def __neg__(self):
        return self._binary("*", -1.0, True)

    def __pos__(self):
        return self

    def __pow__(self, k):
        return pow_(self, k)

    def __getitem__(self, key):
        loc = _user_location()
        if isinstance(self.type, _Pair):
            return _project(self, key, loc)
        keys = key if isinstance(key, tuple) else (key,)
        e = self
        for k in keys:
            if isinstance(k, slice):
                raise TraceError("slices are not ATL; read elements with indices "
                                 "(gen(n, lambda i: x[i + 1]))", loc)
            if not isinstance(e.type, _Tensor):
                raise TraceError("cannot index %s: too many indices for a value of type %r"
                                 % (_describe(self), self.type), loc)
            e = _element(e, _affine(k, "an index"), loc)
        return e

    @property
    def fst(self):
        return _project(self, 0, _user_location())

    @property
    def snd(self):
        loc = _user_location()
        if not isinstance(self.type, _Pair):
            raise TraceError("snd of %s, which is not a pair" % _describe(self), loc)
        return Expr("snd", (self,), self.type.b, loc)

    @property
    def shape(self):
        """The dimensions of a tensor, outer first (sizes and integers)."""
        dims, t = [], self.type
        while isinstance(t, _Tensor):
            dims.append(t.dim)
            t = t.elem
        return tuple(dims)

    def __iter__(self):
        raise TraceError("a symbolic value cannot be iterated in Python; use gen or sum",
                         _user_location())

    def __repr__(self):
        return "<atl_egg traced %s : %r>" % (self.op, self.type)


class _Var(Expr):
    """A variable: an input or a let-bound value (``name`` is its ATL name)."""

    __slots__ = ("name",)

    def __init__(self, name, type_, loc):
        super().__init__("var", (), type_, loc)
        self.name = name


def _describe(e):
    if isinstance(e, _Var):
        return "%s (of type %r)" % (e.name, e.type)
    return "a value of type %r" % (e.type,)


def _kind_of(value):
    if isinstance(value, Expr):
        return "a value of type %r" % (value.type,)
    return "%s %r" % (type(value).__name__, value)


def _expr(value, loc):
    """``value`` as an Expr: an Expr, or a finite Python/NumPy number."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, Cond):
        raise TraceError("a condition is not a value; use where(condition, value)", loc)
    if isinstance(value, Affine):
        raise TraceError("an index or size is not a real value in ATL (indices are only "
                         "used to read tensors and in conditions)", loc)
    if isinstance(value, tuple):
        return tuple_(*value)
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise TraceError("%s is not an ATL value" % _kind_of(value), loc) from None
    if isinstance(value, bool) or x != x or x in (float("inf"), float("-inf")):
        raise TraceError("%r is not a finite real constant" % (value,), loc)
    return Expr("const", (x,), R, loc)


def _arith(op, a, b, loc):
    ta, tb = a.type, b.type
    if op == "+" or op == "-":
        ok = ta.same(tb) and (isinstance(ta, _Real) or (isinstance(ta, _Tensor) and ta.reals_only()))
        t = ta
    else:  # * and /
        ok = (isinstance(ta, (_Real, _Tensor)) and isinstance(tb, (_Real, _Tensor))
              and all(isinstance(t, _Real) or t.reals_only() for t in (ta, tb))
              and (isinstance(ta, _Real) or isinstance(tb, _Real) or ta.same(tb)))
        if op == "/" and isinstance(tb, _Tensor) and not isinstance(ta, _Tensor):
            ok = False
        t = ta if isinstance(ta, _Tensor) else tb
    if not ok:
        raise TraceError("cannot apply %s to %r and %r" % (op, ta, tb), loc)
    if op == "/" and b.op == "const" and b.args[0] != 0:
        # ATL's (/ a b) is (* a (recip b)): with a constant b, fold the recip
        op, b = "*", Expr("const", (1.0 / b.args[0],), R, loc)
    return Expr(op, (a, b), t, loc)


def _element(e, index, loc):
    """``e[index]``; an element of a pointwise operation is the operation
    on the operands' elements (no tensor is built to read one element)."""
    if e.op in ("+", "-", "*", "/"):
        a, b = (_element(x, index, loc) if isinstance(x.type, _Tensor) else x for x in e.args)
        return _arith(e.op, a, b, loc)
    if e.op == "box":
        return Expr("box", (e.args[0], _element(e.args[1], index, loc)) + e.args[2:],
                    e.type.elem, loc)
    return Expr("get", (e, index), e.type.elem, loc)


def _project(e, k, loc):
    if not isinstance(e.type, _Pair):
        raise TraceError("%s is not a pair: index it with indices, not [%r]"
                         % (_describe(e), k), loc)
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise TraceError("a pair's component is read with [0], [1], ... (a tuple's), not [%r]"
                         % (k,), loc)
    for _ in range(k):
        if not isinstance(e.type, _Pair):
            raise TraceError("the tuple has no component %d" % k, loc)
        e = Expr("snd", (e,), e.type.b, loc)
    if isinstance(e.type, _Pair):
        e = Expr("fst", (e,), e.type.a, loc)
    return e


# ---------------------------------------------------------------------------
# Conditions.


class Cond:
    """A condition on indices: comparisons, relations ``E[i, j]``,
    ``exists``; combined with ``&`` (and), ``|`` (or) and ``~`` (not, for
    comparisons and their combinations)."""

    __slots__ = ("op", "args", "loc")

    def __init__(self, op, args, loc):
        self.op, self.args, self.loc = op, args, loc

    def __and__(self, other):
        return Cond("and", (self, _cond(other)), _user_location())

    def __or__(self, other):
        return Cond("or", (self, _cond(other)), _user_location())

    __rand__ = __and__
    __ror__ = __or__

    def __invert__(self):
        loc = _user_location()
        flip = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}
        if self.op in flip:
            return Cond(flip[self.op], self.args, loc)
        if self.op == "==":
            a, b = self.args
            return Cond("or", (Cond("<", (a, b), loc), Cond(">", (a, b), loc)), loc)
        if self.op in ("and", "or"):
            return Cond("or" if self.op == "and" else "and", tuple(~c for c in self.args), loc)
        if self.op in ("true", "false"):
            return Cond("false" if self.op == "true" else "true", (), loc)
        raise TraceError("ATL cannot negate a relation or exists (only comparisons)", loc)

    def __bool__(self):
        raise TraceError("a symbolic condition has no truth value in Python; "
                         "use where(condition, value)", _user_location())


def _cond(value):
    if isinstance(value, Cond):
        return value
    if isinstance(value, bool):
        return Cond("true" if value else "false", (), _user_location())
    raise TraceError("%s is not a condition" % _kind_of(value), _user_location())


class _RelationVar:
    """A relation input: ``E[i, j]`` is the condition that it holds."""

    def __init__(self, name, type_):
        self.name, self.type = name, type_

    def __getitem__(self, key):
        loc = _user_location()
        keys = key if isinstance(key, tuple) else (key,)
        if len(keys) != len(self.type.dims):
            raise TraceError("relation %s has %d dimensions, tested with %d indices"
                             % (self.name, len(self.type.dims), len(keys)), loc)
        return Cond("rel", (self.name,) + tuple(_affine(k, "an index") for k in keys), loc)


# ---------------------------------------------------------------------------
# The forms.


class _Scope:
    """Names in use while tracing one function, for fresh binder names."""

    current = None

    def __init__(self, taken):
        self.taken = set(taken)

    def fresh(self, hint):
        base = hint if _is_name(hint) else "t"
        name, k = base, 0
        while name in self.taken:
            k += 1
            name = "%s%d" % (base, k)
        self.taken.add(name)
        return name


def _fresh(hint):
    if _Scope.current is None:
        raise TraceError("gen, sum, exists and let are used inside a function being traced "
                         "(decorated with @atl_egg.function)", _user_location())
    return _Scope.current.fresh(hint)


def _binder_names(body, count):
    try:
        names = list(inspect.signature(body).parameters)
    except (TypeError, ValueError):
        names = []
    if len(names) != count:
        raise TraceError("the body must be a function of %d argument%s (lambda %s: ...)"
                         % (count, "" if count == 1 else "s",
                            ", ".join("ijklmn"[:count])), _user_location())
    return names


def _extents(extent):
    extents = extent if isinstance(extent, (tuple, list)) else (extent,)
    return [_affine(e, "an extent") for e in extents]


def _binding_form(extent, body):
    """The extents, fresh index variables for them, and the body called on
    those (a binding form over each extent in turn, nested)."""
    extents = _extents(extent)
    names = _binder_names(body, len(extents))
    indices = [Index(0, [(_fresh(n), 1)]) for n in names]
    return extents, indices, body(*indices)


def gen(extent, body):
    """The tensor ``[body(0), ..., body(extent - 1)]``: ``gen(n, lambda i:
    ...)``; ``gen((m, n), lambda i, j: ...)`` for an m × n tensor."""
    loc = _user_location()
    extents, indices, value = _binding_form(extent, body)
    e = _expr(value, loc)
    for d, i in reversed(list(zip(extents, indices))):
        e = Expr("gen", (i, d, e), _Tensor(d, e.type), loc)
    return e


def sum(extent, body):  # noqa: A001 (ATL's name)
    """The sum of ``body(i)`` over ``i`` in ``0 .. extent - 1``;
    ``sum((m, n), lambda i, j: ...)`` sums over both."""
    loc = _user_location()
    extents, indices, value = _binding_form(extent, body)
    e = _expr(value, loc)
    if not (isinstance(e.type, _Real) or (isinstance(e.type, _Tensor) and e.type.reals_only())):
        raise TraceError("sum adds reals or tensors of reals, not %r" % (e.type,), loc)
    for d, i in reversed(list(zip(extents, indices))):
        e = Expr("sum", (i, d, e), e.type, loc)
    return e


def exists(extent, body):
    """The condition that ``body(i)`` holds for some ``i`` in
    ``0 .. extent - 1``."""
    loc = _user_location()
    extents, indices, value = _binding_form(extent, body)
    c = _cond(value)
    for d, i in reversed(list(zip(extents, indices))):
        c = Cond("exists", (i, d, c), loc)
    return c


def where(cond, then, otherwise=None):
    """``then`` where ``cond`` holds and zero elsewhere (the paper's
    bracket ``[cond]·then``); with ``otherwise``, that value where it does
    not (``cond`` must then be negatable: comparisons and their
    combinations)."""
    loc = _user_location()
    cond = _cond(cond)
    e = _expr(then, loc)
    bracket = Expr("iverson", (cond, e), e.type, loc)
    if otherwise is None:
        return bracket
    o = _expr(otherwise, loc)
    return _arith("+", bracket, Expr("iverson", (~cond, o), o.type, loc), loc)


def let(value, body):
    """``body(t)`` with ``t`` bound to ``value`` (computed once):
    ``let(x[i] - y[i], lambda d: d * d)``."""
    loc = _user_location()
    (name,) = _binder_names(body, 1)
    v = _expr(value, loc)
    var = _Var(_fresh(name), v.type, loc)
    e = _expr(body(var), loc)
    return Expr("let", (var, v, e), e.type, loc)


def pair(a, b):
    """The pair ``(a, b)``."""
    loc = _user_location()
    a, b = _expr(a, loc), _expr(b, loc)
    return Expr("pair", (a, b), _Pair(a.type, b.type), loc)


def tuple_(*values):
    """Right-nested pairs ``(a, (b, c))``; a Python tuple returned by (or
    used in) a traced function means the same."""
    loc = _user_location()
    if not values:
        raise TraceError("an empty tuple is not an ATL value", loc)
    es = [_expr(v, loc) for v in values]
    e = es[-1]
    for a in reversed(es[:-1]):
        e = Expr("pair", (a, e), _Pair(a.type, e.type), loc)
    return e


def _black_box(name, doc):
    def apply(x):
        loc = _user_location()
        e = _expr(x, loc)
        if not (isinstance(e.type, _Real) or (isinstance(e.type, _Tensor) and e.type.reals_only())):
            raise TraceError("%s applies to reals (or pointwise to tensors of reals), not %r"
                             % (name, e.type), loc)
        return Expr("box", (name, e), e.type, loc)

    apply.__name__ = name
    apply.__doc__ = "%s (pointwise on a tensor of reals)." % doc
    return apply


def _with_parameter(name, param, doc):
    def apply(x, k):
        loc = _user_location()
        e = _expr(x, loc)
        if isinstance(k, bool) or not isinstance(k, (int, float)) or k != k:
            raise TraceError("%s takes a constant %s, not %r" % (name, param, k), loc)
        if not (isinstance(e.type, _Real) or (isinstance(e.type, _Tensor) and e.type.reals_only())):
            raise TraceError("%s applies to reals, not %r" % (name, e.type), loc)
        return Expr("box", (name, e, float(k)), e.type, loc)

    apply.__name__ = name
    apply.__doc__ = "%s (pointwise on a tensor of reals); %s a constant." % (doc, param)
    return apply


def _python_name(name):
    """A box's name in Python: with a trailing ``_`` where it is a builtin's
    (``pow_``; the package exports it as ``ae.pow``)."""
    return name + "_" if hasattr(builtins, name) else name


# One function per black box of the table: ``exp(x)``, ``pow_(x, k)``, ...
BLACK_BOXES = {}
for _name, _param, _doc in _BOXES:
    BLACK_BOXES[_name] = (_with_parameter(_name, _param, _doc) if _param
                          else _black_box(_name, _doc))
    globals()[_python_name(_name)] = BLACK_BOXES[_name]
del _name, _param, _doc


# ---------------------------------------------------------------------------
# Printing, with automatic lets for shared sub-expressions.


def _children(e):
    if e.op == "let":
        return [e.args[1], e.args[2]]
    if e.op in ("gen", "sum"):
        return [e.args[2]]
    return [a for a in e.args if isinstance(a, Expr)]


def _walk(root):
    """Every node of the expression graph once."""
    seen, stack = {root.id}, [root]
    while stack:
        e = stack.pop()
        yield e
        for c in _children(e):
            if c.id not in seen:
                seen.add(c.id)
                stack.append(c)


def _trivial(e):
    """A variable, a constant or an element read of a variable: free to
    repeat, never worth a let."""
    while e.op == "get":
        e = e.args[0]
    return e.op in ("var", "const")


def _parents(root):
    """Each node's parents in the expression graph (with multiplicity)."""
    parents, seen, stack = {root.id: []}, {root.id}, [root]
    while stack:
        e = stack.pop()
        for c in _children(e):
            parents.setdefault(c.id, []).append(e)
            if c.id not in seen:
                seen.add(c.id)
                stack.append(c)
    return parents


class _Printer:
    """ATL text of a traced body, remembering which Python line made each
    span of it. A sub-expression reached more than once (a Python value
    used twice) is let-bound once, around the innermost expression that
    contains all its uses (so it stays inside brackets and binders that
    contain them)."""

    def __init__(self, root, scope):
        self.parts, self.spans, self.offset = [], [], 0
        self.scope = scope
        self.bound = {}  # shared node id -> its let name
        self.hosted = self._plan(root)  # host node id -> shared nodes let-bound around it

    @staticmethod
    def _plan(root):
        parents = _parents(root)
        nodes = {}
        for e in _walk(root):
            nodes[e.id] = e
        shared = [nodes[k] for k, ps in parents.items()
                  if len(ps) > 1 and not _trivial(nodes[k])]
        host = {}

        def up(e):
            """The expression printed around ``e``."""
            if e.id in host:
                return host[e.id]
            ps = parents[e.id]
            return ps[0] if ps else None

        def chain(e):
            out = []
            while e is not None:
                out.append(e)
                e = up(e)
            return out

        # parents were made after their children: a larger id first, so
        # every shared parent already has its place
        for s in sorted(shared, key=lambda e: -e.id):
            common = chain(parents[s.id][0])
            for p in parents[s.id][1:]:
                ids = {e.id for e in chain(p)}
                common = [e for e in common if e.id in ids]
            host[s.id] = common[0]
        hosted = {}
        for s in sorted(shared, key=lambda e: e.id):
            hosted.setdefault(host[s.id].id, []).append(s)
        return hosted

    def emit(self, text):
        self.parts.append(text)
        self.offset += len(text)

    def text(self):
        return "".join(self.parts)

    def expr(self, e, force=False):
        if not force and e.id in self.bound:
            self.emit(self.bound[e.id])
            return
        lets = self.hosted.get(e.id, [])
        for shared in lets:
            name = self.scope.fresh("t")
            self.emit("(let %s " % name)
            self.expr(shared, force=True)
            self.emit(" ")
            self.bound[shared.id] = name
        self._form(e)
        self.emit(")" * len(lets))

    def _form(self, e):
        start = self.offset
        op, a = e.op, e.args
        if isinstance(e, _Var):
            self.emit(e.name)
        elif op == "const":
            self.emit(_number(a[0]))
        elif op in ("+", "-", "*", "/", "pair", "fst", "snd"):
            self._call(op, a)
        elif op == "box":
            self.emit("(%s " % a[0])
            self.expr(a[1])
            self.emit(" %s)" % _number(a[2]) if len(a) == 3 else ")")
        elif op == "get":
            self.emit("(get ")
            self.expr(a[0])
            self.emit(" %s)" % a[1].atl())
        elif op in ("gen", "sum"):
            self.emit("(%s %s %s " % (op, a[0].names()[0], a[1].atl()))
            self.expr(a[2])
            self.emit(")")
        elif op == "let":
            self.emit("(let %s " % a[0].name)
            self.expr(a[1])
            self.emit(" ")
            self.expr(a[2])
            self.emit(")")
        elif op == "iverson":
            self.emit("(iverson %s " % _cond_text(a[0]))
            self.expr(a[1])
            self.emit(")")
        else:  # pragma: no cover (every form is above)
            raise AssertionError(op)
        self.spans.append((start, self.offset, e.loc))

    def _call(self, op, args):
        self.emit("(" + op)
        for x in args:
            self.emit(" ")
            self.expr(x)
        self.emit(")")

    def location_of(self, offset):
        """The Python line of the innermost expression around ``offset``."""
        best = None
        for start, end, loc in self.spans:
            if start <= offset < end and (best is None or end - start < best[1] - best[0]):
                best = (start, end, loc)
        return best[2] if best else None


def _number(x):
    text = repr(float(x))
    return text if "inf" not in text and "nan" not in text else "0"


def _cond_text(c):
    if c.op in ("true", "false"):
        return c.op
    if c.op == "rel":
        return "(%s %s)" % (c.args[0], " ".join(a.atl() for a in c.args[1:]))
    if c.op in ("and", "or"):
        return "(%s %s)" % (c.op, " ".join(_cond_text(a) for a in c.args))
    if c.op == "exists":
        return "(exists %s %s %s)" % (c.args[0].names()[0], c.args[1].atl(), _cond_text(c.args[2]))
    return "(%s %s %s)" % (c.op, c.args[0].atl(), c.args[1].atl())


# ---------------------------------------------------------------------------
# The decorator.


def _param_types(fn, loc):
    """The parameters and their types from the annotations."""
    try:
        hints = dict(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        raise TraceError("%r has no signature to trace" % (fn,), loc) from None
    params = []
    for name, p in hints.items():
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            raise TraceError("parameter %s: only plain parameters are traced (no *args, "
                             "**kwargs or keyword-only)" % name, loc)
        ann = p.annotation
        if ann is p.empty:
            raise TraceError("parameter %s needs a type annotation: R, R[n], R[m, n], "
                             "Pair[A, B] or Relation[n, n]" % name, loc)
        if isinstance(ann, str):
            ann = eval(ann, fn.__globals__)  # noqa: S307 (postponed annotations)
        if isinstance(ann, Size):
            raise TraceError("parameter %s: a size is not passed; it is named in the "
                             "parameters' types (R[n]) and inferred from the inputs' shapes"
                             % name, loc)
        if not _is_name(name):
            raise TraceError("parameter %s: the name is reserved in ATL" % name, loc)
        params.append((name, _as_type(ann)))
    return params


def _size_names(t):
    if isinstance(t, _Relation):
        return [n for d in t.dims for n in d.names()]
    if isinstance(t, _Tensor):
        return t.dim.names() + _size_names(t.elem)
    if isinstance(t, _Pair):
        return _size_names(t.a) + _size_names(t.b)
    return []


def _all_sizes(root):
    """Every size name the body's extents and indices mention."""
    out, seen, stack = [], set(), [root]

    def note(aff):
        for n in aff.names():
            if n not in out:
                out.append(n)

    def cond(c):
        if c.op == "rel":
            for a in c.args[1:]:
                note(a)
        elif c.op in ("and", "or"):
            for a in c.args:
                cond(a)
        elif c.op == "exists":
            note(c.args[1])
            cond(c.args[2])
        elif c.op not in ("true", "false"):
            for a in c.args:
                note(a)

    while stack:
        e = stack.pop()
        if e.id in seen:
            continue
        seen.add(e.id)
        if e.op in ("gen", "sum"):
            note(e.args[1])
        elif e.op == "get":
            note(e.args[1])
        elif e.op == "iverson":
            cond(e.args[0])
        stack.extend(_children(e))
    return out


def trace(fn, name=None):
    """The ATL text of the Python function ``fn`` and a map from its
    offsets to Python lines (a :class:`_Printer`)."""
    loc = (fn.__code__.co_filename, fn.__code__.co_firstlineno) if hasattr(fn, "__code__") else None
    params = _param_types(fn, loc)
    taken = {n for n, _ in params}
    for _, t in params:
        taken.update(_size_names(t))
    scope = _Scope(taken)
    args = []
    for pname, t in params:
        args.append(_RelationVar(pname, t) if isinstance(t, _Relation) else _Var(pname, t, loc))
    saved, _Scope.current = _Scope.current, scope
    try:
        result = fn(*args)
    finally:
        _Scope.current = saved
    root = _expr(result, loc)
    declared = [n for _, t in params for n in _size_names(t)]
    indices = {n for n in scope.taken} - taken
    extra = [n for n in _all_sizes(root) if n not in declared and n not in indices]
    fname = name or getattr(fn, "__name__", "f")
    if not _is_name(fname):
        fname = "f"
    printer = _Printer(root, scope)
    head = "(fn %s (%s) " % (fname, " ".join(
        ["(%s %s)" % (n, t.atl()) for n, t in params] + ["(%s size)" % s for s in dict.fromkeys(extra)]))
    printer.emit(head)
    printer.expr(root)
    printer.emit(")\n")
    return printer


def _offset(text, line, col):
    lines = text.split("\n")
    return builtins.sum(len(x) + 1 for x in lines[:line - 1]) + col - 1


def function(fn=None, *, name=None):
    """Trace the Python function ``fn`` into an ATL function (a compiled
    :class:`Function`); usable as ``@function`` or ``@function(name=...)``.

    The parameters' annotations give their types: ``R`` (a real),
    ``R[n]``, ``R[m, n]`` (tensors over sizes made by :func:`sizes`),
    ``Pair[A, B]``, ``Relation[n, n]``."""
    if fn is None:
        return lambda f: function(f, name=name)
    printer = trace(fn, name)
    text = printer.text()
    try:
        program = _native.Program.parse(text, "<traced %s>" % getattr(fn, "__name__", "f"))
    except _native.AtlError as e:
        loc = None
        if e.line is not None:
            loc = printer.location_of(_offset(text, e.line, e.col))
        raise TraceError("%s\n%s" % (e.message, str(e)), loc) from None
    f = Function(program)
    f.__doc__ = fn.__doc__
    f.__wrapped__ = fn
    return f
