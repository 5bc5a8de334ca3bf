"""Compiled ATL functions called on NumPy arrays: loading, argument
checking, calls and results."""

import math
import operator
import os

import numpy as np

from . import _native
from ._checks import array_of_rank, bind, component, describe, exact_size, real_number, shape_text
from ._native import AtlError


class Function:
    """An ATL function that runs as compiled native code on NumPy arrays.

    Call it with its inputs by position or by name (``f(x, y)``,
    ``f(x=x, y=y)``; a name that is not a Python identifier as
    ``f(**{"a.b": v})``). Sizes come from the inputs' shapes, or
    ``sizes={"n": 4}`` for a size no input shows. The native code is built
    on the first call (or by :meth:`compile`) and cached on disk.

    Arguments, checked before any native code runs (an error names the
    argument and the expected shape):

    * a tensor: an array of its declared shape whose dtype is a real one
      (floating or integer); computation is float64, and an array of
      another real dtype is converted (a copy), a float64 C-contiguous one
      is used as it is. Booleans, complex numbers and objects are refused.
    * a real: a Python or NumPy real number (or a 0-d array).
    * a pair: a 2-tuple (a tuple ``(a, b, c)`` for a right-nested pair of
      pairs); a tensor of pairs is a pair of tensors (struct of arrays).
    * a relation: a boolean array (or of 0s and 1s) of its shape, its tuples
      as an integer array (nnz, arity) (any order, each once), or a SciPy
      sparse matrix (its stored nonzeros);
    * a tensor stored by a relation's pattern (``(tensor n m R (stored-by
      S))``): its values, one per tuple of S, as a 1-D array in the
      row-major order of the tuples (S's tuples then given sorted), or a
      SciPy sparse matrix whose stored coordinates are exactly S's tuples.
      A stored result is returned as such a 1-D array, or, when its
      relation or a tensor stored by it was given as a SciPy sparse matrix,
      as a SciPy sparse matrix of that one's class and format.
    * every value must be finite: NaN and infinities raise ``ValueError``
      (one read of each input; ``check_finite = False`` skips it, for hot
      loops whose inputs are known finite, as SciPy's ``check_finite``).

    The result is a float for a real, an array for a tensor, a tuple for a
    pair. ``out=`` takes the arrays to write the result's leaves into
    (float64, C-contiguous, of the result's shapes): one array, or a tuple
    of them in the result's order; they are returned.

    ``threads`` is the number of threads the compiled code's parallel loops
    run on (``None``: ``OMP_NUM_THREADS``, else one per core); set it here,
    by ``load(..., threads=)`` or a transform's ``threads=``. A result does
    not depend on it: parallel sums add their parts in a fixed order.
    """

    def __init__(self, program, flatten=0, source=None, threads=None, check_finite=True):
        self._program = program
        self.threads = threads
        self.check_finite = check_finite
        # how many levels of right-nested pairs of the result to flatten
        # into one tuple (a derivative with respect to several inputs)
        self._flatten = flatten
        self._source = source
        self._kernel = None
        self._layout = None
        params = program.params()
        self.name = program.name
        #: The inputs to pass, in order (not the sizes).
        self.inputs = [n for n, kind in params if kind != "size"]
        self._kinds = dict(params)

    @property
    def threads(self):
        """The threads of the parallel loops (``None``: the default)."""
        return self._threads

    @threads.setter
    def threads(self, threads):
        self._threads = _thread_count(threads)

    @property
    def check_finite(self):
        """Whether a call checks that its inputs are finite (default True):
        a NaN or an infinity then raises ``ValueError`` naming the element.
        The check reads each input once more; without it, a non-finite
        input gives whatever IEEE arithmetic gives (the optimizer assumes
        finite reals, so that is not always the unoptimized program's)."""
        return self._check_finite

    @check_finite.setter
    def check_finite(self, check):
        if not isinstance(check, (bool, np.bool_)):
            raise TypeError("check_finite takes True or False, got %s" % describe(check))
        self._check_finite = bool(check)

    def __repr__(self):
        return "<atl_egg.Function %s(%s)>" % (self.name, ", ".join(self.inputs))

    def atl_source(self):
        """The program in ATL syntax (core forms), as ``atl-egg`` prints it."""
        return self._program.text()

    def pretty(self):
        """The program in the paper's notation."""
        return self._program.pretty()

    def signature(self):
        """``(fn NAME (PARAMS) -> TYPE)``."""
        return self._program.signature()

    def optimize(self):
        """The function optimized by equality saturation (a new Function,
        returning its result as this one does)."""
        import copy

        optimized = copy.copy(self)
        optimized._program = self._program.optimize()
        optimized._kernel = optimized._layout = None
        return optimized

    def compile(self):
        """Build the native code now (else on the first call); returns self."""
        if self._kernel is None:
            kernel = self._program.compile()
            self._layout = _Layout(kernel, self.inputs, self._kinds)
            self._kernel = kernel
        return self

    @property
    def manifest(self):
        """The compiled function's manifest (as ``atl-egg compile -o F.json``)."""
        import json

        return json.loads(self.compile()._kernel.manifest)

    def __call__(self, *args, sizes=None, out=None, **kwargs):
        if self._kernel is not None and sizes is None and out is None and not kwargs:
            value = self._layout.plain_call(self._kernel, args, self._check_finite, self._threads)
            if value is not None:
                return _unflatten(value, self._flatten)
        self.compile()
        layout = self._layout
        given = bind(self.inputs, args, kwargs, expected=layout.expected)
        for name, v in zip(self.inputs, given):
            if isinstance(v, PreparedRelation):
                v._check(self, name)
        leaves = layout.leaf_values(given, self._check_finite)
        size_values = layout.sizes_from(leaves, sizes)
        in_shapes, out_shapes = self._kernel.shapes(size_values)
        layout.check_shapes(leaves, in_shapes, size_values)
        outs = layout.output_buffers(out, layout.stored_shapes(leaves, out_shapes))
        # flat views: the buffer protocol wants at least one dimension
        self._kernel.call(size_values, [a._native if isinstance(a, PreparedRelation) else a
                                        for arrays in leaves for a in arrays],
                          [o.reshape(-1) for o in outs], self._threads)
        if out is None:
            outs = layout.sparse_results(outs, given, leaves, in_shapes)
        return _unflatten(layout.assemble(outs), self._flatten)

    def prepare(self, name, relation, sizes=None):
        """The relation input ``name`` prepared once for this function: a
        :class:`PreparedRelation`, accepted in its place by every later
        call of this function at sizes that give the same dimensions. The
        calls then skip checking its tuples and building the layouts the
        compiled code reads (a transposed one where the program reads
        ``(E j i)`` beside ``(E i j)``). ``relation`` is given as in a call;
        ``sizes`` as in a call, for the dimensions the relation does not
        show (tuples show none)."""
        self.compile()
        layout = self._layout
        flat = 0
        for input_name, leaves in layout.inputs:
            if input_name == name:
                break
            flat += len(leaves)
        else:
            raise ValueError("%s has no input %r (its inputs: %s)"
                             % (self.name, name, ", ".join(self.inputs)))
        leaves = dict(layout.inputs)[name]
        if len(leaves) != 1 or leaves[0].kind != "relation":
            raise ValueError("input %r of %s is not a relation" % (name, self.name))
        leaf = leaves[0]
        if isinstance(relation, PreparedRelation):
            raise TypeError("relation %r is prepared already" % name)
        what = _what(name, leaf)
        if _is_tuples(relation, leaf.rank):
            arr = _relation_tuples(what, relation, leaf.rank)
        else:
            arr = _leaf_array(name, leaf, relation, False)
        # the dimensions a dense map or a SciPy matrix shows
        shown = None if isinstance(arr, _Tuples) else arr.shape
        if _is_scipy_sparse(relation):
            shown = tuple(relation.shape)
        given = dict(sizes or {})
        for k in given:
            if k not in layout.size_names:
                raise TypeError("unknown size %r (the sizes are %s)"
                                % (k, ", ".join(layout.size_names) or "none"))
        values = []
        for s in layout.size_names:
            if s in given:
                values.append(exact_size(s, given[s]))
            elif shown is not None and s in leaf.dims:
                values.append(shown[leaf.dims.index(s)])
            elif any(s in d.replace("(", " ").replace(")", " ").split() for d in leaf.dims):
                raise ValueError("size %s cannot be inferred from %s; give it with sizes={%r: ...}"
                                 % (s, what, s))
            else:
                values.append(0)  # not in the relation's dimensions
        native = self._kernel.prepare(values, flat, arr)
        tuples = np.array(_tuples_of(arr), dtype=np.int64, copy=True).view(_Tuples)
        tuples.reordered = getattr(arr, "reordered", False)
        tuples.setflags(write=False)
        like = None
        if _is_scipy_sparse(relation):
            try:  # an empty matrix of its class and format: the results' form
                like = type(relation)((0, 0))
            except (TypeError, ValueError):
                pass
        return PreparedRelation(self, name, native, tuples, like)

    def output_shapes(self, *args, sizes=None, **kwargs):
        """The shapes of the result's leaves for these inputs (in the
        result's order), without running the function."""
        self.compile()
        layout = self._layout
        leaves = layout.leaf_values(bind(self.inputs, args, kwargs, expected=layout.expected),
                                    self._check_finite)
        size_values = layout.sizes_from(leaves, sizes)
        in_shapes, out_shapes = self._kernel.shapes(size_values)
        layout.check_shapes(leaves, in_shapes, size_values)
        return [tuple(s) for s in layout.stored_shapes(leaves, out_shapes)]

    def _result_shapes_from(self, shapes):
        """The result's leaf shapes from the inputs' shapes alone (inputs
        that are tensors or reals, one shape each)."""
        self.compile()
        layout = self._layout
        leaves = []
        for (name, specs), shape in zip(layout.inputs, shapes):
            if len(specs) != 1:
                raise TypeError("argument %r is a pair: only tensors and reals here" % name)
            leaves.append([np.broadcast_to(np.zeros(()), tuple(shape))])
        size_values = layout.sizes_from(leaves, None)
        return [tuple(s) for s in self._kernel.shapes(size_values)[1]]


