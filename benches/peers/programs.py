"""The benchmark's programs: each once in ATL (programs/NAME.atl) and once in
JAX and in PyTorch, written the way their users would write them.

A program is a `Program`: the ATL file, the inputs it differentiates
(`wrt`, in the ATL parameter order), a function making the inputs for a
size, the JAX and PyTorch functions (positional, in the ATL parameter
order), the size used for the value cross-check, and the sizes timed in
the quick and full runs.  A size is a dict of the ATL size names plus `N`,
the one number the table shows.

Only `make_inputs` runs at import time of this module's users' choosing:
`jax` and `torch` are imported by `bind()` so that the thread settings can
be made in the environment first.
"""

import math
import os
from dataclasses import dataclass, field

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class Program:
    name: str
    kind: str  # "pathological" or "dense" or "sparse": how the notes group them
    params: list  # ATL parameter names, in order (sizes excluded)
    wrt: list
    make_inputs: object  # (size dict, rng) -> list of arrays, in `params` order
    check: dict
    quick: list
    full: list
    jax_f: object = None
    torch_f: object = None
    note: str = ""
    sizes_shown: object = None  # size dict -> short label for the table
    extra: dict = field(default_factory=dict)

    @property
    def atl(self):
        return os.path.join(HERE, "programs", self.name + ".atl")

    def label(self, size):
        if self.sizes_shown:
            return self.sizes_shown(size)
        return "N=%d" % size["N"]


def _normal(rng, *shape, scale=1.0):
    return rng.standard_normal(shape) * scale


def _vec(size, rng):
    return [_normal(rng, size["n"])]


def _conv_inputs(size, rng):
    n, m = size["n"], size["m"]
    return [_normal(rng, n + m - 1), _normal(rng, m, scale=1 / m), _normal(rng, n)]


def _lsq_inputs(size, rng):
    n, k, m = size["n"], size["k"], size["m"]
    return [_normal(rng, n, k), _normal(rng, k, m, scale=1 / math.sqrt(k)), _normal(rng, n, m)]


def _mlp_inputs(size, rng):
    b, d, h, c = size["b"], size["d"], size["h"], size["c"]
    labels = rng.integers(0, c, size=b)
    Y = np.zeros((b, c))
    Y[np.arange(b), labels] = 1.0
    return [
        _normal(rng, b, d),
        _normal(rng, d, h, scale=1 / math.sqrt(d)),
        _normal(rng, h, c, scale=1 / math.sqrt(h)),
        Y,
    ]


def _attention_inputs(size, rng):
    t, d = size["t"], size["d"]
    return [_normal(rng, t, d, scale=0.5) for _ in range(3)]


def _blur_inputs(size, rng):
    return [_normal(rng, size["h"], size["w"]), _normal(rng, 3, 3, scale=1 / 3)]


def _n(N):
    return {"N": N, "n": N}


def _conv(N, m=9):
    return {"N": N, "n": N, "m": m}


def _square(N):
    return {"N": N, "n": N, "k": N, "m": N}


def _mlp(b, d, h, c=10):
    return {"N": b, "b": b, "d": d, "h": h, "c": c}


def _att(t, d=64):
    return {"N": t, "t": t, "d": d}


def _img(N):
    return {"N": N, "h": N, "w": N}


PROGRAMS = [
    Program(
        "trace_diag_k8", "pathological", ["x"], ["x"], _vec,
        check=_n(16), quick=[_n(1024), _n(4096)], full=[_n(1024), _n(4096), _n(16384)],
        note="let A = diag(x) in trace(A) + ... + trace(A), k = 8 (paper, introduction)",
    ),
    Program(
        "dot_diag_col_row", "pathological", ["x"], ["x"], _vec,
        check=_n(16), quick=[_n(1024), _n(4096)], full=[_n(1024), _n(4096), _n(16384)],
        note="let A = diag(x) in dot(A[:,0], A[0,:]) (paper, introduction)",
    ),
    Program(
        "skip_x1_predicate", "pathological", ["x"], ["x"], _vec,
        check=_n(16), quick=[_n(256), _n(1024)], full=[_n(256), _n(1024), _n(4096), _n(16384)],
        note="x[0] + x[2] + x[3] + ... (paper, section 2.2): one bracketed sum in ATL, "
        "a sum of scalar reads in JAX and PyTorch",
    ),
    Program(
        "one_hot_select", "sparse", ["x"], ["x"], _vec,
        check=_n(16), quick=[_n(10**4), _n(10**5)], full=[_n(10**3), _n(10**4), _n(10**5), _n(10**6)],
        note="s = onehot(1) . x, loss s^2",
    ),
    Program(
        "deconv_kernel_loss", "dense", ["x", "w", "z"], ["w"], _conv_inputs,
        check=_conv(20), quick=[_conv(10**4), _conv(10**5)],
        full=[_conv(10**3), _conv(10**4), _conv(10**5), _conv(10**6)],
        note="1D convolution loss sum (x * w - z)^2, m = 9, gradient in the kernel w",
        sizes_shown=lambda s: "n=%d" % s["n"],
    ),
    Program(
        "deconv_signal_loss", "dense", ["x", "c", "z"], ["x"], _conv_inputs,
        check=_conv(20), quick=[_conv(10**4), _conv(10**5)],
        full=[_conv(10**3), _conv(10**4), _conv(10**5), _conv(10**6)],
        note="deconvolution loss sum (x * c - z)^2, m = 9, gradient in the signal x",
        sizes_shown=lambda s: "n=%d" % s["n"],
    ),
    Program(
        "matmul_lsq", "dense", ["A", "X", "B"], ["X"], _lsq_inputs,
        check={"N": 7, "n": 7, "k": 5, "m": 6}, quick=[_square(64), _square(256)],
        full=[_square(64), _square(128), _square(256), _square(512)],
        note="0.5 |A X - B|^2 over square n x n matrices, gradient in X",
        sizes_shown=lambda s: "n=%d" % s["n"],
    ),
    Program(
        "mlp_softmax_ce", "dense", ["X", "W1", "W2", "Y"], ["W1", "W2"], _mlp_inputs,
        check=_mlp(4, 5, 6, 3), quick=[_mlp(64, 64, 64), _mlp(256, 256, 256)],
        full=[_mlp(64, 64, 64), _mlp(256, 256, 256), _mlp(1024, 512, 512)],
        note="relu(X W1) W2, softmax cross-entropy, 10 classes, gradient in W1 and W2",
        sizes_shown=lambda s: "b=%d,d=h=%d" % (s["b"], s["d"]),
    ),
    Program(
        "causal_attention", "dense", ["Q", "K", "V"], ["Q", "K", "V"], _attention_inputs,
        check=_att(6, 4), quick=[_att(64), _att(256)], full=[_att(64), _att(256), _att(1024)],
        note="single-head causal attention, d = 64, loss |o|^2, gradient in Q, K, V",
        sizes_shown=lambda s: "t=%d" % s["t"],
    ),
    Program(
        "blur3x3", "dense", ["img", "k"], ["img"], _blur_inputs,
        check=_img(8), quick=[_img(64), _img(512)], full=[_img(64), _img(256), _img(1024)],
        note="3x3 blur (zero padded) of an N x N image, loss sum of squares, gradient in the image",
        sizes_shown=lambda s: "%dx%d" % (s["h"], s["w"]),
    ),
]


