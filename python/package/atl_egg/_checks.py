"""Argument checks shared by the package and the ctypes loader
(python/atl_egg.py): binding arguments to inputs, sizes, reals, pairs and
arrays, each refused with a message that names it and what it must be.

NumPy and the standard library only, and no import of the package: the
loader, which needs no build step, reads this file by its path."""

import re

import numpy as np

INT64_LIMIT = 2 ** 63


def describe(value):
    """A value as an error message shows it."""
    if isinstance(value, np.ndarray):
        return "an array of shape %s and dtype %s" % (value.shape, value.dtype)
    return "%s %r" % (type(value).__name__, value)


def bind(names, args, kwargs, noun="argument", expected=None):
    """The arguments by input name, in order; TypeError for a missing,
    unknown or repeated one (a missing one with what ``expected(name)``
    says it must be). ``noun`` is what the messages call an argument."""
    if len(args) > len(names):
        raise TypeError("%d %ss given, the function takes %d (%s)"
                        % (len(args), noun, len(names), ", ".join(names)))
    given = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names:
            raise TypeError("unknown %s %r (the inputs are %s)" % (noun, k, ", ".join(names)))
        if k in given:
            raise TypeError("%s %r given twice" % (noun, k))
        given[k] = v
    missing = [n for n in names if n not in given]
    if missing:
        raise TypeError("missing %s%s %s" % (
            noun, "s" if len(missing) > 1 else "",
            ", ".join("%r" % m + (" (%s)" % expected(m) if expected else "") for m in missing)))
    return [given[n] for n in names]


def exact_size(name, value):
    """``value`` as a size: an exact non-negative integer below 2^63 (no
    bool, no float, nothing reduced modulo 2^64)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError("size %s must be an integer, got %r" % (name, value))
    value = int(value)
    if not 0 <= value < INT64_LIMIT:
        raise ValueError("size %s must be a non-negative integer below 2^63, got %d" % (name, value))
    return value


def real_number(what, value):
    """A real argument, a Python or NumPy real number (or a 0-d array of
    one), as a float."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)):
        raise TypeError("%s must be a real number, got %s" % (what, describe(value)))
    return float(value)


def component(where, value, steps):
    """The component at ``steps`` of a pair argument (``where`` names it):
    a tuple ``(a, b)``, or a longer tuple ``(a, b, c)`` read as
    ``(a, (b, c))``; a list is taken as a tuple."""
    for step in steps:
        if isinstance(value, list):
            value = tuple(value)
        if not isinstance(value, tuple) or len(value) < 2:
            raise TypeError("%s must be a pair (a tuple), got %s" % (where, describe(value)))
        value = value[0] if step == 0 else (value[1] if len(value) == 2 else value[1:])
        where += " component %d" % step
    return value


def array_of_rank(what, value, rank, shape, relation=False):
    """A tensor argument as a C-contiguous float64 array, or a relation's
    dense map as a uint8 one, once it is checked to be an array of
    ``rank`` dimensions of real numbers (booleans or 0/1 for a relation);
    ``shape`` is the declared shape's text, for the messages."""
    if not isinstance(value, np.ndarray):
        if value is None or isinstance(value, (str, bytes, dict, bool, int, float, complex,
                                               np.generic, tuple)):
            raise TypeError("%s must be an array of shape %s, got %s" % (what, shape, describe(value)))
        try:
            value = np.asarray(value)
        except (TypeError, ValueError) as e:
            raise TypeError("%s must be an array of shape %s: %s" % (what, shape, e)) from None
    if value.ndim != rank:
        raise ValueError("%s must be an array of shape %s (%d dimension%s), got %s"
                         % (what, shape, rank, "" if rank == 1 else "s", describe(value)))
    if relation:
        if value.dtype.kind == "b" or (value.dtype.kind in "iu" and np.isin(value, (0, 1)).all()):
            return np.ascontiguousarray(value, dtype=np.uint8)
        raise TypeError("%s must be a boolean (or 0/1) array of shape %s, got %s"
                        % (what, shape, describe(value)))
    if value.dtype.kind not in "iuf":
        raise TypeError("%s must be an array of real numbers (float or integer dtype) of shape %s, "
                        "got %s" % (what, shape, describe(value)))
    return np.ascontiguousarray(value, dtype=np.float64)


_SEXP_TOKEN = re.compile(r"\(|\)|[^\s()]+")


def dim_tree(dim):
    """A manifest dimension (``n``, ``3``, ``(- (+ m n) 1)``, ``(* 2 n)``)
    read: a token (a size's name or an integer's text) or a tuple
    ``(op, operand, ...)``."""
    tokens = _SEXP_TOKEN.findall(dim)

    def parse(k):
        if tokens[k] != "(":
            return tokens[k], k + 1
        op, k = tokens[k + 1], k + 2
        args = []
        while tokens[k] != ")":
            a, k = parse(k)
            args.append(a)
        return (op,) + tuple(args), k + 1

    return parse(0)[0]


def infix(dim):
    """A manifest dimension ``(- (+ m n) 1)`` as ``m + n - 1``."""

    def show(tree):
        if isinstance(tree, str):
            return tree
        op, args = tree[0], [show(a) for a in tree[1:]]
        if op == "*":
            return " * ".join(a if " " not in a else "(%s)" % a for a in args)
        if op == "-" and len(args) == 1:
            return "-" + (args[0] if " " not in args[0] else "(%s)" % args[0])
        # a + b - c: only a right operand of - that is a sum needs parentheses
        text = args[0]
        for a in args[1:]:
            text += " %s %s" % (op, a if op == "+" or " " not in a else "(%s)" % a)
        return text

    return show(dim_tree(dim))


def shape_text(dims):
    """Manifest dimensions as a Python shape, ``(m + n - 1,)``."""
    return "(%s%s)" % (", ".join(infix(d) for d in dims), "," if len(dims) == 1 else "")
