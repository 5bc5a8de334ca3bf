"""Functions written in Python: the traced program against its `.atl`
equivalent (the same program text, or the same values), the forms, and
errors located at the user's line."""

import inspect

import numpy as np
import pytest

import atl_egg as ae
from conftest import close, corpus, finite_difference, reference

n, m = ae.sizes("n m")


def test_the_traced_convolution_is_the_corpus_program(rng):
    @ae.function
    def deconv_signal_loss(x: ae.R[n + m - 1], c: ae.R[m], z: ae.R[n]):
        return ae.let(ae.gen(n, lambda i: ae.sum(m, lambda j: x[i + m - (j + 1)] * c[j])),
                      lambda f: ae.sum(n, lambda k: ae.let(f[k] - z[k], lambda d: d * d)))

    atl = ae.load(corpus("deconv_signal_loss"))
    assert deconv_signal_loss.atl_source() == atl.atl_source()
    args = rng.uniform(-1, 1, 9), rng.uniform(-1, 1, 3), rng.uniform(-1, 1, 7)
    assert deconv_signal_loss(*args) == atl(*args)


def test_the_traced_graph_program_has_the_corpus_values(rng):
    @ae.function
    def graph_smoothness(E: ae.Relation[n, n], x: ae.R[n], lam: ae.R):
        def sq(v):
            return v * v
        pairs = ae.sum((n, n), lambda i, j: ae.where((i < j) & (E[i, j] | E[j, i]), sq(x[i] - x[j])))
        ends = ae.sum(n, lambda i: ae.where(ae.exists(n, lambda j: E[i, j]), sq(x[i])))
        return pairs + lam * ends

    atl = ae.load(corpus("graph_smoothness"))
    E = rng.uniform(0, 1, (7, 7)) < 0.3
    x = rng.uniform(-1, 1, 7)
    assert close(graph_smoothness(E, x, 0.7), atl(E, x, 0.7), 1e-12)
    assert close(ae.grad(graph_smoothness, wrt="x")(E, x, 0.7), ae.grad(atl, wrt="x")(E, x, 0.7))


def test_logistic_regression_loss_and_gradient(rng):
    @ae.function
    def loss(w: ae.R[n], X: ae.R[m, n], y: ae.R[m]):
        return ae.sum(m, lambda i: ae.log(1 + ae.exp(-y[i] * ae.sum(n, lambda j: X[i, j] * w[j]))))

    w, X, y = rng.normal(size=4), rng.normal(size=(6, 4)), np.sign(rng.normal(size=6))
    value, dw = ae.value_and_grad(loss)(w, X, y)
    margin = y * (X @ w)
    assert value == pytest.approx(np.sum(np.log1p(np.exp(-margin))), rel=1e-12)
    assert close(dw, X.T @ (-y / (1 + np.exp(margin))), 1e-12)
    # a transposed matrix: the inputs that disagree are named
    with pytest.raises(ValueError, match=r"disagree on size n: argument 'w' of shape \(n,\) has n = 4, "
                                         r"argument 'X' of shape \(m, n\) has n = 6"):
        loss(w, X.T, y)


def test_pointwise_operations_and_black_boxes(rng):
    @ae.function
    def zoo(x: ae.R[n], a: ae.R):
        t = ae.tanh(x) * a + ae.sigmoid(x) - ae.relu(x) / np.float64(2)
        return ae.sum(n, lambda i: t[i] + ae.sqrt(x[i] * x[i] + 1) + x[i] ** 3 + ae.sin(x[i]) * ae.cos(a))

    x = rng.uniform(-2, 2, 5)
    want = np.sum(np.tanh(x) * 1.5 + 1 / (1 + np.exp(-x)) - np.maximum(x, 0) / 2
                  + np.sqrt(x * x + 1) + x ** 3 + np.sin(x) * np.cos(1.5))
    assert zoo(x, 1.5) == pytest.approx(want, rel=1e-12)
    dx = ae.grad(zoo)(x, 1.5)
    d = rng.normal(size=5)
    assert close(dx @ d, finite_difference(lambda v: zoo(v, 1.5), x, d), 1e-6)


def test_every_black_box_of_the_table_traces_to_its_atl_form(rng):
    # the package's boxes are the compiler's table, no list of its own
    assert {"exp", "relu", "pow", "dpow", "lgamma", "digamma", "polygamma"} <= set(ae.BLACK_BOXES)
    x = rng.uniform(0.5, 2.0, 5)
    for name, box in ae.BLACK_BOXES.items():
        assert getattr(ae, name) is box
        takes_parameter = len(inspect.signature(box).parameters) == 2

        def body(v):
            return box(v, 2) if takes_parameter else box(v)

        @ae.function
        def f(x: ae.R[n]):
            return ae.sum(n, lambda i: body(x[i]))

        text = "(%s (get x i) 2)" % name if takes_parameter else "(%s (get x i))" % name
        atl = ae.load("(fn f ((x (tensor n R))) (sum i n %s))" % text)
        assert f.atl_source() == atl.atl_source(), name
        assert close(f(x), atl(x), 1e-12), name


