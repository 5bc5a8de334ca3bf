#!/usr/bin/env python3
"""atl-egg against JAX and PyTorch: the one command.

    python3 benches/peers/run.py [--quick] [--threads 1|all|both] [--only prog,prog]

Standard library only.  It creates a virtual environment under
target/peers-venv (NumPy, JAX for CPU, PyTorch for CPU, maturin) unless
one is there, builds and installs the atl_egg package into it (pip install
of the repository, sharing target/ with cargo; quick when it is up to
date), then runs bench.py once per thread mode, each in its own
process (the thread settings must be in the environment before JAX and
PyTorch are imported), and prints the markdown table, also written to
target/peers/table.md with the raw results in target/peers/results-*.json.
Not part of CI.
"""

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VENV = os.path.join(ROOT, "target", "peers-venv")
OUT = os.path.join(ROOT, "target", "peers")
VPY = os.path.join(VENV, "bin", "python")

SINGLE_THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
}


def log(msg):
    print("[peers] " + msg, file=sys.stderr, flush=True)


def sh(cmd, **kw):
    log("$ " + " ".join(cmd))
    return subprocess.run(cmd, **kw)


def ensure_venv():
    if not os.path.exists(VPY):
        sh([sys.executable, "-m", "venv", VENV], check=True)
    have = subprocess.run([VPY, "-c", "import numpy, jax, torch, maturin"], capture_output=True)
    if have.returncode == 0:
        return
    pip = [VPY, "-m", "pip", "install", "--quiet"]
    sh(pip + ["numpy", "jax[cpu]", "maturin"], check=True)
    if subprocess.run([VPY, "-c", "import torch"], capture_output=True).returncode != 0:
        cpu = sh(pip + ["torch", "--index-url", "https://download.pytorch.org/whl/cpu"])
        if cpu.returncode != 0:
            log("the PyTorch CPU index is unreachable: installing torch from PyPI")
            sh(pip + ["torch"], check=True)


def ensure_package():
    """The atl_egg package, built from this checkout into the venv."""
    env = dict(os.environ, CARGO_TARGET_DIR=os.path.join(ROOT, "target"),
               PATH=os.path.join(VENV, "bin") + os.pathsep + os.environ.get("PATH", ""))
    r = sh([VPY, "-m", "pip", "install", "--quiet", "--no-build-isolation", "--force-reinstall",
            "--no-deps", ROOT], env=env)
    if r.returncode != 0:
        sys.exit("pip install of the atl_egg package failed")


def run_mode(threads, args):
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    if threads == "1":
        env.update(SINGLE_THREAD_ENV)
    out = os.path.join(OUT, "results-%s.json" % threads)
    cmd = [VPY, os.path.join(HERE, "bench.py"), "--threads", threads, "--out", out]
    if args.quick:
        cmd.append("--quick")
    if args.only:
        cmd += ["--only", args.only]
    t0 = time.perf_counter()
    sh(cmd, env=env, check=True)
    log("%s-thread run: %.0f s" % (threads, time.perf_counter() - t0))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer, smaller sizes (about 2 minutes)")
    ap.add_argument("--threads", choices=["1", "all", "both"], default="both")
    ap.add_argument("--only", default="", help="comma-separated program names")
    ap.add_argument("--no-medians", action="store_true", help="leave out the median tables")
    args = ap.parse_args()

    os.makedirs(OUT, exist_ok=True)
    ensure_venv()
    ensure_package()
    modes = ["1", "all"] if args.threads == "both" else [args.threads]
    files = [run_mode(m, args) for m in modes]

    import json

    sys.path.insert(0, HERE)
    import table

    results = []
    for path in files:
        with open(path) as f:
            results.append(json.load(f))
    command = "python3 benches/peers/run.py" + " ".join(
        [""]
        + (["--quick"] if args.quick else [])
        + (["--threads", args.threads] if args.threads != "both" else [])
        + (["--only", args.only] if args.only else [])
    )
    text = table.render(results, command, medians=not args.no_medians)
    with open(os.path.join(OUT, "table.md"), "w") as f:
        f.write(text)
    print(text)
    log("written: " + os.path.join(OUT, "table.md"))
    bad = [p["name"] for r in results for p in r["programs"] if not p["check"]["ok"]]
    if bad:
        log("cross-check FAILED for: " + ", ".join(sorted(set(bad))))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
