"""Call ATL functions compiled by atl-egg from Python, with NumPy arrays.

    import atl_egg
    f = atl_egg.load("corpus/deconv_signal_loss.atl")        # compiles (cached)
    loss = f(x=x, c=c, z=z)                                  # sizes from the shapes
    g = atl_egg.grad("corpus/deconv_signal_loss.atl", wrt=["c"])
    dc = g(x=x, c=c, z=z)

A small module over `ctypes` and NumPy, with no build step (its argument
checks are the package's, python/package/atl_egg/_checks.py, plain Python
read by its path: use it from a checkout of the repository): `load` runs
`atl-egg compile` (the binary is `$ATL_EGG_BIN`, else `atl-egg` on the
PATH) to get the shared library and its JSON manifest, in a temporary
directory removed before `load` returns, and the callable it returns
checks every argument before the compiled code runs, allocates the
outputs, calls the library and returns arrays (a float for a real result,
a tuple for a pair).

Arguments, by position, by name, or as a mapping `inputs={...}` (a name that
is not a Python identifier, such as `a.b`, is passed as `f(**{"a.b": v})`
or in `inputs`):
* a tensor is an array of exactly its declared rank and shape, of real
  numbers (passed as float64, C-contiguous); a real a real number; a pair
  a 2-tuple (or `(a, b, c)` for `(a, (b, c))`). A relation is its tuples: an integer array of shape
  (nnz, arity), a SciPy sparse matrix or array (arity 2: its stored
  nonzeros), or its dense map, a boolean (or 0/1) array of the declared
  rank (an integer array of shape (k, arity) is always read as tuples). The
  compiled code takes it in a compressed layout (CSR for arity 2), built
  here in time linear in the tuples. A wrong argument raises TypeError
  (wrong kind) or ValueError (wrong shape, a coordinate out of range, a
  repeated tuple) naming it and the expected shape. A tensor stored by a
  relation's pattern (`(tensor n m R (stored-by S))`) is its values, one per
  tuple of S: a 1-D array in the row-major order of the tuples (S's tuples
  must then be given sorted and distinct), or a SciPy sparse matrix whose
  stored coordinates are exactly S's tuples; a stored result is returned
  as such a 1-D array, or as a SciPy sparse matrix of the class and format
  of the first input that gave S, or a tensor stored by it, as one. Neither
  is ever made dense;
* sizes are inferred from the inputs' shapes or given as
  `sizes={"n": 4}`: exact integers in [0, 2^63) (not bool, not float).

A relation fixed across many calls (a graph in a training loop) can be
prepared once for a function, `E = f.prepare("E", tuples, sizes={"n": n})`,
and given in its place to that function's later calls, which then skip
checking it and building its layouts (a `PreparedRelation`: immutable,
holding its own copies; see docs/python.md).

A non-zero return code of the compiled code raises `AtlError` (its `code`,
and the meaning the manifest gives it).
"""

import ctypes
import importlib.util
import json
import os
import subprocess
import tempfile
import weakref

import numpy as np


