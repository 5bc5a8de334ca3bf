"""The README's Python example, run as it is written (from the
repository's root), and its result checked against NumPy."""

import os
import re

import numpy as np

from conftest import ROOT


def readme_python_example():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## From Python"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_example_runs_and_is_right(monkeypatch):
    code = readme_python_example()
    assert len(code.strip().splitlines()) <= 8  # loss and gradient, import included
    monkeypatch.chdir(ROOT)
    np.random.seed(5)
    env = {}
    exec(compile(code, "README.md", "exec"), env)
    w, X, y = np.zeros(3), None, None
    np.random.seed(5)
    X, y = np.random.rand(5, 3), np.sign(np.random.randn(5))
    margin = y * (X @ w)
    assert np.isclose(env["value"], np.sum(np.log1p(np.exp(-margin))), rtol=1e-12)
    assert np.allclose(env["dw"], X.T @ (-y / (1 + np.exp(margin))), rtol=1e-12)
    assert "(fn loss ((w (tensor n R))" in env["loss"].atl_source()


def test_the_worked_example_of_the_python_docs_runs_and_descends():
    with open(os.path.join(ROOT, "docs", "python.md"), encoding="utf-8") as f:
        text = f.read()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    env = {}
    exec(compile(code, "docs/python.md", "exec"), env)
    X, y, w = env["X"], env["y"], env["w"]
    first = np.sum(np.log1p(np.exp(-y * (X @ np.zeros(5)))))
    assert env["value"] < first  # the gradient steps lowered the loss
    assert np.isclose(env["value"], env["loss"](w + 0.01 * env["dw"], X, y), rtol=1e-12)
    assert "(sum i m (log (+ 1 (exp" in env["loss"].atl_source()