def _unflatten(value, levels):
    """``(a, (b, c))`` as ``(a, b, c)`` for ``levels`` = 2."""
    if levels == 0:
        return value
    out = []
    for _ in range(levels - 1):
        out.append(value[0])
        value = value[1]
    out.append(value)
    return tuple(out)


class _Leaf:
    """One C parameter of an input: where it is in the input (steps into
    pairs), its kind and dimensions."""

    def __init__(self, param, steps):
        self.kind = param["kind"]
        self.dims = list(param["shape"])
        self.steps = steps
        self.where = param["source"]
        self.rank = len(self.dims)
        self.shape_text = shape_text(self.dims)


class _Layout:
    """How a compiled function's inputs map to C parameters and its
    result's leaves to a value."""

    def __init__(self, kernel, inputs, kinds):
        import json

        manifest = json.loads(kernel.manifest)
        params = [p for p in manifest["params"] if p["kind"] != "size"]
        self.size_names = list(kernel.sizes)
        self.inputs = []  # (name, [leaf]) in input order
        for name in inputs:
            leaves = []
            for p in params:
                src = p["source"]
                if src == name:
                    leaves.append(_Leaf(p, []))
                elif src.startswith(name + ".") and kinds.get(src) is None:
                    steps = src[len(name) + 1:].split(".")
                    if all(s in ("0", "1") for s in steps):
                        leaves.append(_Leaf(p, [int(s) for s in steps]))
            self.inputs.append((name, leaves))
        # each size: the tensor leaves with a dimension exactly its name
        self.size_source = {}
        for k, (name, leaves) in enumerate(self.inputs):
            for j, leaf in enumerate(leaves):
                for axis, d in enumerate(leaf.dims):
                    if d in self.size_names:
                        self.size_source.setdefault(d, []).append((k, j, axis))
        self.outputs = [o["leaf"] for o in manifest["outputs"]]
        self.returns = manifest.get("returns", {})
        # stored tensors: each leaf's (input, leaf) position by its flat
        # index, and the relation leaf storing each stored input or output
        flat = [(k, j) for k, (_, ls) in enumerate(self.inputs) for j in range(len(ls))]
        stored_in, stored_out = kernel.stored()
        self.stored_in = {flat[i]: flat[r] for i, r in enumerate(stored_in) if r is not None}
        self.stored_out = [None if r is None else flat[r] for r in stored_out]
        self._plain_plan()

    def _plain_plan(self):
        """The plan of a plain call, or ``self.plain = None``: when every
        input is one tensor of rank >= 1 or one real, no result is stored
        by a relation and every size shows in a tensor input, a call whose
        arguments are float64 C-contiguous arrays of the right ranks (and
        Python floats) takes :meth:`plain_call`, which checks the same
        things in fewer steps (the shapes at each sizes are kept)."""
        self.plain = None
        ranks = []
        for _, leaves in self.inputs:
            if len(leaves) != 1 or leaves[0].steps:
                return
            leaf = leaves[0]
            if leaf.kind == "tensor" and leaf.rank >= 1:
                ranks.append(leaf.rank)
            elif leaf.kind == "real":
                ranks.append(None)
            else:
                return
        if any(by is not None for by in self.stored_out):
            return
        sources = []
        for s in self.size_names:
            if s not in self.size_source:
                return
            k, _, axis = self.size_source[s][0]
            sources.append((k, axis))
        tree = self._result_tree("out")
        if tree is None:
            return
        self.plain, self.plain_sizes, self.plain_tree = ranks, sources, tree
        self._shapes_at = {}

    def _result_tree(self, prefix):
        """The result as nested pairs of output indices, or None."""
        if prefix in self.outputs:
            return self.outputs.index(prefix)
        if not any(o.startswith(prefix + ".") for o in self.outputs):
            return None
        first, second = self._result_tree(prefix + ".0"), self._result_tree(prefix + ".1")
        if first is None or second is None:
            return None
        return (first, second)

    def plain_call(self, kernel, args, check_finite, threads):
        """The result of a plain call (see :meth:`_plain_plan`), or None
        where the arguments need the general path (which then gives the
        error, or converts them)."""
        ranks = self.plain
        if ranks is None or len(args) != len(ranks):
            return None
        flat = []
        for a, rank in zip(args, ranks):
            if rank is None:
                if type(a) is not float or not math.isfinite(a):
                    return None
                flat.append(np.array([a]))
            elif (type(a) is np.ndarray and a.dtype == np.float64 and a.ndim == rank
                    and a.flags.c_contiguous):
                flat.append(a)
            else:
                return None
        # the inputs' shapes seen before, with the sizes they give and the
        # result's shapes (checked once: they agree with the sizes)
        key = tuple(map(_SHAPE, flat))
        seen = self._shapes_at.get(key)
        if seen is None:
            seen = self._plain_shapes(kernel, flat, ranks)
            if seen is None:
                return None
            if len(self._shapes_at) < 64:
                self._shapes_at[key] = seen
        sizes, out_shapes = seen
        if check_finite:
            for a, rank in zip(flat, ranks):
                if rank is not None and _native.first_nonfinite(a) is not None:
                    return None
        outs = [np.empty(s if s else 1, dtype=np.float64) for s in out_shapes]
        kernel.call(sizes, flat, outs, threads)
        return _plain_result(self.plain_tree, outs, out_shapes)

    def _plain_shapes(self, kernel, flat, ranks):
        """The sizes the arrays ``flat`` of a plain call give and the
        result's shapes, or None when an input's shape disagrees."""
        sizes = [flat[k].shape[axis] for k, axis in self.plain_sizes]
        in_shapes, out_shapes = kernel.shapes(sizes)
        for a, rank, want in zip(flat, ranks, in_shapes):
            if rank is not None and a.shape != tuple(want):
                return None
        return sizes, [tuple(s) for s in out_shapes]

    def expected(self, name):
        """What input ``name`` must be: "an array of shape (n,)", "a real
        number", a tuple of those for a pair."""
        leaves = dict(self.inputs)[name]
        parts = ["a real number" if leaf.kind == "real" else
                 "%s of shape %s" % ("a boolean array" if leaf.kind == "relation" else "an array",
                                     leaf.shape_text)
                 for leaf in leaves]
        if len(leaves) == 1 and not leaves[0].steps:
            return parts[0]
        return "a tuple (%s)" % ", ".join(parts)

    def leaf_values(self, values, check_finite):
        """Each input's leaves as arrays the native code takes: a list of
        lists, input by input; non-finite values raise if ``check_finite``."""
        out, raw = [], {}
        for k, ((name, leaves), value) in enumerate(zip(self.inputs, values)):
            row = []
            for j, leaf in enumerate(leaves):
                v = component("argument %r" % name, value, leaf.steps)
                if leaf.kind == "stored":
                    raw[(k, j)] = v  # read once its relation is
                    row.append(None)
                elif leaf.kind == "relation" and isinstance(v, PreparedRelation):
                    row.append(v)  # checked by the caller, and by the native code
                elif leaf.kind == "relation" and _is_tuples(v, leaf.rank):
                    row.append(_relation_tuples(_what(name, leaf), v, leaf.rank))
                else:
                    row.append(_leaf_array(name, leaf, v, check_finite))
            out.append(row)
        for (k, j), v in raw.items():
            rk, rj = self.stored_in[(k, j)]
            name, leaf = self.inputs[k][0], self.inputs[k][1][j]
            out[k][j] = _stored_values(_what(name, leaf), v, self.inputs[rk][0], out[rk][rj],
                                       check_finite)
        return out

    def stored_shapes(self, leaves, shapes):
        """The result leaves' shapes with each stored one (nnz,)."""
        out = []
        for shape, by in zip(shapes, self.stored_out):
            out.append(shape if by is None else (len(_tuples_of(leaves[by[0]][by[1]])),))
        return out

    def sparse_results(self, outs, given, leaves, in_shapes):
        """``outs`` with each stored result whose relation, or a tensor
        stored by it, was given as a SciPy sparse matrix made one of the
        same class and format (the first such input's), on the relation's
        tuples and dimensions."""
        forms = {}
        for k, (name, specs) in enumerate(self.inputs):
            for j, spec in enumerate(specs):
                by = (k, j) if spec.kind == "relation" else self.stored_in.get((k, j))
                v = component("argument %r" % name, given[k], spec.steps) if by else None
                if isinstance(v, PreparedRelation):
                    v = v._like
                if by and by not in forms and _is_scipy_sparse(v):
                    forms[by] = v
        if not forms:
            return outs
        flat = {kj: i for i, kj in enumerate((k, j) for k, (_, ls) in enumerate(self.inputs)
                                             for j in range(len(ls)))}
        return [arr if by not in forms else
                _as_scipy(arr, _tuples_of(leaves[by[0]][by[1]]), in_shapes[flat[by]], forms[by])
                for arr, by in zip(outs, self.stored_out)]

    def sizes_from(self, leaves, given):
        """The sizes, in the C function's order: given ones (exact
        integers), the others from an input whose dimension is that size."""
        given = dict(given or {})
        for k in given:
            if k not in self.size_names:
                raise TypeError("unknown size %r (the sizes are %s)"
                                % (k, ", ".join(self.size_names) or "none"))
        values = []
        for s in self.size_names:
            if s in given:
                values.append(exact_size(s, given[s]))
            elif s in self.size_source:
                values.append(self._inferred(s, leaves))
            else:
                raise ValueError("size %s cannot be inferred from the inputs' shapes; "
                                 "give it with sizes={%r: ...}" % (s, s))
        return values

    def _inferred(self, size, leaves):
        """A size from the inputs that show it; an error naming two inputs
        that disagree (a transposed or swapped argument)."""
        value, first = None, None
        for k, j, axis in self.size_source[size]:
            if isinstance(leaves[k][j], (_Tuples, _Values)):
                continue  # tuples and stored values do not show the dimensions
            n = leaves[k][j].shape[axis]
            if value is None:
                value, first = n, (k, j)
            elif n != value:
                (name_a, spec_a), (name_b, spec_b) = self.inputs[first[0]], self.inputs[k]
                spec_a, spec_b = spec_a[first[1]], spec_b[j]
                raise ValueError(
                    "the inputs disagree on size %s: %s of shape %s has %s = %d, "
                    "%s of shape %s has %s = %d"
                    % (size, _what(name_a, spec_a), spec_a.shape_text, size, value,
                       _what(name_b, spec_b), spec_b.shape_text, size, n))
        if value is None:
            raise ValueError("size %s cannot be inferred from the inputs' shapes (a relation "
                             "given by its tuples does not show it); give it with sizes={%r: ...}"
                             % (size, size))
        return value

    def check_shapes(self, leaves, shapes, size_values):
        """Every leaf has the shape its dimensions have at these sizes."""
        at = iter(shapes)
        for (name, specs), arrays in zip(self.inputs, leaves):
            for spec, arr in zip(specs, arrays):
                want = tuple(next(at))
                if isinstance(arr, (_Tuples, _Values)):
                    continue  # checked by the native code against the tuples
                got = arr.shape if spec.kind != "real" else ()
                if got != want:
                    what = _what(name, spec)
                    sizes = ", ".join("%s=%d" % kv for kv in zip(self.size_names, size_values))
                    raise ValueError("%s has shape %s, expected %s = %s%s"
                                     % (what, got, spec.shape_text, want,
                                        " at " + sizes if sizes else ""))

    def output_buffers(self, out, shapes):
        # the compiled function writes every element of its outputs (zero
        # fills included), so they need no zeroing here
        if out is None:
            return [np.empty(s, dtype=np.float64) for s in shapes]
        arrays = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(arrays) != len(shapes):
            raise TypeError("out= has %d arrays, the result has %d leaves"
                            % (len(arrays), len(shapes)))
        for k, (arr, shape) in enumerate(zip(arrays, shapes)):
            what = "out= array %d (result %s)" % (k, self.outputs[k])
            if not isinstance(arr, np.ndarray) or arr.dtype != np.float64:
                raise TypeError("%s must be a float64 array, got %s" % (what, describe(arr)))
            if arr.shape != tuple(shape):
                raise ValueError("%s has shape %s, expected %s" % (what, arr.shape, tuple(shape)))
            if not arr.flags.c_contiguous or not arr.flags.writeable:
                raise ValueError("%s must be C-contiguous and writeable" % what)
        return arrays

    def assemble(self, outs):
        """The result from its leaves ("out", "out.0", "out.1.0", ...)."""
        return _assembled(dict(zip(self.outputs, outs)), "out")


