"""Call ATL functions compiled by atl-egg from Python, with NumPy arrays.

    import atl_egg
    f = atl_egg.load("corpus/deconv_signal_loss.atl")        # compiles (cached)
    loss = f(x=x, c=c, z=z)                                  # sizes from the shapes
    g = atl_egg.grad("corpus/deconv_signal_loss.atl", wrt=["c"])
    dc = g(x=x, c=c, z=z)

A small module over `ctypes` and NumPy, with no build step: `load` runs
`atl-egg compile` (the binary is `$ATL_EGG_BIN`, else `atl-egg` on the
PATH) to get the shared library and its JSON manifest, and the callable it
returns checks every input's shape against the manifest, allocates the
outputs, calls the library and returns arrays (a float for a real result,
a tuple for a pair). Tensors are passed as float64 C-contiguous arrays,
relations as boolean arrays; sizes are inferred from the inputs' shapes or
given as `sizes={"n": 4}`.
"""

import ctypes
import json
import os
import subprocess
import tempfile

import numpy as np

__all__ = ["load", "load_library", "grad", "vjp", "AtlFunction"]


def _bin():
    return os.environ.get("ATL_EGG_BIN", "atl-egg")


def _atl(args, stdin=None):
    r = subprocess.run([_bin()] + args, input=stdin, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("atl-egg %s failed:\n%s" % (" ".join(args), r.stderr))
    return r.stdout


def _tokens(text):
    return text.replace("(", " ( ").replace(")", " ) ").split()


def _dim(expr, sizes):
    """Value of a manifest dimension (`n`, `3`, `(- (+ m n) 1)`, `(* 2 n)`)."""
    toks = _tokens(expr)

    def parse(k):
        t = toks[k]
        if t != "(":
            if t.lstrip("-").isdigit():
                return int(t), k + 1
            if t not in sizes:
                raise ValueError("size %s is not known (give it with sizes={...})" % t)
            return int(sizes[t]), k + 1
        op, k = toks[k + 1], k + 2
        args = []
        while toks[k] != ")":
            v, k = parse(k)
            args.append(v)
        if op == "+":
            return sum(args), k + 1
        if op == "-":
            return (args[0] - sum(args[1:])) if len(args) > 1 else -args[0], k + 1
        if op == "*":
            p = 1
            for a in args:
                p *= a
            return p, k + 1
        raise ValueError("unknown dimension form %r" % op)

    return parse(0)[0]


def _leaf(value, path):
    """The leaf of a (nested pair) input at `path` ("p.0.1" -> value[0][1])."""
    for step in path.split(".")[1:]:
        value = value[int(step)]
    return value


class AtlFunction:
    """A compiled ATL function: call it with the inputs by name or position."""

    def __init__(self, library_path, manifest):
        self.manifest = manifest
        self._lib = ctypes.CDLL(os.path.abspath(library_path))
        self._fn = getattr(self._lib, manifest["function"])
        self._fn.restype = ctypes.c_int
        types = {"int64_t": ctypes.c_int64, "double": ctypes.c_double}
        self._fn.argtypes = [types.get(p["c_type"], ctypes.c_void_p) for p in manifest["params"]] + [
            ctypes.c_void_p for _ in manifest["outputs"]
        ]
        self.sizes = [p["source"] for p in manifest["params"] if p["kind"] == "size"]
        self.inputs = []
        for p in manifest["params"]:
            root = p["source"].split(".")[0]
            if p["kind"] != "size" and root not in self.inputs:
                self.inputs.append(root)

    def __repr__(self):
        return "<AtlFunction %s(%s)>" % (self.manifest["function"], ", ".join(self.inputs))

    def __call__(self, *args, sizes=None, **kwargs):
        if len(args) > len(self.inputs):
            raise TypeError("%d inputs given, the function takes %d" % (len(args), len(self.inputs)))
        given = dict(zip(self.inputs, args))
        for k, v in kwargs.items():
            if k not in self.inputs:
                raise TypeError("unknown input %r (the inputs are %s)" % (k, ", ".join(self.inputs)))
            if k in given:
                raise TypeError("input %r given twice" % k)
            given[k] = v
        missing = [n for n in self.inputs if n not in given]
        if missing:
            raise TypeError("missing input(s): %s" % ", ".join(missing))

        # the leaves, as arrays of the right dtype
        leaves = {}
        for p in self.manifest["params"]:
            if p["kind"] == "size":
                continue
            v = _leaf(given[p["source"].split(".")[0]], p["source"])
            if p["kind"] == "real":
                leaves[p["source"]] = float(v)
            elif p["kind"] == "relation":
                leaves[p["source"]] = np.ascontiguousarray(np.asarray(v, dtype=bool), dtype=np.uint8)
            else:
                leaves[p["source"]] = np.ascontiguousarray(v, dtype=np.float64)

        # sizes: given, else from an input whose dimension is exactly that size
        known = dict(sizes or {})
        for s in self.sizes:
            if s in known:
                continue
            for p in self.manifest["params"]:
                if p["kind"] in ("tensor", "relation") and s in p["shape"]:
                    arr = leaves[p["source"]]
                    k = p["shape"].index(s)
                    if arr.ndim > k:
                        known[s] = arr.shape[k]
                        break
            if s not in known:
                raise ValueError("size %s cannot be inferred; give it with sizes={%r: ...}" % (s, s))

        call = []
        for p in self.manifest["params"]:
            if p["kind"] == "size":
                call.append(int(known[p["source"]]))
            elif p["kind"] == "real":
                call.append(leaves[p["source"]])
            else:
                arr = leaves[p["source"]]
                want = tuple(_dim(d, known) for d in p["shape"])
                if arr.shape != want:
                    raise ValueError(
                        "input %s has shape %s, expected %s" % (p["source"], arr.shape, want)
                    )
                call.append(arr.ctypes.data_as(ctypes.c_void_p))
        outs = []
        for o in self.manifest["outputs"]:
            arr = np.zeros(tuple(_dim(d, known) for d in o["shape"]), dtype=np.float64)
            outs.append(arr)
            call.append(arr.ctypes.data_as(ctypes.c_void_p))
        rc = self._fn(*call)
        if rc != 0:
            why = self.manifest.get("returns", {}).get(str(rc), "error code %d" % rc)
            raise RuntimeError("%s returned %d: %s" % (self.manifest["function"], rc, why))

        # reassemble pairs from the leaves ("out", "out.0", "out.1.0", ...)
        def build(prefix):
            for o, arr in zip(self.manifest["outputs"], outs):
                if o["leaf"] == prefix:
                    return float(arr) if arr.ndim == 0 else arr
            return (build(prefix + ".0"), build(prefix + ".1"))

        return build("out")


def load_library(library_path, manifest_path=None):
    """A compiled function from the `.so` and the `.json` manifest that
    `atl-egg compile -o F.so` and `-o F.json` wrote (the manifest defaults to
    the library's path with `.json`)."""
    if manifest_path is None:
        manifest_path = os.path.splitext(library_path)[0] + ".json"
    with open(manifest_path) as f:
        return AtlFunction(library_path, json.load(f))


def _compile_text(program_text, name):
    d = tempfile.mkdtemp(prefix="atl-egg-")
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