def _load_checks():
    """The argument checks this loader shares with the package
    (python/package/atl_egg/_checks.py: plain Python, nothing to build),
    read by their path: the package is `atl_egg` too, and need not be
    installed."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "package", "atl_egg", "_checks.py")
    spec = importlib.util.spec_from_file_location("_atl_egg_loader_checks", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_checks = _load_checks()

__all__ = ["load", "load_library", "grad", "vjp", "AtlFunction", "AtlError", "PreparedRelation"]


def _bin():
    return os.environ.get("ATL_EGG_BIN", "atl-egg")


def _atl(args, stdin=None):
    r = subprocess.run([_bin()] + args, input=stdin, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("atl-egg %s failed:\n%s" % (" ".join(args), r.stderr))
    return r.stdout


def _dim(expr, sizes):
    """Value of a manifest dimension (`n`, `3`, `(- (+ m n) 1)`, `(* 2 n)`)."""

    def value(tree):
        if isinstance(tree, str):
            if tree.lstrip("-").isdigit():
                return int(tree)
            if tree not in sizes:
                raise ValueError("size %s is not known (give it with sizes={...})" % tree)
            return int(sizes[tree])
        op, args = tree[0], [value(a) for a in tree[1:]]
        if op == "+":
            return sum(args)
        if op == "-":
            return (args[0] - sum(args[1:])) if len(args) > 1 else -args[0]
        if op == "*":
            p = 1
            for a in args:
                p *= a
            return p
        raise ValueError("unknown dimension form %r" % op)

    return value(_checks.dim_tree(expr))


class _Relation:
    """A relation argument: its tuples (sorted, distinct, an (nnz, arity)
    int64 array) and the dimensions its form fixes (None where unknown)."""

    def __init__(self, tuples, shape, reordered=False, maxima=None, what=None):
        self.tuples = tuples
        self.shape = shape
        # pairs not checked yet (``what`` names the argument): the compiled
        # library checks them and builds their layout in one pass, in the
        # call (_Relation.resolve)
        self.what = what
        self.layout = None
        # the tuples were given in another order (or repeated): values given
        # in their order would not follow the sorted tuples
        self.reordered = reordered
        # each argument's largest coordinate, when known already
        self.maxima = maxima
        # the PreparedRelation given for it, if any
        self.prepared = None
        # the kept buffer its layout is in (_KeptBuffers), if any
        self.buffer = None

    def resolve(self, lib, dims, kept=None):
        """The relation with its pairs checked against ``dims``: their
        layout built by the library's one-pass helper when they are sorted,
        distinct and in range, else checked (and sorted) here as any tuples
        are. With ``kept`` (a _KeptBuffers), the layout is written to a
        buffer of it, given back by the caller after the call."""
        if self.what is None:
            return self
        helper = getattr(lib, "atlpacked_pairs_layout", None)
        if helper is not None and len(self.tuples):
            size = 7 + dims[0] + len(self.tuples)
            buf = kept.take(size) if kept is not None else np.empty(size, dtype=np.int64)
            out = buf[:size]
            helper.restype = ctypes.c_int
            rc = helper(self.tuples.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(len(self.tuples)),
                        ctypes.c_int64(dims[0]), ctypes.c_int64(dims[1]),
                        out.ctypes.data_as(ctypes.c_void_p))
            if rc == 0:
                rel = _Relation(self.tuples, None)
                rel.layout = out
                rel.buffer = buf if kept is not None else None
                return rel
            if kept is not None:
                kept.give(buf)
        return _sorted_tuples(self.what, self.tuples, None, duplicates_ok=False)


class _KeptBuffers:
    """The int64 buffers a function's calls build their relations' layouts
    in, kept for the next call (at most ``count``, of at most 2^27 entries
    each), so that a call does not map and fault in fresh pages for them
    each time. Calls on several threads at once take them in turn or
    allocate their own (list pop and append are atomic)."""

    LIMIT = 1 << 27

    def __init__(self, count):
        self.count = count
        self.free = []

    def take(self, size):
        try:
            buf = self.free.pop()
        except IndexError:
            buf = None
        if buf is None or len(buf) < size:
            buf = np.empty(size, dtype=np.int64)
        return buf

    def give(self, buf):
        if buf is not None and len(buf) <= self.LIMIT and len(self.free) < self.count:
            self.free.append(buf)


def _is_scipy_sparse(value):
    mod = type(value).__module__ or ""
    return mod.startswith("scipy.sparse") and hasattr(value, "tocoo")


def _relation_arg(what, value, arity, shape):
    """A relation argument in any accepted form, as its sorted tuples
    (``shape`` is the declared shape's text)."""
    if _is_scipy_sparse(value):
        if arity != 2:
            raise TypeError("%s has %d argument(s); a SciPy sparse matrix gives 2" % (what, arity))
        m = value.tocoo()
        keep = np.asarray(m.data) != 0
        tuples = np.stack([np.asarray(m.row)[keep], np.asarray(m.col)[keep]], axis=1).astype(np.int64)
        # a COO matrix may store a coordinate twice: its tuple is in the relation once
        return _sorted_tuples(what, tuples, tuple(m.shape), duplicates_ok=True)
    if value is None or isinstance(value, (str, bytes, dict, bool, int, float, complex, np.generic)):
        raise TypeError("%s must be an array of tuples (k, %d) or of shape %s, got %s" % (
            what, arity, shape, _checks.describe(value)))
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as e:
        raise TypeError("%s must be an array of tuples (k, %d) or of shape %s: %s"
                        % (what, arity, shape, e)) from None
    if arr.dtype.kind in "iu" and arr.ndim == 2 and arr.shape[1] == arity:
        if arity == 2 and arr.dtype == np.int64 and arr.flags.c_contiguous and len(arr) > 1:
            return _Relation(arr, None, what=what)
        return _sorted_tuples(what, arr.astype(np.int64, copy=False), None, duplicates_ok=False)
    dense = _checks.array_of_rank(what, arr, arity, shape, relation=True)
    return _Relation(np.argwhere(dense).astype(np.int64).reshape(-1, arity), dense.shape)


def _lex_key(tuples):
    """One int64 per tuple ordered as the tuples are lexicographically
    (mixed radix by each column's largest coordinate plus one), or None
    where that radix overflows int64."""
    radix = [int(tuples[:, c].max()) + 1 for c in range(tuples.shape[1])]
    total = 1
    for r in radix:
        total *= r
    if total >= 1 << 63:
        return None
    key = tuples[:, 0].copy()
    for c in range(1, tuples.shape[1]):
        key *= radix[c]
        key += tuples[:, c]
    return key


def _sorted_pairs(tuples, shape):
    """Pairs that are sorted and distinct already (the usual case), in a
    few vectorized passes: the first column does not decrease and one key
    per pair strictly increases; None otherwise (and for a negative
    coordinate), which the general checks below then report or sort."""
    a, b = tuples[:, 0], tuples[:, 1]
    bmin, bmax = int(b.min()), int(b.max())
    if bmin < 0 or a[0] < 0 or (a[1:] < a[:-1]).any():
        return None
    amax = int(a[-1])
    if (amax + 1) * (bmax + 1) >= 1 << 63:
        return None
    key = a * (bmax + 1)
    key += b
    if (key[1:] <= key[:-1]).any():
        return None
    return _Relation(np.ascontiguousarray(tuples), shape, maxima=(amax, bmax))


def _sorted_tuples(what, tuples, shape, duplicates_ok):
    if len(tuples) > 1 and tuples.shape[1] == 2:
        fast = _sorted_pairs(tuples, shape)
        if fast is not None:
            return fast
    if tuples.size and tuples.min() < 0:
        raise ValueError("%s: a tuple has a negative coordinate" % what)
    reordered = False
    if len(tuples) > 1 and tuples.shape[1] > 0:
        key = _lex_key(tuples)
        if key is not None:
            # already sorted (the usual case) unless some tuple is below the previous
            step = np.diff(key)
            if (step < 0).any():
                reordered = True
                order = np.argsort(key, kind="stable")
                tuples = tuples[order]
                step = np.diff(key[order])
            same = step == 0
        else:
            step = tuples[1:] - tuples[:-1]
            first = np.argmax(step != 0, axis=1)
            if (step[np.arange(len(step)), first] < 0).any():
                reordered = True
                tuples = tuples[np.lexsort(tuples.T[::-1])]
            same = np.all(tuples[1:] == tuples[:-1], axis=1)
        if same.any():
            if not duplicates_ok:
                raise ValueError("%s: the tuple %s is given twice" % (
                    what, tuple(int(c) for c in tuples[1:][same][0])))
            reordered = True
            tuples = tuples[np.concatenate([[True], ~same])]
    return _Relation(np.ascontiguousarray(tuples), shape, reordered)


def _stored_arg(what, value, rel_name, rel):
    """The values of a tensor stored by the pattern of the relation
    ``rel`` (a _Relation, its tuples sorted) as a float64 array of one value
    per tuple, in the tuples' order: a 1-D array of them (the relation's
    tuples given in that order), or a SciPy sparse matrix whose stored
    coordinates are exactly the relation's tuples."""
    nnz = len(rel.tuples)
    if _is_scipy_sparse(value):
        if rel.tuples.shape[1] != 2:
            raise TypeError("%s is stored by %s of arity %d; a SciPy sparse matrix gives 2" % (
                what, rel_name, rel.tuples.shape[1]))
        m = value.tocsr(copy=True)
        m.sum_duplicates()  # sorts the indices too
        coo = m.tocoo()
        got = np.stack([np.asarray(coo.row), np.asarray(coo.col)], axis=1).astype(np.int64)
        if got.shape != rel.tuples.shape or not np.array_equal(got, rel.tuples):
            extra = [tuple(int(c) for c in t) for t in got if not _has_tuple(rel.tuples, t)]
            missing = [tuple(int(c) for c in t) for t in rel.tuples if not _has_tuple(got, t)]
            why = ("stores %s, which %s does not hold" % (extra[0], rel_name)) if extra else (
                "does not store %s, a tuple of %s" % (missing[0], rel_name) if missing else "differs")
            raise ValueError("%s: its sparsity pattern must be the tuples of %s (%d), but it %s" % (
                what, rel_name, nnz, why))
        return np.ascontiguousarray(np.asarray(coo.data, dtype=np.float64))
    if value is None or isinstance(value, (str, bytes, dict, bool, complex)):
        raise TypeError("%s is stored by %s: give one real per tuple of %s (a 1-D array of %d), got %s"
                        % (what, rel_name, rel_name, nnz, _checks.describe(value)))
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as e:
        raise TypeError("%s must be a 1-D array of %d reals: %s" % (what, nnz, e)) from None
    if arr.dtype.kind not in "iuf":
        raise TypeError("%s must be a 1-D array of reals, got dtype %s" % (what, arr.dtype))
    if arr.ndim != 1 or arr.shape[0] != nnz:
        raise ValueError("%s has shape %s, but it is stored by %s, which holds %d tuple(s): "
                         "give one value per tuple, in the row-major order of the tuples"
                         % (what, arr.shape, rel_name, nnz))
    if rel.reordered:
        raise ValueError("%s: the tuples of %s are not sorted row-major and distinct, so its %d "
                         "values do not follow them: sort the tuples (or give the values as a SciPy matrix)"
                         % (what, rel_name, nnz))
    return np.ascontiguousarray(arr, dtype=np.float64)


def _has_tuple(sorted_tuples, t):
    """Is ``t`` among the sorted tuples (arity 2)?"""
    lo = np.searchsorted(sorted_tuples[:, 0], t[0], side="left")
    hi = np.searchsorted(sorted_tuples[:, 0], t[0], side="right")
    return bool((sorted_tuples[lo:hi, 1] == t[1]).any())


def _compressed_layout(tuples, dims):
    """The compressed layout of sorted distinct tuples (see atl-egg's
    docs/cli.md): a header (arity, nnz, per level the offsets of its
    positions and coordinates), then the arrays; level 0 dense from arity
    2 on."""
    k, nnz = len(dims), len(tuples)
    if k == 2:
        # rows by a count of each first coordinate; the second column as is
        out = np.empty(7 + dims[0] + nnz, dtype=np.int64)
        out[:7] = (2, nnz, 0, 0, 6, 7 + dims[0], 0)
        np.cumsum(np.bincount(tuples[:, 0], minlength=dims[0]), out=out[7:7 + dims[0]])
        out[7 + dims[0]:] = tuples[:, 1]
        return out
    start = 1 if k >= 2 else 0
    header = np.zeros(2 + 2 * k, dtype=np.int64)
    header[0], header[1] = k, nnz
    parts, at = [header], 2 + 2 * k
    # first[i]: the first argument where tuple i differs from tuple i - 1
    # (the tuples are distinct: every one is new at the last level, so
    # arity 2 needs none)
    first = np.zeros(nnz, dtype=np.int64)
    if nnz > 1 and k > 2:
        first[1:] = np.argmax(tuples[1:] != tuples[:-1], axis=1)
    for level in range(start, k):
        new = first <= level if level < k - 1 else slice(None)
        if level == start:
            parents = dims[0] if start else 1
            parent_ids = tuples[new, 0] if start else np.zeros(nnz, dtype=np.int64)
        else:
            new_parent = first < level
            parents = int(new_parent.sum())
            parent_ids = (np.cumsum(new_parent) - 1)[new]
        pos = np.concatenate([[0], np.cumsum(np.bincount(parent_ids, minlength=parents))]).astype(np.int64)
        crd = tuples[new, level].astype(np.int64)
        header[2 + 2 * level] = at
        at += len(pos)
        header[3 + 2 * level] = at
        at += len(crd)
        parts += [pos, crd]
    return np.ascontiguousarray(np.concatenate(parts), dtype=np.int64)


class AtlError(RuntimeError):
    """The compiled code reported an error; `code` is its return code."""

    def __init__(self, function, code, meaning):
        self.code = code
        super().__init__("%s returned %d: %s" % (function, code, meaning))


def _input_names(manifest):
    """The function's inputs (not sizes) in order, each with the C
    parameters that are its leaves: (name, [(param, steps into pairs)])."""
    if "inputs" in manifest:
        names = [i["name"] for i in manifest["inputs"] if i["kind"] != "size"]
    else:  # an older manifest: a leaf's name is its source without `.0`/`.1` steps
        names = []
        for p in manifest["params"]:
            parts = p["source"].split(".")
            while len(parts) > 1 and parts[-1] in ("0", "1"):
                parts.pop()
            if p["kind"] != "size" and ".".join(parts) not in names:
                names.append(".".join(parts))
    out = []
    for name in names:
        leaves = []
        for p in manifest["params"]:
            src = p["source"]
            if p["kind"] == "size":
                continue
            if src == name:
                leaves.append((p, []))
            elif src.startswith(name + "."):
                steps = src[len(name) + 1:].split(".")
                if all(s in ("0", "1") for s in steps):
                    leaves.append((p, [int(s) for s in steps]))
        out.append((name, leaves))
    return out


class AtlFunction:
    """A compiled ATL function: call it with the inputs by position, by
    name (`f(x=..)`, or `f(**{"a.b": ..})` for a name that is not a Python
    identifier) or as a mapping (`f(inputs={"x": ..})`). Every argument is
    checked before the compiled code runs."""

    def __init__(self, library_path, manifest):
        self.manifest = manifest
        # Idle OpenMP threads sleep unless the user chose how they wait: GNU's
        # default spins them, which on a busy machine takes the cores from the
        # threads doing the work. Read once, when the runtime is first loaded.
        if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
            os.environ["OMP_WAIT_POLICY"] = "passive"
        self._lib = ctypes.CDLL(os.path.abspath(library_path))
        self._fn = getattr(self._lib, manifest["function"])
        self._fn.restype = ctypes.c_int
        types = {"int64_t": ctypes.c_int64, "double": ctypes.c_double}
        self._fn.argtypes = [types.get(p["c_type"], ctypes.c_void_p) for p in manifest["params"]] + [
            ctypes.c_void_p for _ in manifest["outputs"]
        ]
        self.sizes = [p["source"] for p in manifest["params"] if p["kind"] == "size"]
        self._kept = _KeptBuffers(sum(p["kind"] == "relation" for p in manifest["params"]))
        self._leaves = _input_names(manifest)
        self.inputs = [name for name, _ in self._leaves]

    def __repr__(self):
        return "<AtlFunction %s(%s)>" % (self.manifest["function"], ", ".join(self.inputs))

    def _bind(self, args, inputs, kwargs):
        """The arguments by input name; TypeError for unknown, repeated or
        missing ones."""
        inputs = dict(inputs or {})
        for k in inputs:
            if k in kwargs:
                raise TypeError("input %r given twice" % k)
        values = _checks.bind(self.inputs, args, dict(inputs, **kwargs), noun="input")
        return dict(zip(self.inputs, values))

    def _leaf_values(self, given):
        """Each C parameter's value, checked: reals as floats, tensors and
        relations as arrays of the declared rank."""
        leaves = {}
        for name, params in self._leaves:
            for p, steps in params:
                what = "input %r" % name if not steps else "input %r component %s" % (
                    name, ".".join(str(s) for s in steps))
                v = _checks.component("input %r" % name, given[name], steps)
                shape, rank = _checks.shape_text(p["shape"]), len(p["shape"])
                if p["kind"] == "real":
                    leaves[p["source"]] = _checks.real_number(what, v)
                elif p["kind"] == "relation" and isinstance(v, PreparedRelation):
                    leaves[p["source"]] = v._leaf(self, p["source"], what)
                elif p["kind"] == "relation":
                    leaves[p["source"]] = _relation_arg(what, v, rank, shape)
                elif p["kind"] == "stored":
                    leaves[p["source"]] = v  # checked against its relation in the call
                else:
                    leaves[p["source"]] = _checks.array_of_rank(what, v, rank, shape)
        return leaves

    def _scipy_forms(self, given):
        """For each relation given as a SciPy sparse matrix, or storing a
        tensor given as one, the first such input: its stored results are
        returned in its class and format."""
        forms = {}
        for name, params in self._leaves:
            for p, steps in params:
                by = p["source"] if p["kind"] == "relation" else p.get("stored_by")
                if by and by not in forms:
                    v = _checks.component("input %r" % name, given[name], steps)
                    if isinstance(v, PreparedRelation):
                        v = v._like
                    if _is_scipy_sparse(v):
                        forms[by] = v
        return forms

    def _sizes(self, sizes, leaves):
        """Every size: given (exact integers), else from an input whose
        dimension is exactly that size."""
        known = {}
        for k, v in dict(sizes or {}).items():
            if k not in self.sizes:
                raise TypeError("unknown size %r (the sizes are %s)" % (k, ", ".join(self.sizes) or "none"))
            known[k] = _checks.exact_size(k, v)
        for s in self.sizes:
            if s in known:
                continue
            for p in self.manifest["params"]:
                if p["kind"] in ("tensor", "relation") and s in p["shape"]:
                    shape = leaves[p["source"]].shape
                    if shape is None:
                        continue  # tuples do not fix the dimensions
                    known[s] = shape[p["shape"].index(s)]
                    break
            if s not in known:
                raise ValueError("size %s cannot be inferred; give it with sizes={%r: ...}" % (s, s))
        return known

    def _shape(self, dims, known, what):
        shape = tuple(_dim(d, known) for d in dims)
        for d, n in zip(dims, shape):
            if not 0 <= n < _checks.INT64_LIMIT:
                raise ValueError("%s: dimension %s is %d at these sizes" % (what, d, n))
        return shape

    def _layout(self, p, rel, want):
        """The compressed layout of the relation parameter ``p`` (its tuples
        ``rel``, checked against the dimensions ``want``)."""
        if rel.shape is not None and tuple(rel.shape) != want:
            raise ValueError("input %s has shape %s, expected %s = %s" % (
                p["source"], tuple(rel.shape), _checks.shape_text(p["shape"]), want))
        if rel.layout is not None:  # checked and laid out in one pass
            return rel.layout
        maxima = rel.maxima
        if maxima is None and len(rel.tuples):
            maxima = [int(rel.tuples[:, c].max()) for c in range(len(want))]
        if len(rel.tuples) and any(m >= w for m, w in zip(maxima, want)):
            over = rel.tuples >= np.asarray(want, dtype=np.int64)
            if over.any():
                bad = tuple(int(c) for c in rel.tuples[over.any(axis=1)][0])
                raise ValueError("input %s: the tuple %s is out of range (shape %s = %s)" % (
                    p["source"], bad, _checks.shape_text(p["shape"]), want))
        return _compressed_layout(rel.tuples, want)

    def prepare(self, name, relation, sizes=None):
        """The relation input ``name`` prepared once for this function: a
        `PreparedRelation`, accepted in its place by every later call (at
        sizes that give the same dimensions), which then skips checking the
        tuples and building the layouts the compiled code reads (a
        transposed or permuted layout where the program reads the relation
        with its arguments swapped, as `(or (E i j) (E j i))` does). The
        relation is given as in a call; ``sizes`` as in a call, where the
        relation's dimensions need them (tuples do not fix them)."""
        params = [p for p in self.manifest["params"] if p["kind"] == "relation"]
        which = [k for k, p in enumerate(params) if p["source"] == name]
        if not which:
            raise ValueError("%s has no relation input %r (its relations: %s)" % (
                self.manifest["function"], name, ", ".join(p["source"] for p in params) or "none"))
        build = getattr(self._lib, "atlpacked_prepare", None)
        if build is None or "prepare" not in self.manifest:
            raise TypeError("this compiled library has no prepared entry points; compile it again")
        if isinstance(relation, PreparedRelation):
            raise TypeError("relation %r is prepared already" % name)
        k, p = which[0], params[which[0]]
        what = "relation %r" % name
        rel = _relation_arg(what, relation, len(p["shape"]), _checks.shape_text(p["shape"]))
        known = {}
        for s, v in dict(sizes or {}).items():
            if s not in self.sizes:
                raise TypeError("unknown size %r (the sizes are %s)" % (s, ", ".join(self.sizes) or "none"))
            known[s] = _checks.exact_size(s, v)
        for s in self.sizes:
            if s not in known and rel.shape is not None and s in p["shape"]:
                known[s] = rel.shape[p["shape"].index(s)]
        want = self._shape(p["shape"], known, what)
        rel = rel.resolve(self._lib, want)
        layout = self._layout(p, rel, want)
        sz = np.array([known.get(s, 0) for s in self.sizes] or [0], dtype=np.int64)
        rc = ctypes.c_int(-1)
        build.restype = ctypes.c_void_p
        build.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                          ctypes.POINTER(ctypes.c_int)]
        handle = build(k, sz.ctypes.data, layout.ctypes.data, len(layout), ctypes.byref(rc))
        if not handle:
            meaning = self.manifest.get("returns", {}).get(str(rc.value), "an undocumented error code")
            raise AtlError("preparing %s" % what, rc.value, meaning)
        return PreparedRelation(self, name, want, rel, handle, _scipy_like(relation))

    def _call_prepared(self, call, prepared, keep):
        """The compiled function through its packed entry with prepared
        relations (``call``: the arguments in the signature's order, None
        for a prepared relation)."""
        entry = self._lib.atlpacked_entry_prepared
        entry.restype = ctypes.c_int
        sz, re, rel, prep = [], [], [], []

        def ptr(x):
            return x.value if isinstance(x, ctypes.c_void_p) else x

        params = self.manifest["params"]
        for p, x in zip(params, call):
            if p["kind"] == "size":
                sz.append(x)
            elif p["kind"] == "real":
                box = np.array([x], dtype=np.float64)
                keep.append(box)
                re.append(box.ctypes.data)
            elif p["kind"] == "relation":
                rel.append(ptr(x))
                h = prepared.get(p["source"])
                prep.append(h._handle if h is not None else None)
            else:
                re.append(ptr(x))
        out = [ptr(x) for x in call[len(params):]]

        def arr(ty, xs):
            return (ty * max(1, len(xs)))(*xs)
        return entry(arr(ctypes.c_int64, sz), arr(ctypes.c_void_p, re), arr(ctypes.c_void_p, rel),
                     arr(ctypes.c_void_p, prep), arr(ctypes.c_void_p, out))

    def __call__(self, *args, sizes=None, inputs=None, **kwargs):
        given = self._bind(args, inputs, kwargs)
        leaves = self._leaf_values(given)
        known = self._sizes(sizes, leaves)
        for p in self.manifest["params"]:
            if p["kind"] == "relation":
                want = self._shape(p["shape"], known, "input %s" % p["source"])
                leaves[p["source"]] = leaves[p["source"]].resolve(self._lib, want, self._kept)
        try:
            return self._call(leaves, known, given)
        finally:
            for p in self.manifest["params"]:
                if p["kind"] == "relation":
                    self._kept.give(getattr(leaves[p["source"]], "buffer", None))

    def _call(self, leaves, known, given):
        """The call with the relations resolved (``__call__``)."""
        call, keep, rel_shapes, prepared = [], [], {}, {}
        for p in self.manifest["params"]:
            if p["kind"] == "size":
                call.append(known[p["source"]])
            elif p["kind"] == "real":
                call.append(leaves[p["source"]])
            elif p["kind"] == "relation":
                rel = leaves[p["source"]]
                want = self._shape(p["shape"], known, "input %s" % p["source"])
                rel_shapes[p["source"]] = want
                if rel.prepared is not None:
                    if rel.shape != want:
                        raise ValueError("input %s was prepared at shape %s = %s, but these sizes give %s" % (
                            p["source"], _checks.shape_text(p["shape"]), rel.shape, want))
                    prepared[p["source"]] = rel.prepared
                    call.append(None)  # the prepared relation's own layout
                    continue
                layout = self._layout(p, rel, want)
                keep.append(layout)
                call.append(layout.ctypes.data_as(ctypes.c_void_p))
            elif p["kind"] == "stored":
                by = p["stored_by"]
                vals = _stored_arg("input %s" % p["source"], leaves[p["source"]], by, leaves[by])
                keep.append(vals)
                call.append(vals.ctypes.data_as(ctypes.c_void_p))
            else:
                arr = leaves[p["source"]]
                want = self._shape(p["shape"], known, "input %s" % p["source"])
                if arr.shape != want:
                    raise ValueError("input %s has shape %s, expected %s = %s" % (
                        p["source"], arr.shape, _checks.shape_text(p["shape"]), want))
                call.append(arr.ctypes.data_as(ctypes.c_void_p))
        outs = []  # the compiled function writes every element: no zeroing
        for o in self.manifest["outputs"]:
            if "stored_by" in o:  # one value per tuple of the relation
                arr = np.empty(len(leaves[o["stored_by"]].tuples), dtype=np.float64)
            else:
                arr = np.empty(self._shape(o["shape"], known, "the result %s" % o["leaf"]), dtype=np.float64)
            outs.append(arr)
            call.append(arr.ctypes.data_as(ctypes.c_void_p))
        rc = self._call_prepared(call, prepared, keep) if prepared else self._fn(*call)
        if rc != 0:
            meaning = self.manifest.get("returns", {}).get(str(rc), "an undocumented error code")
            raise AtlError(self.manifest["function"], rc, meaning)

        forms = self._scipy_forms(given)
        outs = [_as_scipy(arr, leaves[o["stored_by"]].tuples, rel_shapes[o["stored_by"]],
                          forms[o["stored_by"]]) if o.get("stored_by") in forms else arr
                for o, arr in zip(self.manifest["outputs"], outs)]
        # reassemble pairs from the leaves ("out", "out.0", "out.1.0", ...)
        return _assembled({o["leaf"]: arr for o, arr in zip(self.manifest["outputs"], outs)}, "out")