def bind():
    """Import JAX and PyTorch (after the thread settings) and attach each
    program's JAX and PyTorch functions."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import jax.scipy.signal
    import torch
    import torch.nn.functional as F

    def j_trace_diag_k8(x):
        A = jnp.diag(x)
        return (jnp.trace(A) + jnp.trace(A) + jnp.trace(A) + jnp.trace(A)
                + jnp.trace(A) + jnp.trace(A) + jnp.trace(A) + jnp.trace(A))

    def t_trace_diag_k8(x):
        A = torch.diag(x)
        return (torch.trace(A) + torch.trace(A) + torch.trace(A) + torch.trace(A)
                + torch.trace(A) + torch.trace(A) + torch.trace(A) + torch.trace(A))

    def j_dot_diag(x):
        A = jnp.diag(x)
        return jnp.dot(A[:, 0], A[0, :])

    def t_dot_diag(x):
        A = torch.diag(x)
        return torch.dot(A[:, 0], A[0, :])

    def skip_sum(x):  # the same Python for both: a sum of scalar reads
        s = x[0]
        for i in range(2, x.shape[0]):
            s = s + x[i]
        return s

    def j_one_hot(x):
        s = jax.nn.one_hot(1, x.shape[0], dtype=x.dtype) @ x
        return s * s

    def t_one_hot(x):
        s = F.one_hot(torch.tensor(1), x.shape[0]).to(x.dtype) @ x
        return s * s

    def j_conv_loss(x, w, z):
        r = jnp.convolve(x, w, mode="valid") - z
        return jnp.sum(r * r)

    def t_conv_loss(x, w, z):
        f = F.conv1d(x.view(1, 1, -1), w.flip(0).view(1, 1, -1)).view(-1)
        r = f - z
        return torch.sum(r * r)

    def j_lsq(A, X, B):
        R = A @ X - B
        return 0.5 * jnp.sum(R * R)

    def t_lsq(A, X, B):
        R = A @ X - B
        return 0.5 * torch.sum(R * R)

    def j_mlp(X, W1, W2, Y):
        Z = jax.nn.relu(X @ W1) @ W2
        return -jnp.sum(Y * jax.nn.log_softmax(Z, axis=-1))

    def t_mlp(X, W1, W2, Y):
        Z = torch.relu(X @ W1) @ W2
        return F.cross_entropy(Z, Y, reduction="sum")

    def j_attention(Q, K, V):
        t, d = Q.shape
        s = (Q @ K.T) / jnp.sqrt(d)
        s = jnp.where(jnp.tril(jnp.ones((t, t), dtype=bool)), s, -jnp.inf)
        o = jax.nn.softmax(s, axis=-1) @ V
        return jnp.sum(o * o)

    def t_attention(Q, K, V):
        o = F.scaled_dot_product_attention(Q, K, V, is_causal=True)
        return torch.sum(o * o)

    def j_blur(img, k):
        b = jax.scipy.signal.correlate2d(img, k, mode="same")
        return jnp.sum(b * b)

    def t_blur(img, k):
        b = F.conv2d(img[None, None], k[None, None], padding=1)[0, 0]
        return torch.sum(b * b)

    fns = {
        "trace_diag_k8": (j_trace_diag_k8, t_trace_diag_k8),
        "dot_diag_col_row": (j_dot_diag, t_dot_diag),
        "skip_x1_predicate": (skip_sum, skip_sum),
        "one_hot_select": (j_one_hot, t_one_hot),
        "deconv_kernel_loss": (j_conv_loss, t_conv_loss),
        "deconv_signal_loss": (j_conv_loss, t_conv_loss),
        "matmul_lsq": (j_lsq, t_lsq),
        "mlp_softmax_ce": (j_mlp, t_mlp),
        "causal_attention": (j_attention, t_attention),
        "blur3x3": (j_blur, t_blur),
    }
    for p in PROGRAMS:
        p.jax_f, p.torch_f = fns[p.name]
    return PROGRAMS