_SHAPE = operator.attrgetter("shape")


def _plain_result(tree, outs, shapes):
    """The value of a plain call from its output arrays (a real's is an
    array of one element)."""
    if type(tree) is int:
        return outs[tree] if shapes[tree] else float(outs[tree][0])
    return (_plain_result(tree[0], outs, shapes), _plain_result(tree[1], outs, shapes))


def _assembled(by_leaf, prefix):
    """The value at ``prefix`` from the leaf arrays ``by_leaf``. A module
    function, not a recursive closure: a closure that calls itself is a
    reference cycle, which would keep the result's arrays alive until the
    garbage collector runs (fresh memory, and its page faults, on every
    call)."""
    if prefix in by_leaf:
        arr = by_leaf[prefix]
        return float(arr.reshape(())) if arr.ndim == 0 else arr
    return (_assembled(by_leaf, prefix + ".0"), _assembled(by_leaf, prefix + ".1"))


def _what(name, leaf):
    if not leaf.steps:
        return "argument %r" % name
    return "argument %r component %s" % (name, ".".join(str(s) for s in leaf.steps))


def _leaf_array(name, leaf, value, check_finite):
    if (type(value) is np.ndarray and value.dtype == np.float64 and leaf.kind == "tensor"
            and value.ndim == leaf.rank and value.flags.c_contiguous):
        arr = value  # the common case, without a copy
    elif leaf.kind == "real":
        return _real_scalar(_what(name, leaf), value)
    else:
        arr = array_of_rank(_what(name, leaf), value, leaf.rank, leaf.shape_text,
                            relation=leaf.kind == "relation")
        if leaf.kind == "relation":
            return arr
    bad = _native.first_nonfinite(arr.reshape(-1)) if check_finite else None
    if bad is not None:
        raise ValueError("%s has a NaN or infinite element (at index %s)"
                         % (_what(name, leaf), tuple(int(i) for i in np.unravel_index(bad, arr.shape))))
    return arr