def test_affine_indices_brackets_and_otherwise(rng):
    @ae.function
    def shifted(x: ae.R[n]):
        # x[i - 1] reads zero outside x; where(c, a, b) chooses
        return ae.gen(n, lambda i: ae.where(i >= 1, x[i] - x[i - 1], x[i] * 10))

    x = rng.uniform(-1, 1, 6)
    assert close(shifted(x), np.concatenate([[x[0] * 10], np.diff(x)]), 1e-14)
    assert close(shifted(x), reference(shifted, x), 1e-14)


def test_gen_of_two_indices_and_tuples(rng):
    @ae.function
    def stats(A: ae.R[m, n]):
        At = ae.gen((n, m), lambda i, j: A[j, i])
        return ae.sum(n, lambda i: At[i, 0]), At

    A = rng.uniform(-1, 1, (3, 4))
    first, At = stats(A)
    assert first == pytest.approx(A[0].sum(), rel=1e-14) and close(At, A.T, 0)


def test_pair_inputs_and_components(rng):
    @ae.function
    def moments(p: ae.Pair[ae.R[n], ae.R[n]], c: ae.R):
        w, v = p[0], p.snd
        return ae.pair(ae.sum(n, lambda i: w[i] * v[i]),
                       ae.sum(n, lambda i: ae.let(v[i] - c, lambda d: w[i] * d * d)))

    atl = ae.load(corpus("pair_moments"))
    p = (rng.uniform(-1, 1, 5), rng.uniform(-1, 1, 5))
    assert close(moments(p, 0.3), atl(p, 0.3), 1e-14)


def test_values_used_twice_are_computed_once(rng):
    @ae.function
    def sq_err(x: ae.R[n], y: ae.R[n]):
        return ae.sum(n, lambda i: (lambda d: d * d)(x[i] - y[i]))

    text = sq_err.atl_source()
    assert text.count("(let ") == 1 and text.count("(get y") == 1
    x, y = rng.normal(size=4), rng.normal(size=4)
    assert sq_err(x, y) == pytest.approx(np.sum((x - y) ** 2), rel=1e-14)


def test_sizes_only_in_the_body_are_parameters():
    k = ae.sizes("k")

    @ae.function
    def repeat(x: ae.R[n]):
        return ae.sum(k, lambda r: ae.sum(n, lambda i: x[i]))

    assert "(k size)" in repeat.atl_source()
    assert repeat(np.ones(3), sizes={"k": 5}) == 15.0


def line_of(marker):
    """The line of this file that contains ``marker``."""
    lines = inspect.getsource(inspect.getmodule(line_of)).splitlines()
    return next(k + 1 for k, text in enumerate(lines) if marker in text and "line_of" not in text)


def test_errors_point_at_the_users_line():
    with pytest.raises(ae.TraceError) as e:
        @ae.function
        def too_many(x: ae.R[n]):
            return ae.sum(n, lambda i: x[i, i])  # TOO-MANY-INDICES
    assert e.value.lineno == line_of("# TOO-MANY-INDICES")
    assert "test_trace.py:%d: cannot index" % e.value.lineno in str(e.value)

    with pytest.raises(ae.TraceError) as e:
        @ae.function
        def mixed(x: ae.R[n], y: ae.R[m]):
            return ae.sum(n, lambda i: x[i]) + y  # ADD-REAL-AND-TENSOR
    assert e.value.lineno == line_of("# ADD-REAL-AND-TENSOR")
    assert "cannot apply + to R and [m]R" in str(e.value)

    with pytest.raises(ae.TraceError) as e:
        @ae.function
        def branch(x: ae.R[n]):
            return ae.gen(n, lambda i: x[i] if i > 0 else 0.0)  # PYTHON-IF
    assert e.value.lineno == line_of("# PYTHON-IF") and "where(" in str(e.value)


def test_errors_the_compiler_finds_point_at_the_users_line():
    leaked = []

    def keep(i):
        leaked.append(i)
        return 0.0

    with pytest.raises(ae.TraceError) as e:
        @ae.function
        def escape(x: ae.R[n]):
            ae.sum(n, keep)
            return ae.sum(n, lambda j: x[leaked[0]])  # INDEX-OUT-OF-SCOPE
    assert e.value.lineno == line_of("# INDEX-OUT-OF-SCOPE")
    assert "i" in str(e.value)


def test_parameters_need_types():
    with pytest.raises(ae.TraceError, match="parameter x needs a type annotation"):
        @ae.function
        def untyped(x):
            return x
