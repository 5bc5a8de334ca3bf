"""Bad input is refused before native code runs, with the argument and
the expected shape named; nothing is left behind on disk, whatever fails;
the cache is reused."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import atl_egg as ae
from conftest import ROOT, corpus

DECONV = corpus("deconv_signal_loss")


@pytest.fixture(scope="module")
def f():
    return ae.load(DECONV)


X, C, Z = np.zeros(9), np.zeros(3), np.zeros(7)


@pytest.mark.parametrize("args, kwargs, error, pattern", [
    ((X[:-1], C, Z), {}, ValueError,
     r"argument 'x' has shape \(8,\), expected \(m \+ n - 1,\) = \(9,\) at n=7, m=3"),
    # a transposed matrix or a swapped input: the argument that is wrong is named
    ((X, C, Z[:5]), {}, ValueError, r"argument 'x' has shape \(9,\), expected \(m \+ n - 1,\) = \(7,\)"),
    ((X, C.reshape(1, 3), Z), {}, ValueError, r"argument 'c' must be an array of shape \(m,\) \(1 dimension\)"),
    ((X, C), {}, TypeError, r"missing argument 'z' \(an array of shape \(n,\)\)"),
    ((X,), {}, TypeError, r"missing arguments 'c' \(an array of shape \(m,\)\), 'z' \(an array"),
    ((X, C, Z, Z), {}, TypeError, r"4 arguments given, the function takes 3 \(x, c, z\)"),
    ((X, C, Z), {"w": Z}, TypeError, r"unknown argument 'w' \(the inputs are x, c, z\)"),
    ((X, C), {"c": C, "z": Z}, TypeError, r"argument 'c' given twice"),
    ((X, C.astype(complex), Z), {}, TypeError, r"argument 'c' must be an array of real numbers"),
    ((X, C.astype(bool), Z), {}, TypeError, r"argument 'c' must be an array of real numbers"),
    ((X, np.array(["a", "b", "c"]), Z), {}, TypeError, r"argument 'c' must be an array of real"),
    ((X, None, Z), {}, TypeError, r"argument 'c' must be an array of shape \(m,\), got NoneType"),
    ((X, 1.5, Z), {}, TypeError, r"argument 'c' must be an array of shape \(m,\), got float"),
    ((X, np.array([0.0, np.nan, 1.0]), Z), {}, ValueError,
     r"argument 'c' has a NaN or infinite element \(at index \(1,\)\)"),
    ((X, C, np.full(7, np.inf)), {}, ValueError, r"argument 'z' has a NaN or infinite element"),
])
def test_bad_arguments_are_named(f, args, kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        f(*args, **kwargs)


def test_a_non_finite_element_is_found_in_every_dimension_and_block():
    g = ae.load("(fn s ((A (tensor n m R))) (sum i n (sum j m (get A i j))))")
    A = np.ones((3, 2000))
    for at in [(0, 0), (1, 47), (2, 1999)]:
        A[at] = -np.inf
        with pytest.raises(ValueError, match=r"argument 'A' has a NaN or infinite element "
                                             r"\(at index \(%d, %d\)\)" % at):
            g(A)
        A[at] = 1.0
    assert g(A) == 6000.0


def test_check_finite_false_skips_the_check_and_is_inherited(f):
    g = ae.load(DECONV, check_finite=False)
    assert f.check_finite and not g.check_finite
    assert np.isnan(g(X, np.array([0.0, np.nan, 1.0]), Z))
    assert not ae.grad(g).check_finite and ae.grad(f).check_finite
    assert not g.optimize().check_finite
    assert not ae.load(g).check_finite and ae.load(g, check_finite=True).check_finite
    with pytest.raises(TypeError, match="check_finite takes True or False"):
        g.check_finite = "no"


class _CountingKernel:
    """A compiled function's kernel that counts the calls of its native code."""

    def __init__(self, kernel):
        self._kernel, self.calls = kernel, 0

    def __getattr__(self, name):
        return getattr(self._kernel, name)

    def call(self, *args):
        self.calls += 1
        return self._kernel.call(*args)


def test_bad_arguments_are_refused_before_the_compiled_code_runs():
    g = ae.load(DECONV).compile()
    g._kernel = counting = _CountingKernel(g._kernel)
    out = np.full((), 7.0)
    bad_calls = [
        ((X[:-1], C, Z), {}), ((X, C, Z[:5]), {}), ((X, C.reshape(1, 3), Z), {}),
        ((X, C), {}), ((X, C, Z, Z), {}), ((X, C, Z), {"w": Z}),
        ((X, C.astype(complex), Z), {}), ((X, np.array([0.0, np.nan, 1.0]), Z), {}),
        ((X, C, Z), {"sizes": {"k": 2}}), ((X, C, Z), {"sizes": {"n": 2.0}}),
        ((X, C, Z), {"out": np.zeros(2)}), ((X, C, Z), {"out": np.zeros((), dtype=np.float32)}),
    ]
    for args, kwargs in bad_calls:
        with pytest.raises((TypeError, ValueError)):
            g(*args, **kwargs)
    assert counting.calls == 0
    assert g(X, C, Z, out=out) == 0.0 and out == 0.0 and counting.calls == 1  # out= written