class PreparedRelation:
    """A relation prepared once for one compiled function
    (`AtlFunction.prepare`): give it in place of the relation to any call
    of that function at sizes that give the same dimensions. Immutable: it
    holds its own copies (the sorted tuples, a read-only array, and in the
    compiled library the layouts its calls read), so changing the array it
    was made from changes nothing. Given to another function, for another
    input or at other dimensions, a call raises ValueError."""

    __slots__ = ("function", "name", "shape", "tuples", "_reordered", "_handle", "_like", "_free",
                 "__weakref__")

    def __init__(self, function, name, shape, rel, handle, like):
        tuples = np.array(rel.tuples, dtype=np.int64, copy=True)
        tuples.setflags(write=False)
        free = function._lib.atlpacked_prepared_free
        free.restype, free.argtypes = None, [ctypes.c_void_p]
        for k, v in (("function", function), ("name", name), ("shape", tuple(shape)),
                     ("tuples", tuples), ("_reordered", rel.reordered), ("_handle", handle),
                     ("_like", like),
                     # frees the library's copies with this object (and keeps
                     # the library loaded until then)
                     ("_free", weakref.finalize(self, free, handle))):
            object.__setattr__(self, k, v)

    def __setattr__(self, name, value):
        raise AttributeError("a PreparedRelation cannot be changed")

    def __delattr__(self, name):
        raise AttributeError("a PreparedRelation cannot be changed")

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        raise TypeError("a PreparedRelation belongs to its loaded function and cannot be pickled")

    def __repr__(self):
        return "<PreparedRelation %s of %s, shape %s, %d tuples>" % (
            self.name, self.function.manifest["function"], self.shape, len(self.tuples))

    def _leaf(self, function, source, what):
        """The relation argument ``source`` of a call of ``function``."""
        if function is not self.function:
            raise ValueError("%s was prepared for another compiled function (%r): a prepared relation "
                             "serves only the function whose prepare() made it" % (what, self.function))
        if source != self.name:
            raise ValueError("%s was prepared for the input %r, not %r" % (what, self.name, source))
        rel = _Relation(self.tuples, self.shape, self._reordered)
        rel.prepared = self
        return rel


