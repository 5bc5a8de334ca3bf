"""Relations given by their tuples or as SciPy matrices, and tensors stored
by a relation's pattern: taken and returned as one value per tuple, equal
to the reference evaluator; bad sparse input is an error naming the
argument. Tests that need SciPy skip without it."""

import numpy as np
import pytest

import atl_egg as ae
from conftest import close, corpus, reference


def stored_case(rng, n=6, m=5):
    """A random pattern with an empty row, its sorted tuples, values, x, y."""
    S = rng.uniform(0, 1, (n, m)) < 0.4
    S[2] = False
    tuples = np.argwhere(S)
    return tuples, rng.uniform(-1, 1, len(tuples)), rng.uniform(-1, 1, m), rng.uniform(-1, 1, n)


def as_json_relation(tuples, shape):
    return {"tuples": np.asarray(tuples).tolist(), "shape": list(shape)}


def test_relations_by_their_tuples(rng):
    f = ae.load(corpus("graph_smoothness"))
    E = rng.uniform(0, 1, (7, 7)) < 0.3
    x = rng.uniform(-1, 1, 7)
    idx = np.argwhere(E)
    shuffled = idx[rng.permutation(len(idx))]
    assert close(f(shuffled, x, 0.5), f(E, x, 0.5))
    with pytest.raises(ValueError, match="given twice"):
        f(np.concatenate([idx, idx[:1]]), x, 0.5)
    with pytest.raises(ValueError, match="out of range"):
        f(idx + 7, x, 0.5)


def test_stored_tensors_are_their_values_at_the_tuples(rng):
    f = ae.load(corpus("sparse_matvec_stored"))
    tuples, vals, x, y = stored_case(rng)
    rel = as_json_relation(tuples, (6, 5))
    assert close(f(vals, tuples, x, y), reference(f, vals, rel, x, y))
    g = ae.grad(f, wrt=("A", "x"))
    dA, dx = g(vals, tuples, x, y)
    assert dA.shape == (len(tuples),)
    assert close((dA, dx), tuple(reference(g, vals, rel, x, y)))
    # an empty pattern and a single tuple (the sizes come from x and y)
    for t in (np.zeros((0, 2), dtype=np.int64), tuples[:1]):
        v = vals[:len(t)]
        r = as_json_relation(t, (6, 5))
        assert close(f(v, t, x, y), reference(f, v, r, x, y))
        assert close(g(v, t, x, y), tuple(reference(g, v, r, x, y)))


def test_bad_stored_values_are_named_errors(rng):
    f = ae.load(corpus("sparse_matvec_stored"))
    tuples, vals, x, y = stored_case(rng)
    with pytest.raises(ValueError, match="argument 'A' has shape .*stored by S"):
        f(vals[1:], tuples, x, y)
    with pytest.raises(ValueError, match="argument 'A': the tuples of S are not sorted"):
        f(vals, tuples[::-1].copy(), x, y)
    with pytest.raises(TypeError, match="argument 'A'"):
        f("values", tuples, x, y)


def test_stored_tensors_and_relations_from_scipy(rng):
    sp = pytest.importorskip("scipy.sparse")
    f = ae.load(corpus("sparse_matvec_stored"))
    tuples, vals, x, y = stored_case(rng)
    want = f(vals, tuples, x, y)
    A = sp.coo_array((vals, (tuples[:, 0], tuples[:, 1])), shape=(6, 5))
    for m in (A, A.tocsr(), sp.csr_matrix(A)):
        assert close(f(m, m, x, y), want)
    back = sp.coo_array((vals[::-1], (tuples[::-1, 0], tuples[::-1, 1])), shape=(6, 5))
    assert close(f(back, tuples, x, y), want)
    other = sp.coo_array((vals[1:], (tuples[1:, 0], tuples[1:, 1])), shape=(6, 5))
    with pytest.raises(ValueError, match="argument 'A': its sparsity pattern"):
        f(other, tuples, x, y)


def test_stored_results_come_back_in_the_scipy_form_given(rng):
    sp = pytest.importorskip("scipy.sparse")
    f = ae.load(corpus("sparse_matvec_stored"))
    g = ae.grad(f, wrt=("A", "x"))
    tuples, vals, x, y = stored_case(rng)
    dA, dx = g(vals, tuples, x, y)
    A = sp.coo_array((vals, (tuples[:, 0], tuples[:, 1])), shape=(6, 5))
    for m, cls in ((A, sp.coo_array), (A.tocsr(), sp.csr_array), (A.tocsc(), sp.csc_array),
                   (sp.csr_matrix(A), sp.csr_matrix)):
        # (a CSC relation's tuples come column by column: 1-D values cannot follow them)
        for args in ((m, tuples, x, y), (m, m, x, y)) + ((vals, m, x, y),) * (m.format != "csc"):
            got, got_dx = g(*args)
            assert type(got) is cls and got.shape == (6, 5) and got.nnz == len(tuples)
            coo = got.tocoo()
            order = np.lexsort((coo.col, coo.row))
            assert np.array_equal(np.stack([coo.row[order], coo.col[order]], axis=1), tuples)
            assert np.array_equal(coo.data[order], dA) and np.array_equal(got_dx, dx)
    # a zero value stays a stored entry of the pattern
    got, _ = g(A.tocsr(), tuples, x, A.tocsr() @ x)
    assert got.nnz == len(tuples) and not got.data.any()
    # with out=, the given arrays are returned as they are
    out = (np.empty(len(tuples)), np.empty(5))
    assert g(A.tocsr(), tuples, x, y, out=out)[0] is out[0]


