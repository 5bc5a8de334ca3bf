"""Time the graph smoothness loss (corpus/graph_smoothness.atl) and its
gradient with respect to x, compiled by atl-egg and called through the
Python loader, on random graphs of 10^4, 10^5 and 10^6 nodes with about 10
edges per node (given as tuples, so the compressed layout is built in
linear time). Not run in CI.

    cargo build --release
    ATL_EGG_BIN=target/release/atl-egg python3 benches/sparse/run.py [--nodes 10000,100000,1000000]

Each time is the best of three calls (after one warm-up call); the
relation's conversion to the compressed layout happens inside each call and
is included. Prints a Markdown table. A run the machine cannot hold (the
gradient materializes a dense n x n intermediate) is reported as such.
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import atl_egg  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
PROGRAM = os.path.join(ROOT, "corpus", "graph_smoothness.atl")
EDGES_PER_NODE = 10
# The gradient's adjoint of the edge differences is a dense n x n tensor
# (zero off the edges): it is run only where that fits in this much memory.
MAX_INTERMEDIATE_BYTES = 1 << 30


def random_graph(n, rng):
    """About 10 distinct out-edges per node, as (nnz, 2) tuples."""
    src = np.repeat(np.arange(n, dtype=np.int64), EDGES_PER_NODE)
    dst = rng.integers(0, n, size=src.size, dtype=np.int64)
    tuples = np.unique(np.stack([src, dst], axis=1), axis=0)
    return tuples


def best_of(f, repeat=3):
    f()  # warm-up
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        value = f()
        times.append(time.perf_counter() - t)
    return min(times), value


def reference(tuples, x, lam):
    """The loss in NumPy, to cross-check the compiled value."""
    n = len(x)
    i, j = tuples[:, 0], tuples[:, 1]
    keep = i < j
    pairs = {(a, b) for a, b in zip(i[keep].tolist(), j[keep].tolist())}
    back = i > j
    pairs |= {(b, a) for a, b in zip(i[back].tolist(), j[back].tolist())}
    p = np.array(sorted(pairs), dtype=np.int64).reshape(-1, 2)
    smooth = np.sum((x[p[:, 0]] - x[p[:, 1]]) ** 2)
    has_out = np.zeros(n, dtype=bool)
    has_out[i] = True
    return smooth + lam * np.sum(x[has_out] ** 2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", default="10000,100000,1000000")
    args = ap.parse_args()
    f = atl_egg.load(PROGRAM)
    g = atl_egg.grad(PROGRAM, wrt=["x"])
    rng = np.random.default_rng(0)
    print("| nodes | edges | f | f (NumPy, set-based reference) | gradient |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for n in [int(k) for k in args.nodes.split(",")]:
        tuples = random_graph(n, rng)
        x = rng.uniform(-1, 1, n)
        lam = 0.5
        tf, value = best_of(lambda: f(E=tuples, x=x, lam=lam, sizes={"n": n}))
        t0 = time.perf_counter()
        want = reference(tuples, x, lam)
        tref = time.perf_counter() - t0
        if abs(value - want) > 1e-8 * max(1.0, abs(want)):
            raise SystemExit("n = %d: compiled %r, reference %r" % (n, value, want))
        if n * n * 8 > MAX_INTERMEDIATE_BYTES:
            grad = "not run: its dense n x n intermediate needs %.3g GB" % (n * n * 8 / 1e9)
        else:
            tg, _ = best_of(lambda: g(E=tuples, x=x, lam=lam, sizes={"n": n}))
            grad = "%.3g s" % tg
        print("| %d | %d | %.3g s | %.3g s | %s |" % (n, len(tuples), tf, tref, grad))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
