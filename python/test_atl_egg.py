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
    with tempfile.TemporaryDirectory() as d:
        name = os.path.join(d, "in.json")
        with open(name, "w") as f:
            json.dump({k: np.asarray(v).tolist() if not isinstance(v, tuple) else
                       [np.asarray(x).tolist() for x in v] for k, v in inputs.items()}, f)
        out = subprocess.run([atl_egg._bin(), "eval", path, "--inputs", name],
                             capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def load_text(text):
    """`atl_egg.load` of a program given as text."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "f.atl")
        with open(path, "w") as f:
            f.write(text)
        return atl_egg.load(path)


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
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "g.atl"), "w") as f:
                f.write(text)
            self.assertTrue(close((dc, dz), eval_json(f.name, inputs)))

    def test_pairs_in_and_out(self):
        path = os.path.join(CORPUS, "pair_moments.atl")
        f = atl_egg.load(path)
        p = (self.rng.uniform(-1, 1, 5), self.rng.uniform(-1, 1, 5))
        got = f(p=p, c=0.25)
        self.assertIsInstance(got, tuple)
        self.assertTrue(close(got, eval_json(path, {"p": p, "c": 0.25})))

    def test_results_are_freed_when_dropped_without_the_garbage_collector(self):
        import gc
        import weakref
        f = load_text("(fn f ((x (tensor n R))) (pair (gen i n (get x i)) (gen i n (* 2 (get x i)))))")
        gc.disable()
        try:
            got = f(self.rng.uniform(-1, 1, 5))
            alive = [weakref.ref(got[0]), weakref.ref(got[1])]
            del got
            self.assertTrue(all(r() is None for r in alive), "a result outlived its last reference")
        finally:
            gc.enable()

    def test_relations_are_boolean_arrays(self):
        path = os.path.join(CORPUS, "graph_smoothness.atl")
        f = atl_egg.load(path)
        E = self.rng.uniform(0, 1, (6, 6)) < 0.3
        x = self.rng.uniform(-1, 1, 6)
        got = f(E=E, x=x, lam=0.5)
        self.assertTrue(close(got, eval_json(path, {"E": E, "x": x, "lam": 0.5})))

    def test_relations_by_their_tuples(self):
        path = os.path.join(CORPUS, "graph_smoothness.atl")
        f = atl_egg.load(path)
        E = self.rng.uniform(0, 1, (7, 7)) < 0.3
        x = self.rng.uniform(-1, 1, 7)
        want = eval_json(path, {"E": E, "x": x, "lam": 0.5})
        idx = np.argwhere(E)
        shuffled = idx[self.rng.permutation(len(idx))]
        self.assertTrue(close(f(E=shuffled, x=x, lam=0.5), want))
        # sorted int64 pairs: checked and laid out by the library in one pass
        self.assertTrue(close(f(E=np.ascontiguousarray(idx, dtype=np.int64), x=x, lam=0.5), want))
        # ... with empty rows first, between and last
        E2 = np.zeros((9, 9), dtype=bool)
        E2[2, [1, 5]] = E2[3, 8] = E2[6, [0, 2, 7]] = True
        x2 = self.rng.uniform(-1, 1, 9)
        want2 = eval_json(path, {"E": E2, "x": x2, "lam": 0.5})
        self.assertTrue(close(f(E=np.argwhere(E2).astype(np.int64), x=x2, lam=0.5), want2))
        # a relation of arity 3, tuples in any order, against its dense map
        T = self.rng.uniform(0, 1, (4, 4, 3)) < 0.4
        y = self.rng.uniform(-1, 1, 4)
        tuples = np.argwhere(T)[::-1].copy()
        with tempfile.TemporaryDirectory() as d:
            path3 = os.path.join(d, "t.atl")
            with open(path3, "w") as out:
                out.write("(fn t ((T (relation n n m)) (x (tensor n R))) (sum i n (sum j n "
                          "(sum k m (iverson (T j i k) (* (get x i) (get x j)))))))")
            g = atl_egg.load(path3)
            want3 = eval_json(path3, {"T": T, "x": y})
        self.assertTrue(close(g(T=tuples, x=y, sizes={"m": 3}), want3))

    def test_layouts_of_a_call_are_built_in_a_kept_buffer(self):
        # the pairs' layout of a call goes to a buffer kept for the next
        # call (no fresh pages each time); a smaller relation, one whose
        # pairs are not sorted and a gradient's calls still equal eval
        path = os.path.join(CORPUS, "graph_smoothness.atl")
        f = atl_egg.load(path)
        buffers = []
        for n, density in ((9, 0.4), (9, 0.2), (5, 0.5), (9, 0.3)):
            E = self.rng.uniform(0, 1, (n, n)) < density
            E[0, 1] = True
            x = self.rng.uniform(-1, 1, n)
            want = eval_json(path, {"E": E, "x": x, "lam": 0.5})
            pairs = np.ascontiguousarray(np.argwhere(E), dtype=np.int64)
            self.assertTrue(close(f(E=pairs, x=x, lam=0.5), want))
            self.assertEqual(len(f._kept.free), 1)
            buffers.append(f._kept.free[0])
            self.assertTrue(close(f(E=pairs[::-1].copy(), x=x, lam=0.5), want))
        self.assertIs(buffers[1], buffers[0])  # a smaller layout reuses it
        self.assertIs(buffers[2], buffers[0])

    def test_relations_from_scipy_sparse(self):
        try:
            import scipy.sparse as sp
        except ImportError:
            self.skipTest("SciPy is not installed")
        path = os.path.join(CORPUS, "graph_smoothness.atl")
        f = atl_egg.load(path)
        E = self.rng.uniform(0, 1, (6, 6)) < 0.4
        x = self.rng.uniform(-1, 1, 6)
        want = eval_json(path, {"E": E, "x": x, "lam": 0.25})
        for m in (sp.csr_array(E.astype(float)), sp.coo_array(E.astype(float)), sp.csr_matrix(E)):
            self.assertTrue(close(f(E=m, x=x, lam=0.25), want))

    def assert_same_bits(self, got, want):
        """Equal bit for bit (a real, an array or a tuple of them)."""
        if isinstance(want, tuple):
            self.assertEqual(len(got), len(want))
            for g, w in zip(got, want):
                self.assert_same_bits(g, w)
            return
        g, w = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
        self.assertEqual(g.shape, w.shape)
        self.assertEqual(g.tobytes(), w.tobytes())

    def test_prepared_relations_give_the_unprepared_values(self):
        path = os.path.join(CORPUS, "graph_smoothness.atl")
        f, g = atl_egg.load(path), atl_egg.grad(path, wrt=["x"])
        n = 300
        E = np.unique(self.rng.integers(0, n, (1500, 2)), axis=0)
        x = self.rng.uniform(-1, 1, n)
        for fn in (f, g):  # the gradient reads E transposed
            want = fn(E=E, x=x, lam=0.5, sizes={"n": n})
            prep = fn.prepare("E", E, sizes={"n": n})
            self.assertEqual(prep.shape, (n, n))
            self.assert_same_bits(fn(E=prep, x=x, lam=0.5), want)
            self.assert_same_bits(fn(prep, x, 0.5), want)  # by position
        # no tuple, one tuple, a loop
        for few in (np.zeros((0, 2), dtype=np.int64), np.array([[3, 1]]), np.array([[4, 4]])):
            prep = g.prepare("E", few, sizes={"n": n})
            self.assert_same_bits(g(E=prep, x=x, lam=0.5), g(E=few, x=x, lam=0.5, sizes={"n": n}))
        # a relation of one argument
        s = load_text("(fn s ((S (relation n)) (x (tensor n R))) "
                      "(sum i n (iverson (S i) (* (get x i) (get x i)))))")
        prep = s.prepare("S", np.array([[1], [4], [5]]), sizes={"n": n})
        self.assert_same_bits(s(S=prep, x=x), s(S=np.array([[1], [4], [5]]), x=x, sizes={"n": n}))
        # a relation of three arguments read permuted ((T k j i) beside
        # (T i j k)), its tuples given unsorted
        T = self.rng.uniform(0, 1, (9, 4, 9)) < 0.3
        tuples = np.argwhere(T)[::-1].copy()
        y = self.rng.uniform(-1, 1, 9)
        t4 = load_text("(fn t4 ((T (relation n m n)) (x (tensor n R))) (sum i n (sum j m (sum k n "
                       "(iverson (or (T i j k) (T k j i)) (* (get x i) (get x k)))))))")
        prep = t4.prepare("T", tuples, sizes={"n": 9, "m": 4})
        self.assert_same_bits(t4(T=prep, x=y), t4(T=T, x=y))
        self.assertTrue(close(t4(T=prep, x=y), t4(T=T, x=y)))
        # a tensor stored by a prepared pattern, in and out
        path = os.path.join(CORPUS, "sparse_matvec_stored.atl")
        tuples, vals, xs, ys = self.stored_case()
        gs = atl_egg.grad(path, wrt=["A", "x"])
        S = gs.prepare("S", tuples, sizes={"n": 6, "m": 5})
        self.assert_same_bits(gs(A=vals, S=S, x=xs, y=ys), gs(A=vals, S=tuples, x=xs, y=ys))
        try:
            import scipy.sparse as sp
        except ImportError:
            return
        m = sp.csr_array((np.ones(len(E)), (E[:, 0], E[:, 1])), shape=(n, n))
        prep = g.prepare("E", m)  # the sizes from the matrix's shape
        self.assert_same_bits(g(E=prep, x=x, lam=0.5), g(E=m, x=x, lam=0.5))
        A = sp.csr_array((vals, (tuples[:, 0], tuples[:, 1])), shape=(6, 5))
        dA, dx = gs(A=vals, S=gs.prepare("S", A), x=xs, y=ys)
        self.assertIsInstance(dA, sp.csr_array)  # the form the relation was given in
        wA, wx = gs(A=A, S=A, x=xs, y=ys)
        self.assert_same_bits((dA.toarray(), dx), (wA.toarray(), wx))

    def test_prepared_relations_refuse_misuse(self):
        path = os.path.join(CORPUS, "graph_smoothness.atl")
        f, g = atl_egg.load(path), atl_egg.grad(path, wrt=["x"])
        E = np.array([[0, 1], [1, 2], [3, 0], [3, 2]], dtype=np.int64)
        x = self.rng.uniform(-1, 1, 4)
        want = g(E=E, x=x, lam=0.5, sizes={"n": 4})
        prep = g.prepare("E", E, sizes={"n": 4})
        # its own copies: changing the source changes nothing
        E[:] = 0
        self.assert_same_bits(g(E=prep, x=x, lam=0.5), want)
        with self.assertRaises(ValueError):
            prep.tuples[0, 0] = 2
        with self.assertRaises(AttributeError):
            prep.shape = (5, 5)
        with self.assertRaises(TypeError):
            import pickle
            pickle.dumps(prep)
        # another function, other sizes, another name, prepared twice
        with self.assertRaisesRegex(ValueError, "another compiled function"):
            f(E=prep, x=x, lam=0.5)
        with self.assertRaisesRegex(ValueError, "prepared at shape"):
            g(E=prep, x=np.zeros(5), lam=0.5, sizes={"n": 5})
        with self.assertRaisesRegex(ValueError, "no relation input 'x'"):
            g.prepare("x", E, sizes={"n": 4})
        with self.assertRaises(TypeError):
            g.prepare("E", prep)
        # bad relations are refused when preparing, as in a call
        with self.assertRaisesRegex(ValueError, "out of range"):
            g.prepare("E", np.array([[0, 1], [1, 4]]), sizes={"n": 4})
        with self.assertRaisesRegex(ValueError, "given twice"):
            g.prepare("E", np.array([[0, 1], [0, 1]]), sizes={"n": 4})
        with self.assertRaisesRegex(ValueError, "size n is not known"):
            g.prepare("E", np.array([[0, 1]]))
        # the library itself refuses a prepared relation of another library
        # (its identity, not its contents)
        other = f.prepare("E", np.array([[0, 1]]), sizes={"n": 4})
        call = [4, None, x.ctypes.data, 0.5] + [np.empty(4).ctypes.data]
        rc = g._call_prepared(call, {"E": other}, [])
        self.assertEqual(rc, 5)

    def stored_case(self):
        """sparse_matvec_stored's inputs: a random pattern with an empty row,
        its values, x and y; and its gradient's program file."""
        S = self.rng.uniform(0, 1, (6, 5)) < 0.4
        S[2] = False
        tuples = np.argwhere(S)
        vals = self.rng.uniform(-1, 1, len(tuples))
        x, y = self.rng.uniform(-1, 1, 5), self.rng.uniform(-1, 1, 6)
        return tuples, vals, x, y

    def test_stored_tensors_are_their_values_at_the_tuples(self):
        path = os.path.join(CORPUS, "sparse_matvec_stored.atl")
        tuples, vals, x, y = self.stored_case()
        rel = {"tuples": tuples.tolist(), "shape": [6, 5]}
        f = atl_egg.load(path)
        want = eval_json(path, {"A": vals, "S": rel, "x": x, "y": y})
        self.assertTrue(close(f(A=vals, S=tuples, x=x, y=y), want))
        g = atl_egg.grad(path, wrt=["A", "x"])
        with tempfile.TemporaryDirectory() as d:
            gpath = os.path.join(d, "g.atl")
            with open(gpath, "w") as out:
                out.write(atl_egg._atl(["grad", path, "--wrt", "A,x"]))
            gwant = eval_json(gpath, {"A": vals, "S": rel, "x": x, "y": y})
        dA, dx = g(A=vals, S=tuples, x=x, y=y)
        self.assertEqual(dA.shape, (len(tuples),))
        self.assertTrue(close((dA, dx), gwant))
        # an empty pattern, and a single tuple
        for t in (np.zeros((0, 2), dtype=np.int64), tuples[:1]):
            v = vals[:len(t)]
            r = {"tuples": t.tolist(), "shape": [6, 5]}
            self.assertTrue(close(f(A=v, S=t, x=x, y=y, sizes={"n": 6, "m": 5}),
                                  eval_json(path, {"A": v, "S": r, "x": x, "y": y})))

    def test_stored_tensors_from_scipy_sparse(self):
        try:
            import scipy.sparse as sp
        except ImportError:
            self.skipTest("SciPy is not installed")
        path = os.path.join(CORPUS, "sparse_matvec_stored.atl")
        tuples, vals, x, y = self.stored_case()
        f = atl_egg.load(path)
        want = f(A=vals, S=tuples, x=x, y=y)
        A = sp.coo_array((vals, (tuples[:, 0], tuples[:, 1])), shape=(6, 5))
        for m in (A, A.tocsr(), sp.csr_matrix(A)):
            self.assertTrue(close(f(A=m, S=m, x=x, y=y), want))
        # values in another order: the matrix pairs them by coordinates
        back = sp.coo_array((vals[::-1], (tuples[::-1, 0], tuples[::-1, 1])), shape=(6, 5))
        self.assertTrue(close(f(A=back, S=tuples, x=x, y=y), want))
        other = sp.coo_array((vals[1:], (tuples[1:, 0], tuples[1:, 1])), shape=(6, 5))
        with self.assertRaisesRegex(ValueError, "input A: its sparsity pattern must be the tuples of S"):
            f(A=other, S=tuples, x=x, y=y)
        # a stored result comes back in the class and format of the SciPy input
        with tempfile.TemporaryDirectory() as d:
            gpath = os.path.join(d, "g.atl")
            with open(gpath, "w") as out:
                out.write(atl_egg._atl(["grad", path, "--wrt", "A,x"]))
            g = atl_egg.load(gpath)
        dA, dx = g(A=vals, S=tuples, x=x, y=y)
        for m, cls in ((A.tocsr(), sp.csr_array), (sp.csr_matrix(A), sp.csr_matrix), (A, sp.coo_array)):
            for kw in ({"A": m, "S": tuples}, {"A": vals, "S": m}):
                got, got_dx = g(x=x, y=y, **kw)
                self.assertIs(type(got), cls)
                self.assertEqual((got.shape, got.nnz), ((6, 5), len(tuples)))
                coo = got.tocoo()
                order = np.lexsort((coo.col, coo.row))
                self.assertTrue(np.array_equal(coo.data[order], dA) and np.array_equal(got_dx, dx))

    def test_bad_stored_values_are_named_errors(self):
        path = os.path.join(CORPUS, "sparse_matvec_stored.atl")
        tuples, vals, x, y = self.stored_case()
        f = atl_egg.load(path)
        with self.assertRaisesRegex(ValueError, r"input A has shape \(%d,\), but it is stored by S"
                                    % (len(vals) - 1)):
            f(A=vals[1:], S=tuples, x=x, y=y)
        with self.assertRaisesRegex(ValueError, "input A: the tuples of S are not sorted"):
            f(A=vals, S=tuples[::-1].copy(), x=x, y=y)
        with self.assertRaisesRegex(TypeError, "input A"):
            f(A="values", S=tuples, x=x, y=y)
        with self.assertRaisesRegex(ValueError, "input S: the tuple .* is out of range"):
            f(A=vals, S=tuples + 10, x=x, y=y)

    def test_bad_tuples_are_named_errors(self):
        f = atl_egg.load(os.path.join(CORPUS, "graph_smoothness.atl"))
        x = np.zeros(3)
        with self.assertRaisesRegex(ValueError, "input E.*out of range"):
            f(E=np.array([[0, 1], [2, 3]]), x=x, lam=0.5)
        with self.assertRaisesRegex(ValueError, "input 'E'.*negative"):
            f(E=np.array([[0, -1]]), x=x, lam=0.5)
        with self.assertRaisesRegex(ValueError, "input 'E'.*given twice"):
            f(E=np.array([[0, 1], [0, 1]]), x=x, lam=0.5)
        with self.assertRaisesRegex(ValueError, "input 'E'.*given twice"):
            f(E=np.array([[0, 1], [1, 0], [1, 2], [1, 2]], dtype=np.int64), x=x, lam=0.5)
        with self.assertRaisesRegex(ValueError, "input E.*out of range"):
            f(E=np.array([[0, 1], [1, 3]], dtype=np.int64), x=x, lam=0.5, sizes={"n": 3})
        with self.assertRaisesRegex((TypeError, ValueError), "input 'E'"):
            f(E=np.array([[0, 1, 2]]), x=x, lam=0.5)

    def test_shapes_are_checked(self):
        f = atl_egg.load(os.path.join(CORPUS, "deconv_signal_loss.atl"))
        with self.assertRaises(ValueError):
            f(x=np.zeros(5), c=np.zeros(3), z=np.zeros(4))  # x needs n + m - 1 = 6
        with self.assertRaises(TypeError):
            f(x=np.zeros(6), c=np.zeros(3))

    def test_sizes_must_be_exact_integers_below_2_63(self):
        f = load_text("(fn f ((x (tensor n R))) (sum i n (get x i)))")
        x = np.array([1.0, 2.0, 3.0])
        self.assertEqual(f(x, sizes={"n": 3}), 6.0)
        self.assertEqual(f(x, sizes={"n": np.int64(3)}), 6.0)
        # 2^64 + 3 is 3 modulo 2^64: it must not be taken for 3
        for bad in (2 ** 64 + 3, 2 ** 63, -1):
            with self.assertRaisesRegex(ValueError, "size n"):
                f(x, sizes={"n": bad})
        for bad in (True, 3.0, "3", None):
            with self.assertRaisesRegex(TypeError, "size n must be an integer"):
                f(x, sizes={"n": bad})
        with self.assertRaisesRegex(TypeError, "unknown size 'm'"):
            f(x, sizes={"m": 3})

    def test_arguments_are_checked_and_named(self):
        f = atl_egg.load(os.path.join(CORPUS, "deconv_signal_loss.atl"))
        x, c, z = np.zeros(6), np.zeros(3), np.zeros(4)
        for bad in (None, 1.5, np.float64(2.0), "abc", [[1.0], [2.0]]):
            with self.assertRaisesRegex((TypeError, ValueError), r"input 'c' must be an array of shape \(m,\)"):
                f(x=x, c=bad, z=z)
        with self.assertRaisesRegex(ValueError, r"input 'x'.*1 dimension.*\(6, 1\)"):
            f(x=np.zeros((6, 1)), c=c, z=z)
        with self.assertRaisesRegex(TypeError, "input 'z'.*real numbers"):
            f(x=x, c=c, z=np.array(["a", "b", "c", "d"]))
        g = atl_egg.load(os.path.join(CORPUS, "pair_moments.atl"))
        p = (np.zeros(4), np.zeros(4))
        for bad in (None, np.zeros(3), True, 1j, "0.5"):
            with self.assertRaisesRegex(TypeError, "input 'c' must be a real number"):
                g(p=p, c=bad)
        self.assertEqual(g(p=p, c=np.array(0.5)), (0.0, 0.0))
        for bad in ((np.zeros(4),), np.zeros((2, 4)), None):
            with self.assertRaisesRegex(TypeError, "input 'p' must be a pair"):
                g(p=bad, c=0.5)
        h = atl_egg.load(os.path.join(CORPUS, "graph_smoothness.atl"))
        with self.assertRaisesRegex(TypeError, "input 'E'.*boolean"):
            h(E=np.full((3, 3), 2), x=np.zeros(3), lam=0.5)

    def test_names_that_are_not_identifiers(self):
        f = load_text("(fn f ((a.b (pair R (tensor n R))) (sizes R)) "
                      "(+ (* sizes (fst a.b)) (sum i n (get (snd a.b) i))))")
        self.assertEqual(f.inputs, ["a.b", "sizes"])
        ab = (2.0, np.array([1.0, 2.0]))
        self.assertEqual(f(**{"a.b": ab}, inputs={"sizes": 10.0}), 23.0)
        self.assertEqual(f(inputs={"a.b": ab, "sizes": 10.0}), 23.0)
        self.assertEqual(f(ab, 10.0), 23.0)
        with self.assertRaisesRegex(TypeError, "given twice"):
            f(ab, inputs={"a.b": ab, "sizes": 1.0})

    def test_error_codes_raise_atl_error(self):
        f = load_text("(fn f ((x (tensor n R)) (m size)) "
                      "(let t (gen j (- m 2) (get x j)) (sum i n (get t i))))")
        self.assertEqual(f(np.ones(3), sizes={"m": 4}), 2.0)
        with self.assertRaises(atl_egg.AtlError) as e:
            f(np.ones(3), sizes={"m": 0})
        self.assertEqual(e.exception.code, 1)
        self.assertIn("negative", str(e.exception))

    def test_undocumented_error_codes_raise_atl_error(self):
        with tempfile.TemporaryDirectory() as d:
            src, so = os.path.join(d, "g.c"), os.path.join(d, "g.so")
            with open(src, "w") as f:
                f.write("int atl_g(double *out) { out[0] = 1.0; return 7; }\n")
            cc = os.environ.get("CC", "cc")
            if subprocess.run([cc, "-shared", "-fPIC", "-o", so, src]).returncode != 0:
                self.skipTest("no C compiler")
            manifest = {"function": "atl_g", "params": [], "returns": {"0": "success"},
                        "outputs": [{"c_name": "out", "leaf": "out", "c_type": "double *", "shape": []}]}
            g = atl_egg.AtlFunction(so, manifest)
        with self.assertRaises(atl_egg.AtlError) as e:
            g()
        self.assertEqual(e.exception.code, 7)
        self.assertIn("returned 7", str(e.exception))

    def test_no_temporary_files_are_left(self):
        saved = tempfile.tempdir
        with tempfile.TemporaryDirectory() as d:
            tempfile.tempdir = d
            try:
                path = os.path.join(CORPUS, "deconv_signal_loss.atl")
                atl_egg.load(path)
                atl_egg.grad(path, wrt=["c"])
                with self.assertRaises(RuntimeError):
                    atl_egg.grad(os.path.join(CORPUS, "pair_moments.atl"))  # returns a pair
                self.assertEqual(os.listdir(d), [])
            finally:
                tempfile.tempdir = saved


if __name__ == "__main__":
    unittest.main()
