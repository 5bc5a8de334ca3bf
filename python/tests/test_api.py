"""The compiled functions and the JAX-shaped derivatives on NumPy arrays,
checked against the reference evaluator and finite differences."""

import numpy as np
import pytest

import atl_egg as ae
from conftest import close, corpus, finite_difference, reference

DECONV = corpus("deconv_signal_loss")


def deconv_inputs(rng, n=7, m=3):
    return rng.uniform(-1, 1, n + m - 1), rng.uniform(-1, 1, m), rng.uniform(-1, 1, n)


def test_a_file_and_the_same_text_give_the_same_function(rng):
    f = ae.load(DECONV)
    with open(DECONV) as src:
        g = ae.load(src.read())
    args = deconv_inputs(rng)
    assert f.inputs == ["x", "c", "z"]
    assert isinstance(f(*args), float)
    assert f(*args) == g(*args)
    assert close(f(*args), reference(f, *args))
    assert f(*args) == f(x=args[0], c=args[1], z=args[2])


def test_atl_source_reads_back_to_the_same_function(rng):
    f = ae.load(DECONV)
    g = ae.load(f.atl_source())
    assert g.atl_source() == f.atl_source()
    args = deconv_inputs(rng)
    assert f(*args) == g(*args)


def test_grad_defaults_to_the_first_argument(rng):
    f = ae.load(DECONV)
    args = deconv_inputs(rng)
    dx = ae.grad(f)(*args)
    assert isinstance(dx, np.ndarray) and dx.shape == args[0].shape
    d = rng.normal(size=dx.shape)
    fd = finite_difference(lambda x: f(x, *args[1:]), args[0], d)
    assert close(dx @ d, fd, 1e-6)


def test_several_gradients_come_back_as_a_flat_tuple(rng):
    f = ae.load(DECONV)
    args = deconv_inputs(rng)
    grads = ae.grad(f, wrt=["x", "c", "z"])(*args)
    assert isinstance(grads, tuple) and len(grads) == 3
    assert [g.shape for g in grads] == [a.shape for a in args]
    # each equals the gradient taken alone, by name or by position
    for k, name in enumerate(["x", "c", "z"]):
        assert close(grads[k], ae.grad(f, wrt=name)(*args))
        assert close(grads[k], ae.grad(f, wrt=k)(*args))
    (only,) = ae.grad(f, wrt=["c"])(*args)
    assert close(only, grads[1])


def test_value_and_grad_is_one_call_of_both(rng):
    f = ae.load(DECONV)
    args = deconv_inputs(rng)
    value, (dc, dz) = ae.value_and_grad(f, wrt=("c", "z"))(*args)
    assert value == pytest.approx(f(*args), rel=1e-12)
    dc2, dz2 = ae.grad(f, wrt=["c", "z"])(*args)
    assert close(dc, dc2) and close(dz, dz2)
    value, dx = ae.value_and_grad(DECONV)(*args)  # a path works too
    assert close(dx, ae.grad(f)(*args))


def test_jvp_is_the_directional_derivative(rng):
    f = ae.load(DECONV)
    args = deconv_inputs(rng)
    dc, dz = rng.normal(size=3), rng.normal(size=7)
    df = ae.jvp(f, wrt=["c", "z"])
    assert df.inputs == ["x", "c", "z", "dc", "dz"]
    got = df(*args, dc, dz)
    fd = finite_difference(lambda t: f(args[0], args[1] + t * dc, args[2] + t * dz), 0.0, 1.0)
    assert close(got, fd, 1e-6)


def test_vjp_of_a_pair_result(rng):
    f = ae.load(corpus("pair_moments"))
    p = (rng.uniform(-1, 1, 5), rng.uniform(-1, 1, 5))
    value = f(p, 0.25)
    assert isinstance(value, tuple) and close(value, tuple(reference(f, p, 0.25)))
    back = ae.vjp(f, wrt="c")
    assert back.inputs == ["p", "c", "ct"]
    ct = (0.5, -2.0)
    got = back(p, 0.25, ct)
    fd = finite_difference(lambda c: np.dot(ct, f(p, c)), 0.25, 1.0)
    assert close(got, fd, 1e-6)


def test_hvp_is_the_derivative_of_the_gradient(rng):
    f = ae.load(DECONV)
    args = deconv_inputs(rng)
    v = rng.normal(size=3)
    hv = ae.hvp(f, wrt="c")(*args, v)
    g = ae.grad(f, wrt="c")
    fd = finite_difference(lambda c: g(args[0], c, args[2]), args[1], v)
    assert close(hv, fd, 1e-5)


