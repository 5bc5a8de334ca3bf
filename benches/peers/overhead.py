"""The cost of one call beyond the compiled code, for the two ways of
calling atl-egg from Python: the `atl_egg` package (the compiler and the
loader in a Python extension) and the ctypes loader `python/atl_egg.py`
(over the `atl-egg` binary). Each calls the same one-element function,
`(fn overhead ((x (tensor n R))) (get x 0))`, whose compiled code does
one load: what is timed is binding the arguments, checking them,
allocating the output, the native call and building the result.

    python3 benches/peers/overhead.py [--number 2000] [--repeat 200]

Run it with a Python that has the package installed (`pip install .`)
and with `ATL_EGG_BIN` naming the binary (default: target/release/atl-egg,
else `atl-egg` on the PATH). Each figure is the best and the median over
`--repeat` timings of `--number` calls each, per call, in microseconds.
"""

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import timeit

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PROGRAM = "(fn overhead ((x (tensor n R))) (get x 0))\n"


def ctypes_loader():
    """python/atl_egg.py as a module of another name (the package is
    `atl_egg` too)."""
    if "ATL_EGG_BIN" not in os.environ:
        built = os.path.join(ROOT, "target", "release", "atl-egg")
        if os.path.exists(built):
            os.environ["ATL_EGG_BIN"] = built
    spec = importlib.util.spec_from_file_location(
        "atl_egg_ctypes", os.path.join(ROOT, "python", "atl_egg.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def per_call(fn, number, repeat):
    times = [t / number * 1e6 for t in timeit.repeat(fn, number=number, repeat=repeat)]
    return min(times), statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--number", type=int, default=2000, help="calls per timing")
    ap.add_argument("--repeat", type=int, default=200, help="timings")
    args = ap.parse_args()

    import atl_egg

    if not hasattr(atl_egg, "Function"):
        sys.exit("`import atl_egg` found %s, not the package: pip install . first"
                 % atl_egg.__file__)
    x = np.ones(1)
    package = atl_egg.load(PROGRAM).compile()
    loader = ctypes_loader()
    with tempfile.TemporaryDirectory(prefix="atl-egg-overhead-") as d:
        path = os.path.join(d, "overhead.atl")
        with open(path, "w") as f:
            f.write(PROGRAM)
        old = loader.load(path)
    assert package(x) == old(x) == 1.0

    # the package's native call alone, on buffers made once: its floor
    kernel, out = package._kernel, np.zeros(1)

    def native():
        kernel.call([1], [x], [out], None)

    rows = [
        ("`atl_egg` package, `f(x)`", lambda: package(x)),
        ("ctypes loader `python/atl_egg.py`, `f(x)`", lambda: old(x)),
        ("the package's native call alone (buffers made once)", native),
    ]
    print("| call of a one-element function | best µs | median µs |")
    print("| --- | ---: | ---: |")
    for name, fn in rows:
        best, median = per_call(fn, args.number, args.repeat)
        print("| %s | %.2f | %.2f |" % (name, best, median))
    print("\n%s calls per timing, %d timings; Python %s, NumPy %s; load average %s"
          % (args.number, args.repeat, sys.version.split()[0], np.__version__,
             " ".join("%.1f" % v for v in os.getloadavg())))


if __name__ == "__main__":
    main()
