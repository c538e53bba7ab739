"""Gradient checks: central finite differences, and the student's autograd against the reference's.

Why float64: with a step of 1e-6 a central difference is accurate to about 1e-10 in float64 and
useless in float32, so gradients are always compared in float64 (as torch.autograd.gradcheck).
"""
from __future__ import annotations

import numpy as np

from autograder.checking.compare import as_array, assert_close
from autograder.errors import CheckFailed


def finite_difference(f, x: np.ndarray, eps: float = 1e-6, *, batch=None) -> np.ndarray:
    """d f(x) / dx for a scalar f by central differences, in float64.

    `batch(list_of_x) -> list_of_values` evaluates many points in one go (e.g. `student.fn.map`),
    which matters when every evaluation is a round trip to the student's process.
    """
    x = np.asarray(x, dtype=np.float64)
    points = []
    for i in range(x.size):
        for sign in (+1, -1):
            xp = x.copy().ravel()
            xp[i] += sign * eps
            points.append(xp.reshape(x.shape))
    values = batch(points) if batch else [f(p) for p in points]
    values = np.array([float(as_array(v)[0]) for v in values], dtype=np.float64)
    return ((values[0::2] - values[1::2]) / (2 * eps)).reshape(x.shape)


def relative_error(got, expected) -> float:
    """max |g - e| / max(|g| + |e|, tiny): the gradient checker's usual summary number."""
    g = as_array(got)[0].astype(np.float64)
    e = as_array(expected)[0].astype(np.float64)
    return float(np.max(np.abs(g - e) / np.maximum(np.abs(g) + np.abs(e), 1e-12), initial=0.0))


def assert_gradient(got, expected, what: str, *, rtol: float = 1e-7, atol: float = 1e-9) -> None:
    """Gradients in float64 with tight tolerances, and all-zero gradients never pass by accident."""
    e = as_array(expected)[0]
    if np.all(as_array(got, what)[0] == 0) and np.any(e != 0):
        raise CheckFailed(f"{what}: the gradient is all zeros; is the backward pass connected to the inputs?")
    assert_close(got, expected, what, rtol=rtol, atol=atol)