def same_bits(got, want):
    """Equal bit for bit (a real, an array or a tuple of them)."""
    if isinstance(want, tuple):
        return len(got) == len(want) and all(same_bits(g, w) for g, w in zip(got, want))
    g, w = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    return g.shape == w.shape and g.tobytes() == w.tobytes()


def test_prepared_relations_give_the_unprepared_values(rng):
    f = ae.load(corpus("graph_smoothness"))
    g = ae.grad(f, wrt="x")  # reads E transposed
    n = 300
    E = np.unique(rng.integers(0, n, (1500, 2)), axis=0)
    x = rng.uniform(-1, 1, n)
    for fn in (f, g):
        want = fn(E, x, 0.5, sizes={"n": n})
        prep = fn.prepare("E", E, sizes={"n": n})
        assert prep.shape == (n, n) and len(prep.tuples) == len(E)
        assert same_bits(fn(prep, x, 0.5), want)
        assert same_bits(fn(E=prep, x=x, lam=0.5), want)
    # a relation of three arguments read permuted, its tuples unsorted
    t4 = ae.load("(fn t4 ((T (relation n m n)) (x (tensor n R))) (sum i n (sum j m (sum k n "
                 "(iverson (or (T i j k) (T k j i)) (* (get x i) (get x k)))))))")
    T = rng.uniform(0, 1, (9, 4, 9)) < 0.3
    y = rng.uniform(-1, 1, 9)
    prep = t4.prepare("T", np.argwhere(T)[::-1].copy(), sizes={"n": 9, "m": 4})
    assert same_bits(t4(prep, y), t4(T, y))
    prep = t4.prepare("T", T)  # a dense map gives the sizes
    assert same_bits(t4(prep, y), t4(T, y))
    # a tensor stored by a prepared pattern, in and out
    gs = ae.grad(ae.load(corpus("sparse_matvec_stored")), wrt=("A", "x"))
    tuples, vals, xs, ys = stored_case(rng)
    S = gs.prepare("S", tuples, sizes={"n": 6, "m": 5})
    assert same_bits(gs(vals, S, xs, ys), gs(vals, tuples, xs, ys))


def test_prepared_relations_from_scipy_keep_its_form(rng):
    sp = pytest.importorskip("scipy.sparse")
    gs = ae.grad(ae.load(corpus("sparse_matvec_stored")), wrt=("A", "x"))
    tuples, vals, xs, ys = stored_case(rng)
    A = sp.csr_array((vals, (tuples[:, 0], tuples[:, 1])), shape=(6, 5))
    dA, dx = gs(vals, gs.prepare("S", A), xs, ys)
    assert isinstance(dA, sp.csr_array)
    wA, wx = gs(A, A, xs, ys)
    assert same_bits((dA.toarray(), dx), (wA.toarray(), wx))


def test_prepared_relations_refuse_misuse(rng):
    f = ae.load(corpus("graph_smoothness"))
    g = ae.grad(f, wrt="x")
    E = np.array([[0, 1], [1, 2], [3, 0], [3, 2]], dtype=np.int64)
    x = rng.uniform(-1, 1, 4)
    want = g(E, x, 0.5, sizes={"n": 4})
    prep = g.prepare("E", E, sizes={"n": 4})
    E[:] = 0  # its own copies: changing the source changes nothing
    assert same_bits(g(prep, x, 0.5), want)
    with pytest.raises(ValueError):
        prep.tuples[0, 0] = 2
    with pytest.raises(AttributeError):
        prep.name = "F"
    with pytest.raises(TypeError):
        import pickle
        pickle.dumps(prep)
    with pytest.raises(ValueError, match="another compiled function"):
        f(prep, x, 0.5)
    with pytest.raises(ValueError, match="shape"):
        g(prep, np.zeros(5), 0.5)
    with pytest.raises(ValueError, match="not a relation"):
        g.prepare("x", E, sizes={"n": 4})
    with pytest.raises(TypeError, match="prepared already"):
        g.prepare("E", prep)
    with pytest.raises(ValueError, match="out of range"):
        g.prepare("E", np.array([[0, 1], [1, 4]]), sizes={"n": 4})
    with pytest.raises(ValueError, match="given twice"):
        g.prepare("E", np.array([[0, 1], [0, 1]]), sizes={"n": 4})
    with pytest.raises(ValueError, match="size n cannot be inferred"):
        g.prepare("E", np.array([[0, 1]]))
    # the native call refuses another kernel's prepared relation by itself
    other = f.prepare("E", np.array([[0, 1]]), sizes={"n": 4})
    with pytest.raises(ValueError, match="another compiled function"):
        g._kernel.call([4], [other._native, x, np.array([0.5])], [np.empty(4)], 1)


def test_a_relation_too_large_to_lay_out_is_an_error():
    # One 64-bit row offset per index of the first dimension does not fit
    # in memory at n = 2^63 - 1, whatever the tuples: an error, not a panic.
    f = ae.load("(fn f ((n size) (E (relation n n))) (sum i n (sum j n (iverson (E i j) 1.0))))")
    with pytest.raises(ValueError, match="too large"):
        f(np.array([[0, 1]], dtype=np.int64), sizes={"n": 2**63 - 1})
    assert close(f(np.array([[0, 1]], dtype=np.int64), sizes={"n": 3}), 1.0)
