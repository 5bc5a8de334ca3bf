"""Tests of the Python loader: compiled calls equal `atl-egg eval`.

    ATL_EGG_BIN=target/release/atl-egg python3 -m unittest python/test_atl_egg.py
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import atl_egg  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "corpus")


def eval_json(path, inputs):
    """`atl-egg eval` of a program file on inputs (NumPy arrays as lists)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({k: np.asarray(v).tolist() if not isinstance(v, tuple) else
                   [np.asarray(x).tolist() for x in v] for k, v in inputs.items()}, f)
    out = subprocess.run([atl_egg._bin(), "eval", path, "--inputs", f.name],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def close(got, want):
    if isinstance(got, tuple):
        return all(close(g, w) for g, w in zip(got, want))
    return np.allclose(np.asarray(got, dtype=float), np.asarray(want, dtype=float),
                       rtol=1e-9, atol=1e-9)


class Loader(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(7)

    def test_function_equals_eval(self):
        path = os.path.join(CORPUS, "deconv_signal_loss.atl")
        f = atl_egg.load(path)
        n, m = 7, 3
        inputs = {"x": self.rng.uniform(-1, 1, n + m - 1), "c": self.rng.uniform(-1, 1, m),
                  "z": self.rng.uniform(-1, 1, n)}
        got = f(**inputs)
        self.assertIsInstance(got, float)
        self.assertTrue(close(got, eval_json(path, inputs)))
        # positional, in parameter order
        self.assertEqual(got, f(inputs["x"], inputs["c"], inputs["z"]))

    def test_gradient_equals_eval_of_the_gradient(self):
        path = os.path.join(CORPUS, "deconv_signal_loss.atl")
        g = atl_egg.grad(path, wrt=["c", "z"])
        n, m = 6, 2
        inputs = {"x": self.rng.uniform(-1, 1, n + m - 1), "c": self.rng.uniform(-1, 1, m),
                  "z": self.rng.uniform(-1, 1, n)}
        dc, dz = g(**inputs)
        self.assertEqual(dc.shape, (m,))
        self.assertEqual(dz.shape, (n,))
        text = subprocess.run([atl_egg._bin(), "grad", path, "--wrt", "c,z"],
                              capture_output=True, text=True, check=True).stdout
        with tempfile.NamedTemporaryFile("w", suffix=".atl", delete=False) as f:
            f.write(text)
        self.assertTrue(close((dc, dz), eval_json(f.name, inputs)))

    def test_pairs_in_and_out(self):
        path = os.path.join(CORPUS, "pair_moments.atl")
        f = atl_egg.load(path)
        p = (self.rng.uniform(-1, 1, 5), self.rng.uniform(-1, 1, 5))
        got = f(p=p, c=0.25)
        self.assertIsInstance(got, tuple)
        self.assertTrue(close(got, eval_json(path, {"p": p, "c": 0.25})))

    def test_relations_are_boolean_arrays(self):
        path = os.path.join(CORPUS, "graph_smoothness.atl")
        f = atl_egg.load(path)
        E = self.rng.uniform(0, 1, (6, 6)) < 0.3
        x = self.rng.uniform(-1, 1, 6)
        got = f(E=E, x=x, lam=0.5)
        self.assertTrue(close(got, eval_json(path, {"E": E, "x": x, "lam": 0.5})))

    def test_shapes_are_checked(self):
        f = atl_egg.load(os.path.join(CORPUS, "deconv_signal_loss.atl"))
        with self.assertRaises(ValueError):
            f(x=np.zeros(5), c=np.zeros(3), z=np.zeros(4))  # x needs n + m - 1 = 6
        with self.assertRaises(TypeError):
            f(x=np.zeros(6), c=np.zeros(3))


if __name__ == "__main__":
    unittest.main()
