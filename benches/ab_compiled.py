#!/usr/bin/env python3
"""Two builds of one generated C function timed interleaved (CPU time, best
of REPS calls each, alternating), for before/after comparisons of the
lowering on a loaded machine.  NumPy only.

    atl-egg compile PROGRAM.atl -o after.c     (and before.c from the older build)
    cc -O3 -march=native -ffp-contract=off -fno-math-errno -fopenmp -DATL_SIMD \\
       -fPIC -shared X.c -o X.so -lm
    OMP_NUM_THREADS=1 python3 benches/ab_compiled.py before.so after.so FUNCTION \\
       SIZES INPUTS OUT [REPS]

SIZES are the C function's size arguments in its order (`n=1000000,m=9`
as `1000000,9`), INPUTS the lengths of its real inputs (`1000008,9,1000000`),
OUT the length of its result (lengths separated by commas for a result of
several leaves, such as a gradient with respect to several inputs); inputs are standard normal (seed 0).  Prints
one markdown row: before, after (ms), the speed-up and the largest
difference of the two results relative to the largest magnitude.
"""

import ctypes
import sys
import time

import numpy as np


def main():
    before, after, fn, sizes, inputs, out = sys.argv[1:7]
    reps = int(sys.argv[7]) if len(sys.argv) > 7 else 30
    rng = np.random.default_rng(0)
    sizes = [int(s) for s in sizes.split(",")]
    arrs = [rng.standard_normal(int(n)) for n in inputs.split(",")]
    res = [np.zeros(int(n)) for n in out.split(",")]

    def load(path):
        f = getattr(ctypes.CDLL(path), fn)
        args = [ctypes.c_int64(s) for s in sizes]
        args += [a.ctypes.data_as(ctypes.c_void_p) for a in arrs + res]
        return lambda: f(*args)

    a, b = load(before), load(after)
    a()
    ra = np.concatenate(res)
    b()
    rb = np.concatenate(res)
    rel = np.max(np.abs(ra - rb)) / max(np.max(np.abs(ra)), 1e-300)
    ta, tb = [], []
    for _ in range(reps):
        for f, t in ((a, ta), (b, tb)):
            t0 = time.process_time()
            f()
            t.append(time.process_time() - t0)
    print(f"| {fn} | {min(ta) * 1e3:.2f} | {min(tb) * 1e3:.2f} | {min(ta) / min(tb):.2f}x | {rel:.1e} |")


if __name__ == "__main__":
    main()
