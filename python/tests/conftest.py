"""Shared helpers of the Python package's tests: the reference evaluator
and finite differences."""

import json
import os

import numpy as np
import pytest

# The tests check the package's interface and values, which do not depend on
# the C compiler's optimizations: they build at -O1 (several times faster to
# compile than the default -O3), unless the environment says otherwise.
os.environ.setdefault("ATL_EGG_CFLAGS", "-O1")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "corpus")


def corpus(name):
    return os.path.join(CORPUS, name + ".atl")


def _jsonable(v):
    if isinstance(v, tuple):
        return [_jsonable(x) for x in v]
    return np.asarray(v).tolist()


def reference(f, *args):
    """The reference evaluator's value of ``f``'s program on ``args`` (the
    interpreter, not compiled code), as JSON values (a pair as a list)."""
    inputs = {name: _jsonable(v) for name, v in zip(f.inputs, args)}
    return json.loads(f._program.eval_json(json.dumps(inputs)))


def close(got, want, tol=1e-9):
    if isinstance(got, tuple):
        return len(got) == len(want) and all(close(g, w, tol) for g, w in zip(got, want))
    return np.allclose(np.asarray(got, dtype=float), np.asarray(want, dtype=float),
                       rtol=tol, atol=tol)


def finite_difference(fn, x, direction, h=1e-6):
    """(fn(x + h d) - fn(x - h d)) / 2h."""
    return (np.asarray(fn(x + h * direction)) - np.asarray(fn(x - h * direction))) / (2 * h)


@pytest.fixture
def rng():
    return np.random.default_rng(20261125)