class PreparedRelation:
    """A relation prepared once for one compiled function
    (:meth:`Function.prepare`): give it in place of the relation to any
    call of that function at sizes that give the same dimensions; the
    result is the unprepared call's, bit for bit. Immutable: it holds its
    own copies (``tuples``, its sorted tuples, read-only; the layouts, in
    the compiled library, freed with it), so changing the array it was
    made from changes nothing. Given to another function (a function and
    its gradient are two), for another input or at other dimensions, a
    call raises ``ValueError``."""

    __slots__ = ("function", "name", "tuples", "_native", "_like")

    def __init__(self, function, name, native, tuples, like):
        for k, v in (("function", function), ("name", name), ("tuples", tuples),
                     ("_native", native), ("_like", like)):
            object.__setattr__(self, k, v)

    @property
    def shape(self):
        """The relation's dimensions."""
        return tuple(self._native.shape)

    @property
    def reordered(self):
        """Were its tuples given in another order (or repeated)? Then
        values given in their order do not follow the sorted tuples."""
        return self.tuples.reordered

    def __setattr__(self, name, value):
        raise AttributeError("a PreparedRelation cannot be changed")

    def __delattr__(self, name):
        raise AttributeError("a PreparedRelation cannot be changed")

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        raise TypeError("a PreparedRelation belongs to its compiled function and cannot be pickled")

    def __repr__(self):
        return "<PreparedRelation %s of %s, shape %s, %d tuples>" % (
            self.name, self.function.name, self.shape, len(self.tuples))

    def _check(self, function, name):
        """Given for the input ``name`` of ``function``: its own?"""
        if function is not self.function:
            raise ValueError("argument %r was prepared for another compiled function (%r): a "
                             "prepared relation serves only the function whose prepare() made it"
                             % (name, self.function))
        if name != self.name:
            raise ValueError("argument %r was prepared for the input %r" % (name, self.name))


