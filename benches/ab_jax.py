#!/usr/bin/env python3
"""Compiled functions of `benches/peers/` against `jax.jit`, interleaved in
CPU time, for comparisons on a loaded machine (where the peers benchmark's
wall times move with other processes' load).  One thread: the process is
pinned to one CPU and XLA is told to run single-threaded, as
`benches/peers/run.py --threads 1` does.

    atl-egg optimize benches/peers/programs/PROGRAM.atl -o f.atl
    atl-egg compile f.atl -o after.c            (and before.c from the older build)
    cc -O3 -march=native -ffp-contract=off -fno-math-errno -fopenmp -DATL_SIMD \\
       -fPIC -shared X.c -o X.so -lm
    target/peers-venv/bin/python benches/ab_jax.py PROGRAM SIZE REPS before.so after.so

PROGRAM is a program of benches/peers/programs.py, SIZE the index of its
size in the full run (-1: the largest); each library is called through its
`atl_PROGRAM` entry with the peers benchmark's inputs.  Every round calls
each library and the jitted JAX function once; prints the best CPU time of
each and JAX's time divided by each library's, and the largest difference
of each library's value to JAX's (relative to JAX's largest magnitude).

With `--grad` after REPS, the libraries are the gradient's
(`atl-egg grad --wrt` the program's `wrt: ...` inputs, comma-separated, then
compiled as above) and JAX's function is `jax.jit(jax.grad(f))` in those
inputs.
"""

import ctypes
import os
import re
import sys
import time

os.environ["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
os.environ["OMP_NUM_THREADS"] = "1"
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))
import programs  # noqa: E402


def main():
    name, size_at, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    grad = sys.argv[4:5] == ["--grad"]
    libs = sys.argv[5:] if grad else sys.argv[4:]
    programs.bind()
    import jax

    prog = next(p for p in programs.PROGRAMS if p.name == name)
    size = prog.full[size_at]
    inputs = [np.ascontiguousarray(a, dtype=np.float64) for a in prog.make_inputs(size, np.random.default_rng(0))]
    sizes = [size[k] for k in sizes_of(prog.atl)]
    wrt = tuple(prog.params.index(w) for w in prog.wrt)
    outs = [np.zeros_like(inputs[i]) for i in wrt] if grad else [np.zeros(1)]
    calls = []
    for path in libs:
        f = getattr(ctypes.CDLL(os.path.abspath(path)), "atl_" + name)
        args = [ctypes.c_int64(s) for s in sizes] + [a.ctypes.data_as(ctypes.c_void_p) for a in inputs]
        args += [o.ctypes.data_as(ctypes.c_void_p) for o in outs]
        calls.append((path, lambda f=f, args=args: (f(*args), [o.copy() for o in outs])[1]))
    jin = [jax.numpy.asarray(a) for a in inputs]
    if grad:
        jg = jax.jit(jax.grad(prog.jax_f, argnums=wrt))
        calls.append(("jax.jit(grad)", lambda: [np.asarray(g) for g in jax.block_until_ready(jg(*jin))]))
    else:
        jf = jax.jit(prog.jax_f)
        calls.append(("jax.jit", lambda: [np.asarray([float(jf(*jin).block_until_ready())])]))
    values = [c() for _, c in calls]
    best = [float("inf")] * len(calls)
    for _ in range(reps):
        for n, (_, c) in enumerate(calls):
            t0 = time.process_time()
            c()
            best[n] = min(best[n], time.process_time() - t0)
    jax_t, jax_v = best[-1], values[-1]
    label = ("grad " if grad else "") + prog.label(size)
    for n, (path, _) in enumerate(calls):
        rel = max(
            float(np.max(np.abs(a - b))) / max(float(np.max(np.abs(b))), 1e-300) for a, b in zip(values[n], jax_v)
        )
        print(f"| {name} {label} | {path} | {best[n] * 1e3:.2f} ms | {jax_t / best[n]:.2f} | {rel:.1e} |")


def sizes_of(path):
    """The size names of the ATL function, in the order of first use in its
    parameters' types (the C function's size arguments)."""
    text = "\n".join(line.split(";")[0] for line in open(path))
    names = []
    for dims in re.findall(r"\(tensor ((?:[A-Za-z_]\w* )+)", text):
        for d in dims.split():
            if d not in names and d != "tensor":
                names.append(d)
    return names


if __name__ == "__main__":
    main()