def test_relations_are_boolean_arrays(rng):
    f = ae.load(corpus("graph_smoothness"))
    E = rng.uniform(0, 1, (6, 6)) < 0.4
    x = rng.uniform(-1, 1, 6)
    assert close(f(E, x, 0.5), reference(f, E, x, 0.5))
    assert f(E.astype(int), x, 0.5) == f(E, x, 0.5)
    dx = ae.grad(f, wrt="x")(E, x, 0.5)
    d = rng.normal(size=6)
    assert close(dx @ d, finite_difference(lambda y: f(E, y, 0.5), x, d), 1e-6)


def test_other_real_dtypes_are_converted_to_float64(rng):
    f = ae.load(DECONV)
    x, c, z = deconv_inputs(rng)
    want = f(x.astype(np.float32).astype(np.float64), c, z)
    assert f(x.astype(np.float32), c, z) == want
    assert f(list(x.astype(np.float32)), c, z) == want
    ints = np.arange(9)
    assert f(ints, c, z) == f(ints.astype(np.float64), c, z)
    # a non-contiguous view is copied, not misread
    wide = np.zeros(18)
    wide[::2] = x
    assert f(wide[::2], c, z) == f(x, c, z)


def test_out_buffers_are_filled_and_returned(rng):
    f = ae.load(DECONV)
    args = deconv_inputs(rng)
    g = ae.grad(f, wrt=["c", "z"])
    out = (np.full(3, 7.0), np.full(7, 7.0))
    got = g(*args, out=out)
    assert got[0] is out[0] and got[1] is out[1]
    assert close(got, g(*args))
    with pytest.raises(ValueError, match=r"out= array 1 .*shape \(6,\), expected \(7,\)"):
        g(*args, out=(np.zeros(3), np.zeros(6)))
    with pytest.raises(TypeError, match="float64"):
        g(*args, out=(np.zeros(3, dtype=np.float32), np.zeros(7)))


def test_results_are_freed_when_dropped_without_the_garbage_collector(rng):
    # a result kept alive by a reference cycle would cost fresh memory (and
    # its page faults) on every call until the collector ran
    import gc
    import weakref
    f = ae.load(DECONV)
    args = deconv_inputs(rng)
    g = ae.grad(f, wrt=["c", "z"])
    gc.disable()
    try:
        got = g(*args)
        alive = [weakref.ref(got[0]), weakref.ref(got[1])]
        del got
        assert all(r() is None for r in alive), "a result outlived its last reference"
    finally:
        gc.enable()


def test_sizes_no_input_shows_are_given_by_name():
    f = ae.load("(fn f ((x (tensor n R)) (m size)) (sum i n (sum j m (get x i))))")
    assert f(np.ones(3), sizes={"m": 4}) == 12.0
    with pytest.raises(ValueError, match=r"size m cannot be inferred.*sizes=\{'m'"):
        f(np.ones(3))
    for bad in (True, 3.0, "3"):
        with pytest.raises(TypeError, match="size m must be an integer"):
            f(np.ones(3), sizes={"m": bad})
    with pytest.raises(ValueError, match="size m"):
        f(np.ones(3), sizes={"m": 2 ** 64 + 3})
    with pytest.raises(TypeError, match="unknown size 'k'"):
        f(np.ones(3), sizes={"m": 1, "k": 2})


def test_compiled_error_codes_raise_atl_error():
    f = ae.load("(fn f ((x (tensor n R)) (m size)) "
                "(let t (gen j (- m 2) (get x j)) (sum i n (get t i))))")
    assert f(np.ones(3), sizes={"m": 4}) == 2.0
    with pytest.raises(ae.AtlError) as e:
        f(np.ones(3), sizes={"m": 0})
    assert e.value.code == 1 and "negative" in str(e.value)


def test_derived_functions_have_their_own_text():
    g = ae.grad(ae.load(DECONV), wrt="c")
    text = g.atl_source()
    assert text.startswith("(fn deconv_signal_loss ((x (tensor (- (+ m n) 1) R))")
    assert ae.load(text).signature() == g.signature()


def test_optimized_functions_keep_their_values_and_result_shape(rng):
    f = ae.load(corpus("trace_diag_k8"))
    x = rng.uniform(-1, 1, 6)
    assert close(f.optimize()(x), f(x), 1e-12)
    vg = ae.value_and_grad(f, wrt=["x"])
    v, (dx,) = vg.optimize()(x)
    assert close(v, f(x), 1e-12) and close(dx, vg(x)[1][0], 1e-12)