class _Tuples(np.ndarray):
    """A relation's tuples, (nnz, arity) int64, sorted and distinct;
    ``reordered``: they were given in another order (or repeated)."""

    reordered = False


class _Values(np.ndarray):
    """A stored tensor's values, one per tuple of its relation."""


def _is_scipy_sparse(value):
    mod = type(value).__module__ or ""
    return mod.startswith("scipy.sparse") and hasattr(value, "tocoo")


def _as_scipy(values, tuples, shape, like):
    """Values on a relation's tuples as a SciPy sparse matrix of the class
    (array or matrix) and format of ``like``; every tuple stays stored,
    also where its value is zero."""
    import scipy.sparse as sp

    coo = sp.coo_matrix if isinstance(like, sp.spmatrix) else sp.coo_array
    m = coo((values, (tuples[:, 0], tuples[:, 1])), shape=tuple(shape))
    return m if like.format == "coo" else m.asformat(like.format)


def _is_tuples(value, arity):
    """Is a relation argument given by its tuples: a SciPy sparse matrix, or
    an integer array of shape (nnz, arity) (always read as tuples, as the
    ctypes loader reads it)?"""
    if _is_scipy_sparse(value):
        return True
    return (isinstance(value, np.ndarray) and value.dtype.kind in "iu" and value.ndim == 2
            and value.shape[1] == arity)


