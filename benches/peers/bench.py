"""One thread mode of the benchmark, in one process with one timer.

    python bench.py --threads 1|all [--quick] [--only a,b] --out results.json

Run by run.py inside the virtual environment, with the thread settings
already in the environment (they must be set before JAX and PyTorch are
imported).  For each program: compile the atl-egg function and gradient
through the atl_egg package (its compiler in the process, no subprocess),
cross-check the values of the three systems at
a small size, then time f and the gradient of each system at each size.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

if "--threads" in sys.argv and sys.argv[sys.argv.index("--threads") + 1 :][:1] == ["1"]:
    # XLA's CPU client starts its own thread pool whatever XLA_FLAGS say
    # (measured: a 1024x512x512 product ran on 1.9 cores with the flags
    # set), so the single-threaded mode also pins the process to one CPU
    # before JAX, PyTorch or the compiled code start any thread.
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import atl_egg  # noqa: E402
import programs  # noqa: E402

if not hasattr(atl_egg, "Function"):  # the ctypes loader python/atl_egg.py, not the package
    sys.exit("`import atl_egg` found %s, not the atl_egg package" % atl_egg.__file__)

SYSTEMS = ("atl", "jax", "torch")
CHECK_RTOL = 1e-8


class Budget:
    """Limits that keep a run short: repeat a measurement until `min_time`
    has passed (at least `min_reps` and at most `max_reps` calls), and skip a
    size when the previous size's time, scaled as N^2, predicts more than
    `call_limit` seconds per call or `first_limit` for the first call (its
    compile part taken to grow as N: the skipped-element sum's JAX program
    has N operations).  A call slower than `slow` seconds is repeated once."""

    def __init__(self, quick):
        self.min_time = 0.3 if quick else 1.0
        self.min_reps = 3 if quick else 5
        self.max_reps = 200
        self.call_limit = 2.0 if quick else 40.0
        self.first_limit = 20.0 if quick else 90.0
        self.slow = 1.0 if quick else 5.0


def timed(call, budget):
    """First call (compile, caches) timed alone, then repeated calls:
    returns first, best, median in seconds and the number of repeats."""
    t0 = time.perf_counter()
    call()
    first = time.perf_counter() - t0
    times = []
    min_reps = 1 if first > budget.slow else budget.min_reps
    start = time.perf_counter()
    while len(times) < budget.max_reps and (
        len(times) < min_reps or time.perf_counter() - start < budget.min_time
    ):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    times.sort()
    return {"first": first, "best": times[0], "median": times[len(times) // 2], "reps": len(times)}


def flatten(g):
    """A gradient as a list of arrays (one, or a tuple of several)."""
    if isinstance(g, (tuple, list)):
        out = []
        for x in g:
            out.extend(flatten(x))
        return out
    return [np.asarray(g, dtype=np.float64)]


def rel_err(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scale = max(float(np.max(np.abs(b))) if b.size else 0.0, 1e-300)
    return float(np.max(np.abs(a - b))) / scale if a.size else 0.0


class Systems:
    """The three systems' f and gradient for one program, as callables
    over one size's inputs that block until their results are ready."""

    def __init__(self, prog, jax, torch):
        self.prog, self.jax, self.torch = prog, jax, torch
        self.argnums = tuple(prog.params.index(w) for w in prog.wrt)
        t0 = time.perf_counter()
        # f as atl-egg's user runs it, optimized (as jax.jit(f) is by XLA);
        # the gradient is optimized by `grad` itself. Neither checks that its
        # inputs are finite (JAX and PyTorch do not): the check reads every
        # input once more, see README.md
        source = atl_egg.load(prog.atl, check_finite=False)
        self.atl_f = source.optimize().compile()
        t1 = time.perf_counter()
        self.atl_g = atl_egg.grad(source, wrt=list(prog.wrt)).compile()
        t2 = time.perf_counter()
        self.atl_compile = {"f": t1 - t0, "grad": t2 - t1}
        self.jax_f = jax.jit(prog.jax_f)
        self.jax_g = jax.jit(jax.grad(prog.jax_f, argnums=self.argnums))

    def calls(self, arrays):
        jax, torch, prog = self.jax, self.torch, self.prog
        named = dict(zip(prog.params, arrays))
        jx = [jax.device_put(a) for a in arrays]
        tx = [torch.from_numpy(a) for a in arrays]

        def torch_grad():
            leaves = [t.detach().requires_grad_(i in self.argnums) for i, t in enumerate(tx)]
            loss = prog.torch_f(*leaves)
            return torch.autograd.grad(loss, [leaves[i] for i in self.argnums])

        def torch_f():
            with torch.no_grad():
                return prog.torch_f(*tx)

        return {
            ("atl", "f"): lambda: self.atl_f(**named),
            ("atl", "grad"): lambda: self.atl_g(**named),
            ("jax", "f"): lambda: self.jax_f(*jx).block_until_ready(),
            ("jax", "grad"): lambda: jax.block_until_ready(self.jax_g(*jx)),
            ("torch", "f"): torch_f,
            ("torch", "grad"): torch_grad,
        }