MATMUL_LOSS = """
(fn matmul_loss ((a (tensor n n R)) (b (tensor n n R)))
  (sum i n (sum j n (* (sum k n (* (get (get a i) k) (get (get b k) j)))
                       (sum k n (* (get (get a i) k) (get (get b k) j)))))))
"""


def test_a_plain_call_takes_the_short_path_with_the_same_result(rng, monkeypatch):
    # float64 C-contiguous arrays and Python floats skip the general binding
    # of arguments; its result is the general path's, bit for bit
    from atl_egg._function import _Layout

    f = ae.load(DECONV)
    both = ae.value_and_grad(f, wrt=["x", "c"])
    scaled = ae.load("(fn scaled ((x (tensor n R)) (a R)) (gen i n (* a (get x i))))")
    calls = [(f, deconv_inputs(rng)), (both, deconv_inputs(rng)),
             (scaled, (rng.uniform(-1, 1, 5), 0.25))]
    general = []
    for fn, args in calls:
        fn.compile()
        assert fn._layout.plain is not None
        plan, fn._layout.plain = fn._layout.plain, None
        general.append(fn(*args))
        fn._layout.plain = plan

    def refused(*_):
        raise AssertionError("the general path ran")

    monkeypatch.setattr(_Layout, "leaf_values", refused)
    for (fn, args), want in zip(calls, general):
        got = fn(*args)
        assert repr(got) == repr(want)
    # anything else still takes the general path, which checks and converts
    monkeypatch.undo()
    x, c, z = deconv_inputs(rng)
    assert f(x.astype(np.float32), c, z) == f(x.astype(np.float32).astype(np.float64), c, z)
    assert scaled(np.ones(3), 2) == pytest.approx([2.0, 2.0, 2.0])
    with pytest.raises(ValueError, match="argument 'a' must be finite"):
        scaled(np.ones(3), float("nan"))
    with pytest.raises(ValueError, match="argument 'x' has a NaN or infinite element"):
        scaled(np.array([1.0, np.inf]), 1.0)


def test_threads_do_not_change_a_result(rng):
    # at n = 48 the product's loops are large enough to run in parallel;
    # parallel sums add their parts in a fixed order, so every thread
    # count gives the same bits
    a, b = rng.uniform(-1, 1, (48, 48)), rng.uniform(-1, 1, (48, 48))
    f = ae.load(MATMUL_LOSS)
    g = ae.grad(f, wrt=["a", "b"])
    base_value, base_grads = f(a, b), g(a, b)
    for threads in (1, 2, 3):
        f.threads = g.threads = threads
        assert f(a, b) == base_value
        for got, want in zip(g(a, b), base_grads):
            assert np.array_equal(got, want)
    assert close(base_value, reference(f, a, b))


def test_threads_are_set_by_load_and_the_transforms():
    f = ae.load(MATMUL_LOSS, threads=2)
    assert f.threads == 2
    assert ae.grad(f).threads == 2
    assert ae.grad(f, threads=1).threads == 1
    assert ae.value_and_grad(f, threads=3).threads == 3
    assert ae.load(f, threads=4).threads == 4 and f.threads == 2
    assert ae.load(MATMUL_LOSS).threads is None
    for bad, error in ((0, ValueError), (-1, ValueError), (1.5, TypeError), (True, TypeError),
                       ("2", TypeError)):
        with pytest.raises(error, match="threads"):
            ae.load(MATMUL_LOSS, threads=bad)
        with pytest.raises(error, match="threads"):
            f.threads = bad


NO_SUBPROCESS = """
import sys
import numpy as np, atl_egg as ae

def refuse(event, args):
    if event in ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn"):
        raise RuntimeError(event + " started a process: " + repr(args))

sys.addaudithook(refuse)
f = ae.load(%r)
args = np.ones(9), np.ones(3), np.ones(7)
g = ae.value_and_grad(f, wrt=["c", "z"])
value, (dc, dz) = g(*args)
assert f(*args) == value and dc.shape == (3,)
print("ok")
"""


def test_the_package_starts_no_process_to_compile_or_call(tmp_path):
    """The compiler is in the extension: loading, differentiating and
    calling run no `atl-egg` process (Python's audit events would show
    one). The C compiler is run by the extension, once per program, and
    cached; a fresh cache makes it run here."""
    import os
    import subprocess
    import sys

    from conftest import ROOT

    env = dict(os.environ, ATL_EGG_CACHE=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, "-c", NO_SUBPROCESS % DECONV], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