def _relation_tuples(what, value, arity):
    """A relation's tuples from a SciPy sparse matrix (its stored nonzeros)
    or an integer array (nnz, arity), sorted (a radix-free lexsort) and
    checked: no negative coordinate, no tuple twice in an integer array."""
    if _is_scipy_sparse(value):
        if arity != 2:
            raise TypeError("%s has %d argument(s); a SciPy sparse matrix gives 2" % (what, arity))
        m = value.tocoo()
        keep = np.asarray(m.data) != 0
        t = np.stack([np.asarray(m.row)[keep], np.asarray(m.col)[keep]], axis=1).astype(np.int64)
        repeats_ok = True  # a COO matrix may store a coordinate twice
    else:
        t = np.asarray(value).astype(np.int64, copy=False)
        repeats_ok = False
    if t.size and t.min() < 0:
        raise ValueError("%s: a tuple has a negative coordinate" % what)
    reordered = False
    if len(t) > 1:
        step = t[1:] - t[:-1]
        first = np.argmax(step != 0, axis=1)
        if (step[np.arange(len(step)), first] < 0).any():
            reordered = True
            t = t[np.lexsort(t.T[::-1])]
        same = np.all(t[1:] == t[:-1], axis=1)
        if same.any():
            if not repeats_ok:
                raise ValueError("%s: the tuple %s is given twice"
                                 % (what, tuple(int(c) for c in t[1:][same][0])))
            reordered = True
            t = t[np.concatenate([[True], ~same])]
    out = np.ascontiguousarray(t, dtype=np.int64).view(_Tuples)
    out.reordered = reordered
    return out