def test_real_and_pair_arguments_are_checked():
    g = ae.load(corpus("pair_moments"))
    p = (np.zeros(4), np.zeros(4))
    for bad in (None, np.zeros(3), True, 1j, "0.5"):
        with pytest.raises(TypeError, match="argument 'c' must be a real number"):
            g(p, bad)
    with pytest.raises(ValueError, match="argument 'c' must be finite"):
        g(p, float("nan"))
    with pytest.raises(TypeError, match="argument 'p' must be a pair"):
        g(np.zeros(4), 0.5)
    with pytest.raises(TypeError, match=r"missing argument 'p' \(a tuple \(an array of shape \(n,\), "
                                        r"an array of shape \(n,\)\)\)"):
        g(c=0.5)
    with pytest.raises(TypeError, match=r"missing argument 'c' \(a real number\)"):
        g(p)
    with pytest.raises(ValueError, match=r"disagree on size n: argument 'p' component 0 of shape "
                                         r"\(n,\) has n = 4, argument 'p' component 1 of shape \(n,\) has n = 3"):
        g((np.zeros(4), np.zeros(3)), 0.5)
    with pytest.raises(ValueError, match=r"argument 'p' component 1 has shape \(3,\), expected \(n,\) = \(4,\)"):
        g((np.zeros(4), np.zeros(3)), 0.5, sizes={"n": 4})


def test_relations_must_be_boolean():
    h = ae.load(corpus("graph_smoothness"))
    with pytest.raises(TypeError, match=r"argument 'E' must be a boolean \(or 0/1\) array"):
        h(np.full((3, 3), 2), np.zeros(3), 0.5)


def test_wrt_is_checked(f):
    with pytest.raises(ValueError, match=r"wrt='w': deconv_signal_loss has no input 'w'"):
        ae.grad(f, wrt="w")
    with pytest.raises(ValueError, match=r"wrt=3: deconv_signal_loss has 3 inputs"):
        ae.grad(f, wrt=3)
    with pytest.raises(ValueError, match="twice"):
        ae.grad(f, wrt=["c", "c"])
    with pytest.raises(ae.AtlError, match="returns"):
        ae.grad(corpus("pair_moments"))  # grad needs a real result


def test_program_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.atl"
    bad.write_text("(fn f ((x (tensor n R)))\n  (sum i n (+ (get x i) x)))\n")
    with pytest.raises(ae.AtlError) as e:
        ae.load(str(bad))
    assert e.value.kind == "type" and e.value.line == 2
    assert "%s:2:" % bad in str(e.value)
    with pytest.raises(FileNotFoundError):
        ae.load(str(tmp_path / "missing.atl"))


def test_the_native_layer_refuses_wrong_buffers(f):
    """The extension re-checks every buffer, whoever calls it."""
    f.compile()
    kernel = f._kernel
    with pytest.raises(ValueError, match="input buffer 0 has 8 elements, expected 9"):
        kernel.call([7, 3], [np.zeros(8), np.zeros(3), np.zeros(7)], [np.zeros(1)])
    with pytest.raises(BufferError):
        kernel.call([7, 3], [np.zeros(9, dtype=np.float32), np.zeros(3), np.zeros(7)], [np.zeros(1)])
    with pytest.raises(ValueError, match="size n is negative"):
        kernel.call([-1, 3], [np.zeros(2), np.zeros(3), np.zeros(0)], [np.zeros(1)])
    ro = np.zeros(1)
    ro.flags.writeable = False
    with pytest.raises(Exception):
        kernel.call([7, 3], [X, C, Z], [ro])


SCRIPT = textwrap.dedent("""
    import numpy as np, atl_egg as ae
    f = ae.load(%r)
    f(np.zeros(9), np.zeros(3), np.zeros(7))
    ae.value_and_grad(f, wrt=["c", "z"])(np.zeros(9), np.zeros(3), np.zeros(7))
    try:
        ae.load("(fn f ((x R)) (+ x y))")
    except ae.AtlError:
        pass
    try:
        ae.grad(%r)
    except ae.AtlError:
        pass
    print("ok")
""") % (DECONV, corpus("pair_moments"))


def run_script(env_changes, script=SCRIPT):
    env = {k: v for k, v in os.environ.items()
           if k not in ("ATL_EGG_CACHE", "XDG_CACHE_HOME", "HOME", "TMPDIR", "CC")}
    env.update(env_changes)
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                       cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_no_file_is_left_without_a_cache(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    run_script({"TMPDIR": str(tmp)})
    assert os.listdir(tmp) == []


def test_the_cache_holds_only_libraries_and_their_hashes_and_is_reused(tmp_path):
    tmp, cache = tmp_path / "tmp", tmp_path / "cache"
    tmp.mkdir()
    run_script({"TMPDIR": str(tmp), "ATL_EGG_CACHE": str(cache)})
    assert os.listdir(tmp) == []
    first = sorted(os.listdir(cache))
    assert first and all(n.startswith("atl-") and n.endswith((".so", ".sha256")) for n in first)
    stamps = {n: os.stat(cache / n).st_mtime_ns for n in first}
    run_script({"TMPDIR": str(tmp), "ATL_EGG_CACHE": str(cache)})
    assert sorted(os.listdir(cache)) == first
    assert {n: os.stat(cache / n).st_mtime_ns for n in first} == stamps  # not rebuilt


FAILING_BUILD = textwrap.dedent("""
    import numpy as np, atl_egg as ae
    f = ae.load("(fn f ((x (tensor n R))) (sum i n (* (get x i) 3.5)))")
    try:
        f(np.ones(3))
    except ae.AtlError as e:
        assert "compil" in str(e), e
        print("ok")
""")


@pytest.mark.parametrize("cc", ["false", "no-such-compiler-atl-egg"])
def test_no_file_is_left_when_the_c_compiler_fails(tmp_path, cc):
    tmp, cache = tmp_path / "tmp", tmp_path / "cache"
    tmp.mkdir()
    run_script({"TMPDIR": str(tmp), "ATL_EGG_CACHE": str(cache), "CC": cc}, FAILING_BUILD)
    assert os.listdir(tmp) == []
    assert not cache.exists() or os.listdir(cache) == []