def _scipy_like(value):
    """An empty SciPy matrix of the class and format of ``value`` (a
    prepared relation's results come back in that form), or None."""
    if not _is_scipy_sparse(value):
        return None
    try:
        return type(value)((0, 0))
    except (TypeError, ValueError):
        return None


def _as_scipy(values, tuples, shape, like):
    """Values on a relation's tuples as a SciPy sparse matrix of the class
    (array or matrix) and format of ``like``; every tuple stays stored,
    also where its value is zero."""
    import scipy.sparse as sp

    coo = sp.coo_matrix if isinstance(like, sp.spmatrix) else sp.coo_array
    m = coo((values, (tuples[:, 0], tuples[:, 1])), shape=tuple(shape))
    return m if like.format == "coo" else m.asformat(like.format)


def _assembled(by_leaf, prefix):
    """The value at ``prefix`` from the leaf arrays ``by_leaf``. A module
    function, not a recursive closure: a closure that calls itself is a
    reference cycle, which would keep the result's arrays alive until the
    garbage collector runs (fresh memory, and its page faults, on every
    call)."""
    if prefix in by_leaf:
        arr = by_leaf[prefix]
        return float(arr) if arr.ndim == 0 else arr
    return (_assembled(by_leaf, prefix + ".0"), _assembled(by_leaf, prefix + ".1"))