def _tuples_of(rel):
    """A relation leaf's tuples (from its dense map if given so)."""
    if isinstance(rel, PreparedRelation):
        return rel.tuples
    if isinstance(rel, _Tuples):
        return rel
    return np.argwhere(rel).astype(np.int64).view(_Tuples)


def _stored_values(what, value, rel_name, rel, check_finite):
    """A stored tensor's values, one per tuple of its relation ``rel`` (a
    leaf array): a 1-D array in the tuples' row-major order, or a SciPy
    sparse matrix whose stored coordinates are exactly the tuples."""
    tuples = _tuples_of(rel)
    nnz = len(tuples)
    if _is_scipy_sparse(value):
        if tuples.shape[1] != 2:
            raise TypeError("%s is stored by %s of arity %d; a SciPy sparse matrix gives 2"
                            % (what, rel_name, tuples.shape[1]))
        m = value.tocsr(copy=True)
        m.sum_duplicates()
        coo = m.tocoo()
        got = np.stack([np.asarray(coo.row), np.asarray(coo.col)], axis=1).astype(np.int64)
        if got.shape != tuples.shape or not np.array_equal(got, tuples):
            raise ValueError("%s: its sparsity pattern (%d stored entries) must be the tuples of "
                             "%s (%d)" % (what, len(got), rel_name, nnz))
        return np.ascontiguousarray(coo.data, dtype=np.float64).view(_Values)
    if value is None or isinstance(value, (str, bytes, dict, bool, complex)):
        raise TypeError("%s is stored by %s: give one real per tuple (a 1-D array of %d), got %s"
                        % (what, rel_name, nnz, describe(value)))
    arr = np.asarray(value)
    if arr.dtype.kind not in "iuf":
        raise TypeError("%s must be a 1-D array of reals, got dtype %s" % (what, arr.dtype))
    if arr.ndim != 1 or arr.shape[0] != nnz:
        raise ValueError("%s has shape %s, but it is stored by %s, which holds %d tuple(s): give "
                         "one value per tuple, in the row-major order of the tuples"
                         % (what, arr.shape, rel_name, nnz))
    if getattr(rel, "reordered", False):
        raise ValueError("%s: the tuples of %s are not sorted row-major and distinct, so its "
                         "values do not follow them: sort the tuples (or give the values as a "
                         "SciPy matrix)" % (what, rel_name))
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if check_finite and _native.first_nonfinite(arr) is not None:
        raise ValueError("%s has a NaN or infinite value" % what)
    return arr.view(_Values)