def call_overhead(budget):
    """The atl_egg package's cost of one call beyond the compiled code: a
    function that reads one element of a one-element array, best and
    median seconds (binding, checks, output allocation, the native call)."""
    f = atl_egg.load("(fn overhead ((x (tensor n R))) (get x 0))").compile()
    x = np.ones(1)
    return timed(lambda: f(x), budget)


def cross_check(sys_, size, rng):
    """Values and gradients of the three systems at a small size: the
    largest relative difference of atl-egg and of PyTorch from JAX."""
    arrays = sys_.prog.make_inputs(size, rng)
    calls = sys_.calls(arrays)
    f = {s: float(np.asarray(calls[(s, "f")]())) for s in SYSTEMS}
    g = {}
    for s in SYSTEMS:
        out = calls[(s, "grad")]()
        g[s] = [np.asarray(x.detach().numpy() if hasattr(x, "detach") else x) for x in flatten(out)]
    err = {}
    for s in ("atl", "torch"):
        e = rel_err(f[s], f["jax"])
        for a, b in zip(g[s], g["jax"]):
            e = max(e, rel_err(a, b))
        err[s] = e
    ok = all(v <= CHECK_RTOL for v in err.values())
    return {"f": f, "err": err, "ok": ok, "size": sys_.prog.label(size)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", choices=["1", "all"], required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    import jax
    import torch

    programs.bind()
    jax.config.update("jax_enable_x64", True)
    if args.threads == "1":
        torch.set_num_threads(1)
        torch.set_num_interop_threads(1)
    budget = Budget(args.quick)
    only = [s for s in args.only.split(",") if s]
    selected = [p for p in programs.PROGRAMS if not only or p.name in only]

    results = {
        "threads": args.threads,
        "quick": args.quick,
        "torch_threads": torch.get_num_threads(),
        "cpus": sorted(os.sched_getaffinity(0)),
        "versions": {"jax": jax.__version__, "torch": torch.__version__, "numpy": np.__version__},
        "programs": [],
        "atl_call_overhead": call_overhead(budget),
    }
    print("atl_egg call overhead: best %.3g us, median %.3g us"
          % (results["atl_call_overhead"]["best"] * 1e6, results["atl_call_overhead"]["median"] * 1e6),
          file=sys.stderr, flush=True)
    for prog in selected:
        print("[%s threads] %s" % (args.threads, prog.name), file=sys.stderr, flush=True)
        rng = np.random.default_rng(20261123)
        sys_ = Systems(prog, jax, torch)
        entry = {
            "name": prog.name,
            "kind": prog.kind,
            "note": prog.note,
            "wrt": prog.wrt,
            "atl_compile": sys_.atl_compile,
            "check": cross_check(sys_, prog.check, rng),
            "sizes": [],
        }
        print("  check: %s" % json.dumps(entry["check"]["err"]), file=sys.stderr, flush=True)
        last = {}  # (system, f|grad) -> (N, timing) of the last size measured
        for size in prog.full if not args.quick else prog.quick:
            arrays = prog.make_inputs(size, rng)
            calls = sys_.calls(arrays)
            row = {"label": prog.label(size), "N": size["N"], "size": size, "t": {}}
            for key, call in calls.items():
                prev = last.get(key)
                if prev is not None:
                    scale = (size["N"] / prev[0]) ** 2
                    if prev[1] is None:
                        row["t"]["%s.%s" % key] = {"skipped": "a smaller size was skipped"}
                        continue
                    # the run time scales (at worst) as N^2, the compile part of the first call as N
                    pc = prev[1]["median"] * scale
                    pf = max(prev[1]["first"] - prev[1]["median"], 0.0) * size["N"] / prev[0] + pc
                    if pc > budget.call_limit or pf > budget.first_limit:
                        row["t"]["%s.%s" % key] = {
                            "skipped": "predicted %.3g s per call, %.3g s first (N^2 from N=%d)"
                            % (pc, pf, prev[0])
                        }
                        last[key] = (prev[0], None)
                        continue
                t = timed(call, budget)
                row["t"]["%s.%s" % key] = t
                last[key] = (size["N"], t)
                print(
                    "  %-12s %-6s %-5s first %.3g s  best %.3g s  median %.3g s  (%d reps)"
                    % (row["label"], key[0], key[1], t["first"], t["best"], t["median"], t["reps"]),
                    file=sys.stderr,
                    flush=True,
                )
            entry["sizes"].append(row)
        results["programs"].append(entry)
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