def load_library(library_path, manifest_path=None):
    """A compiled function from the `.so` and the `.json` manifest that
    `atl-egg compile -o F.so` and `-o F.json` wrote (the manifest defaults to
    the library's path with `.json`)."""
    if manifest_path is None:
        manifest_path = os.path.splitext(library_path)[0] + ".json"
    with open(manifest_path) as f:
        return AtlFunction(library_path, json.load(f))


def _compile_text(program_text, name):
    # The library is loaded before the directory is removed (a loaded
    # library needs no file), so nothing is left behind on any path.
    with tempfile.TemporaryDirectory(prefix="atl-egg-") as d:
        src = os.path.join(d, name + ".atl")
        with open(src, "w") as f:
            f.write(program_text)
        so, js = os.path.join(d, name + ".so"), os.path.join(d, name + ".json")
        _atl(["compile", src, "-o", so])
        _atl(["compile", src, "-o", js])
        return load_library(so, js)


def load(path):
    """Compile an ATL file (or load a compiled `.so` with its manifest)."""
    if path.endswith(".so"):
        return load_library(path)
    with open(path) as f:
        return _compile_text(f.read(), "f")


def _derive(command, path, wrt):
    args = [command, path] + (["--wrt", ",".join(wrt)] if wrt else [])
    return _compile_text(_atl(args), command)


def grad(path, wrt=None):
    """The compiled gradient of an ATL function returning R: same inputs,
    returns one array per `wrt` input (several as nested pairs)."""
    return _derive("grad", path, wrt)


def vjp(path, wrt=None):
    """The compiled vector-Jacobian product: the function's inputs and one
    more, the cotangent `ct` of the output (named as `atl-egg vjp` prints)."""
    return _derive("vjp", path, wrt)