def _real_scalar(what, value):
    x = real_number(what, value)
    if not np.isfinite(x):
        raise ValueError("%s must be finite, got %r" % (what, x))
    return np.array([x])


def _thread_count(threads):
    """``threads`` checked: None, or an integer of at least 1."""
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)):
        raise TypeError("threads takes a positive integer or None, got %s" % describe(threads))
    if threads < 1:
        raise ValueError("threads must be at least 1, got %d" % threads)
    return int(threads)


def _looks_like_text(source):
    """Whether ``source`` is ATL text rather than a path: its first
    character that is not blank or in a comment is ``(``."""
    for line in source.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith(";"):
            return stripped.startswith("(")
    return False


def load(source, name=None, threads=None, check_finite=None):
    """An ATL function from a file (a path) or from ATL text (a string
    whose first form starts with ``(``); ``name`` picks a function of a
    text of several (default: the last); ``threads`` as
    :attr:`Function.threads`, ``check_finite`` as
    :attr:`Function.check_finite` (``None``: True, or a given Function's
    own). Errors of the program raise
    :class:`AtlError`, located in the file."""
    if isinstance(source, Function):
        if threads is not None or check_finite is not None:
            import copy

            source = copy.copy(source)
            source.threads = threads if threads is not None else source.threads
            if check_finite is not None:
                source.check_finite = check_finite
        return source
    check_finite = True if check_finite is None else check_finite
    if isinstance(source, os.PathLike) or (isinstance(source, str) and not _looks_like_text(source)):
        path = os.fspath(source)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        return Function(_native.Program.parse(text, path, name), source=path, threads=threads,
                        check_finite=check_finite)
    if isinstance(source, str):
        return Function(_native.Program.parse(source, "<string>", name), threads=threads,
                        check_finite=check_finite)
    raise TypeError("load takes a path or ATL text, got %s" % describe(source))


__all__ = ["Function", "load", "AtlError"]
