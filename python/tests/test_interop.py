"""atl-egg functions inside PyTorch and JAX, against the frameworks' own
gradients; skipped when a framework is not installed (neither is a
dependency of the package)."""

import numpy as np
import pytest

import atl_egg as ae

n, m = ae.sizes("n m")


@ae.function
def loss(w: ae.R[n], X: ae.R[m, n], y: ae.R[m]):
    return ae.sum(m, lambda i: ae.log(1 + ae.exp(-y[i] * ae.sum(n, lambda j: X[i, j] * w[j]))))


def data(seed=3):
    rng = np.random.default_rng(seed)
    return rng.normal(size=4), rng.normal(size=(6, 4)), np.sign(rng.normal(size=6))


def test_torch_gradients_match_autograd():
    torch = pytest.importorskip("torch")
    w, X, y = (torch.tensor(a, dtype=torch.float64) for a in data())
    w_atl = w.clone().requires_grad_(True)
    w_ref = w.clone().requires_grad_(True)
    X_atl = X.clone().requires_grad_(True)
    X_ref = X.clone().requires_grad_(True)
    value = ae.to_torch(loss)(w_atl, X_atl, y)
    value.backward()
    ref = torch.nn.functional.softplus(-y * (X_ref @ w_ref)).sum()
    ref.backward()
    assert torch.allclose(value, ref, rtol=1e-12)
    assert torch.allclose(w_atl.grad, w_ref.grad, rtol=1e-10)
    assert torch.allclose(X_atl.grad, X_ref.grad, rtol=1e-10)


def test_jax_gradients_match_jax_grad():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    w, X, y = (jnp.asarray(a) for a in data())
    f = ae.to_jax(loss)

    def ref(w, X, y):
        return jnp.sum(jnp.logaddexp(0.0, -y * (X @ w)))

    assert np.allclose(jax.jit(f)(w, X, y), ref(w, X, y), rtol=1e-12)
    got = jax.jit(jax.grad(f, argnums=(0, 1)))(w, X, y)
    want = jax.grad(ref, argnums=(0, 1))(w, X, y)
    for g, r in zip(got, want):
        assert np.allclose(g, r, rtol=1e-10)


@ae.function
def layer(w: ae.R[n], X: ae.R[m, n]):
    return ae.gen(m, lambda i: ae.tanh(ae.sum(n, lambda j: X[i, j] * w[j])))


def test_torch_vjp_of_a_tensor_result_matches_autograd():
    torch = pytest.importorskip("torch")
    w, X, _ = data(5)
    ct = torch.tensor(np.random.default_rng(6).normal(size=6), dtype=torch.float64)
    got = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (w, X)]
    ref = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (w, X)]
    out = ae.to_torch(layer)(*got)
    want = torch.tanh(ref[1] @ ref[0])
    assert out.shape == (6,) and torch.allclose(out, want, rtol=1e-12)
    out.backward(ct)
    want.backward(ct)
    for g, r in zip(got, ref):
        assert torch.allclose(g.grad, r.grad, rtol=1e-10)


def test_jax_vjp_of_a_tensor_result_matches_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    w, X, _ = (jnp.asarray(a) for a in data(5))
    ct = jnp.asarray(np.random.default_rng(6).normal(size=6))
    out, back = jax.vjp(ae.to_jax(layer), w, X)
    want, back_ref = jax.vjp(lambda w, X: jnp.tanh(X @ w), w, X)
    assert out.shape == (6,) and np.allclose(out, want, rtol=1e-12)
    for g, r in zip(back(ct), back_ref(ct)):
        assert np.allclose(g, r, rtol=1e-10)
