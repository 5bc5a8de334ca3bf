"""Time and peak memory of the compiled `sparse_matvec_stored` (corpus/) and
its gradient with respect to A and x, the matrix stored by its pattern
(about 10 tuples a row, n = m), called through the ctypes loader
(python/atl_egg.py) on the compiled code `run` calls. Each (n, function)
runs in a process of its own, whose peak resident memory is reported; the
time is the best of 10 calls, from Python (the loader checks the arguments
and builds the relation's layout on every call) and of the compiled
function alone (arguments marshalled once).

    OMP_NUM_THREADS=1 ATL_EGG_BIN=target/release/atl-egg python3 benches/stored/scaling.py

(NumPy needed; one 2-core machine, nothing else timed by this.)"""

import json
import os
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROGRAM = os.path.join(ROOT, "corpus", "sparse_matvec_stored.atl")
PER_ROW = 10
REPEAT = 10


def one(n, which):
    import numpy as np
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import atl_egg
    f = atl_egg.load(PROGRAM) if which == "f" else atl_egg.grad(PROGRAM, wrt=["A", "x"])
    rng = np.random.default_rng(n)
    rows = np.repeat(np.arange(n, dtype=np.int64), PER_ROW)
    cols = rng.integers(0, n, n * PER_ROW)
    key = np.unique(rows * n + cols)  # sorted, distinct
    S = np.stack([key // n, key % n], axis=1)
    A = rng.uniform(-1, 1, len(S))
    x, y = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = []
    for _ in range(REPEAT):
        t = time.perf_counter()
        f(A=A, S=S, x=x, y=y)
        times.append(time.perf_counter() - t)
    # the compiled function alone, its arguments marshalled once
    import ctypes
    layout = atl_egg._compressed_layout(S, (n, n))
    outs = [np.zeros(1)] if which == "f" else [np.zeros(len(S)), np.zeros(n)]
    ptr = lambda a: a.ctypes.data_as(ctypes.c_void_p)  # noqa: E731
    args = [n, n, ptr(A), ptr(layout), ptr(x), ptr(y)] + [ptr(o) for o in outs]
    native = []
    for _ in range(REPEAT):
        t = time.perf_counter()
        assert f._fn(*args) == 0
        native.append(time.perf_counter() - t)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"n": n, "nnz": len(S), "which": which, "best_s": min(times), "native_s": min(native),
            "peak_mib": peak / 1024, "inputs_mib": (S.nbytes + A.nbytes + x.nbytes + y.nbytes) / 2**20,
            "before_calls_mib": base / 1024}


def main():
    if len(sys.argv) == 3:
        print(json.dumps(one(int(sys.argv[1]), sys.argv[2])))
        return
    print("| n = m | nnz | function | call from Python | compiled code alone | peak memory | inputs |")
    print("| ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    for n in (10**4, 10**5, 10**6):
        for which in ("f", "grad"):
            out = subprocess.run([sys.executable, __file__, str(n), which],
                                 capture_output=True, text=True, check=True).stdout
            r = json.loads(out)
            print("| %d | %d | %s | %.3g ms | %.3g ms | %.0f MiB | %.0f MiB |" % (
                r["n"], r["nnz"], "f" if which == "f" else "grad (A, x)",
                r["best_s"] * 1e3, r["native_s"] * 1e3, r["peak_mib"], r["inputs_mib"]))


if __name__ == "__main__":
    main()
