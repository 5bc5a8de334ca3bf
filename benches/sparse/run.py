"""Sparse programs on random graphs: atl-egg against PyTorch and JAX.

Programs (each a loss and its gradient):

* graph_smoothness (corpus/graph_smoothness.atl): the gradient w.r.t. x;
* gcn_mean (benches/sparse/gcn_mean.atl): relu(Â X W) with mean
  aggregation over the out-edges and a squared loss, w.r.t. W and X
  (f = 16 input and h = 16 output features);
* mesh_laplacian (benches/sparse/mesh_laplacian.atl): the Dirichlet energy
  of 3-d vertex positions over the edges, w.r.t. x;
* sparse_matvec (corpus/sparse_matvec_stored.atl): the least squares
  residual |A x - y|^2 of a square matrix A stored by its pattern S (the
  graph's edges, one value per edge), w.r.t. A (one value per edge) and x.

Graphs: n nodes, about 10 distinct out-edges per node, given as sorted
tuples. atl-egg is timed twice: `atl-egg`, with the graph prepared once for
each compiled function outside the timed calls (`f.prepare("E", tuples)`:
its tuples checked and its layouts built, the transposed one included,
as a sparse library keeps CSR and CSC forms of a fixed graph; PyTorch and
JAX likewise get the deduplicated pairs of graph_smoothness computed once),
and `atl-egg-per-call`, with the tuples given to every call, which checks
them and builds the layouts in the timed call. Not run in CI. PyTorch and
JAX (CPU) go in a throwaway environment:

    cargo build --release
    python3 -m venv /tmp/sparse-venv
    /tmp/sparse-venv/bin/pip install numpy jax torch
    ATL_EGG_BIN=target/release/atl-egg /tmp/sparse-venv/bin/python \\
        benches/sparse/run.py [--nodes 10000,100000,1000000] \\
        [--tools atl-egg,atl-egg-per-call,torch,jax] [--programs graph_smoothness,...]

Every measurement runs in its own process, on one thread (OMP_NUM_THREADS=1,
torch.set_num_threads(1), XLA's CPU client on one thread): the values are
cross-checked against atl-egg's first (relative 1e-6), then the time is the
CPU time (user + system, all the process's threads) of the best of three
calls after a warm-up call (JAX's compilation is in the warm-up), which a
machine shared with other jobs distorts less than wall time; the memory is
the process's peak resident size (VmHWM, reset once the inputs are built
and prepared) minus its size then: the calls' own, the warm-up's included
(the prepared layouts, like JAX's pairs, are built before).
A framework that is not installed is left out. Prints a Markdown table.
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
PROGRAMS = {
    "graph_smoothness": (os.path.join(ROOT, "corpus", "graph_smoothness.atl"), ["x"]),
    "gcn_mean": (os.path.join(HERE, "gcn_mean.atl"), ["W", "X"]),
    "mesh_laplacian": (os.path.join(HERE, "mesh_laplacian.atl"), ["x"]),
    "sparse_matvec": (os.path.join(ROOT, "corpus", "sparse_matvec_stored.atl"), ["A", "x"]),
}
# the relation's name in each program (E unless listed)
RELATION = {"sparse_matvec": "S"}
EDGES_PER_NODE = 10
FEATURES = 16


def random_graph(n, seed):
    """About 10 distinct out-edges per node, as sorted (nnz, 2) tuples."""
    rng = np.random.default_rng(seed)
    dst = np.sort(rng.integers(0, n, size=(n, EDGES_PER_NODE), dtype=np.int64), axis=1)
    keep = np.ones(dst.shape, dtype=bool)
    keep[:, 1:] = dst[:, 1:] != dst[:, :-1]
    src = np.broadcast_to(np.arange(n, dtype=np.int64)[:, None], dst.shape)
    return np.stack([src[keep], dst[keep]], axis=1)


def inputs(program, n, seed=0):
    tuples = random_graph(n, seed)
    rng = np.random.default_rng(seed + 1)
    if program == "graph_smoothness":
        return tuples, {"x": rng.uniform(-1, 1, n), "lam": 0.5}
    if program == "gcn_mean":
        return tuples, {"X": rng.uniform(-1, 1, (n, FEATURES)),
                        "W": rng.uniform(-1, 1, (FEATURES, FEATURES)) / FEATURES}
    if program == "sparse_matvec":
        return tuples, {"A": rng.uniform(-1, 1, len(tuples)), "x": rng.uniform(-1, 1, n),
                        "y": rng.uniform(-1, 1, n)}
    return tuples, {"x": rng.uniform(-1, 1, (n, 3))}


def smoothness_pairs(tuples, n):
    """The pairs i < j with (i, j) or (j, i) an edge, each once (a property
    of the graph, computed once outside the timed calls of the
    frameworks, as atl-egg's compressed layout is not)."""
    a, b = np.minimum(tuples[:, 0], tuples[:, 1]), np.maximum(tuples[:, 0], tuples[:, 1])
    key = np.unique(a[a < b] * n + b[a < b])
    return key // n, key % n


# --- atl-egg ---------------------------------------------------------------

def atl_egg_fns(program, n, tuples, args, prepared=True):
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import atl_egg
    path, wrt = PROGRAMS[program]
    f = atl_egg.load(path)
    g = atl_egg.grad(path, wrt=wrt)
    sizes = {"gcn_mean": {"n": n, "f": FEATURES, "h": FEATURES},
             "sparse_matvec": {"n": n, "m": n}}.get(program, {"n": n})

    name = RELATION.get(program, "E")
    rel_f = rel_g = {name: tuples}
    if prepared:  # once, outside the timed calls
        rel_f = {name: f.prepare(name, tuples, sizes=sizes)}
        rel_g = {name: g.prepare(name, tuples, sizes=sizes)}

    def grad():
        out = g(sizes=sizes, **rel_g, **args)
        return list(out) if isinstance(out, tuple) else [out]
    return (lambda: f(sizes=sizes, **rel_f, **args)), grad


def atl_egg_per_call_fns(program, n, tuples, args):
    return atl_egg_fns(program, n, tuples, args, prepared=False)


# --- PyTorch ---------------------------------------------------------------

def torch_fns(program, n, tuples, args):
    import torch
    torch.set_num_threads(1)
    src = torch.from_numpy(tuples[:, 0].copy())
    dst = torch.from_numpy(tuples[:, 1].copy())
    t = {k: torch.tensor(v, dtype=torch.float64) for k, v in args.items()}
    wrt = PROGRAMS[program][1]
    if program == "graph_smoothness":
        i, j = (torch.from_numpy(c) for c in smoothness_pairs(tuples, n))

    def loss(v):
        if program == "graph_smoothness":
            x = v["x"]
            has_out = torch.zeros(n, dtype=torch.float64).index_fill_(0, src, 1.0)
            return ((x[i] - x[j]) ** 2).sum() + v["lam"] * (has_out * x * x).sum()
        if program == "gcn_mean":
            xw = v["X"] @ v["W"]
            deg = torch.zeros(n, dtype=torch.float64).index_add_(0, src, torch.ones(len(src), dtype=torch.float64))
            agg = torch.zeros(n, xw.shape[1], dtype=torch.float64).index_add_(0, src, xw[dst])
            z = torch.relu(agg / (1.0 + deg)[:, None])
            return (z * z).sum()
        if program == "sparse_matvec":
            ax = torch.zeros(n, dtype=torch.float64).index_add_(0, src, v["A"] * v["x"][dst])
            r = ax - v["y"]
            return (r * r).sum()
        d = v["x"][src] - v["x"][dst]
        return 0.5 * (d * d).sum()

    def f():
        with torch.no_grad():
            return float(loss(t))

    def grad():
        v = {k: (x.clone().requires_grad_(True) if k in wrt else x) for k, x in t.items()}
        gs = torch.autograd.grad(loss(v), [v[k] for k in wrt])
        return [x.numpy() for x in gs]
    return f, grad


# --- JAX -------------------------------------------------------------------

def jax_fns(program, n, tuples, args):
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    src, dst = jnp.asarray(tuples[:, 0]), jnp.asarray(tuples[:, 1])
    wrt = PROGRAMS[program][1]
    if program == "graph_smoothness":
        pi, pj = (jnp.asarray(c) for c in smoothness_pairs(tuples, n))

    def loss(v):
        if program == "graph_smoothness":
            x = v["x"]
            has_out = jnp.zeros(n).at[src].set(1.0)
            return ((x[pi] - x[pj]) ** 2).sum() + v["lam"] * (has_out * x * x).sum()
        if program == "gcn_mean":
            xw = v["X"] @ v["W"]
            deg = jax.ops.segment_sum(jnp.ones(src.shape[0]), src, num_segments=n, indices_are_sorted=True)
            agg = jax.ops.segment_sum(xw[dst], src, num_segments=n, indices_are_sorted=True)
            z = jax.nn.relu(agg / (1.0 + deg)[:, None])
            return (z * z).sum()
        if program == "sparse_matvec":
            ax = jax.ops.segment_sum(v["A"] * v["x"][dst], src, num_segments=n, indices_are_sorted=True)
            r = ax - v["y"]
            return (r * r).sum()
        d = v["x"][src] - v["x"][dst]
        return 0.5 * (d * d).sum()

    vals = {k: jnp.asarray(x) for k, x in args.items()}
    fj = jax.jit(loss)
    gj = jax.jit(jax.grad(lambda w, rest: loss({**rest, **w})))
    w = {k: vals[k] for k in wrt}
    rest = {k: x for k, x in vals.items() if k not in wrt}

    def grad():
        out = gj(w, rest)
        return [np.asarray(out[k].block_until_ready()) for k in wrt]
    return (lambda: float(fj(vals).block_until_ready())), grad


TOOLS = {"atl-egg": atl_egg_fns, "atl-egg-per-call": atl_egg_per_call_fns, "torch": torch_fns,
         "jax": jax_fns}


def rss_kb(field="VmRSS"):
    """The process's resident size (or its peak, VmHWM), in kB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise SystemExit("no %s in /proc/self/status" % field)


def reset_peak():
    """Reset the process's peak resident size (VmHWM) to its current size,
    so that the peak measured is the calls' own, not that of building and
    preparing the inputs (Linux: /proc/self/clear_refs; else unchanged)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def measure(tool, program, n, mode, check):
    """One measurement (run in a child process): prints JSON."""
    tuples, args = inputs(program, n)
    f, g = TOOLS[tool](program, n, tuples, args)
    run = f if mode == "f" else g
    reset_peak()
    base = rss_kb()
    value = run()  # warm-up (compiles, for JAX)
    if check:
        want = np.load(check, allow_pickle=True)
        got = [np.asarray(value, dtype=np.float64)] if mode == "f" else value
        for a, b in zip(got, want):
            err = np.max(np.abs(a - b)) / max(1.0, np.max(np.abs(b)))
            if not err <= 1e-6:
                raise SystemExit("%s %s %s n=%d: differs from atl-egg by %.3g" % (tool, program, mode, n, err))
    times = []
    for _ in range(3):
        t = time.process_time()
        run()
        times.append(time.process_time() - t)
    peak = rss_kb("VmHWM")
    if not check:
        got = [np.asarray(value, dtype=np.float64)] if mode == "f" else value
        out = "/tmp/atl-egg-sparse-%s-%s-%d.npy" % (program, mode, n)
        arr = np.empty(len(got), dtype=object)
        arr[:] = got
        np.save(out, arr, allow_pickle=True)
        print(json.dumps({"time": min(times), "mem_mb": max(peak - base, 0) / 1024, "values": out}))
    else:
        print(json.dumps({"time": min(times), "mem_mb": max(peak - base, 0) / 1024}))


def installed(tool):
    if tool.startswith("atl-egg"):
        return True
    return importlib.util.find_spec("torch" if tool == "torch" else "jax") is not None


def child(tool, program, n, mode, check=None):
    cmd = [sys.executable, __file__, "--child", tool, program, str(n), mode] + ([check] if check else [])
    env = dict(os.environ, OMP_NUM_THREADS="1",
               XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit("%s failed:\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", default="10000,100000,1000000")
    ap.add_argument("--tools", default="atl-egg,atl-egg-per-call,torch,jax")
    ap.add_argument("--programs", default=",".join(PROGRAMS))
    ap.add_argument("--child", nargs="+")
    a = ap.parse_args()
    if a.child:
        tool, program, n, mode = a.child[:4]
        measure(tool, program, int(n), mode, a.child[4] if len(a.child) > 4 else None)
        return
    tools = [t for t in a.tools.split(",") if installed(t)]
    print("| program | nodes | edges | " + " | ".join(
        "%s %s" % (t, m) for m in ("f", "gradient") for t in tools) + " |")
    print("| --- | ---: | ---: | " + " | ".join("---:" for _ in range(2 * len(tools))) + " |")
    for program in a.programs.split(","):
        for n in [int(k) for k in a.nodes.split(",")]:
            cells = []
            for mode in ("f", "gradient"):
                ref = child("atl-egg", program, n, mode)
                for t in tools:
                    r = ref if t == "atl-egg" else child(t, program, n, mode, ref["values"])
                    cells.append("%.3g s, %.0f MB" % (r["time"], r["mem_mb"]))
                os.unlink(ref["values"])
            edges = len(random_graph(n, 0))
            print("| %s | %d | %d | %s |" % (program, n, edges, " | ".join(cells)))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
