"""What the checks of training functions share, whatever the model: the losses a run returns, the
weights it leaves, the settings as a caller writes them, and one torch thread for the grader's runs.

Why one module: rnn_lm and transformer grade their training loops the same way (exact steps from a
start the grader chose, then a whole run), and a student reads the same words for the same mistake
in both.
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import torch

from autograder.checking.compare import assert_close, assert_shape
from autograder.errors import CheckFailed


@contextmanager
def one_thread():
    """The grader's own training runs on one torch thread, as the worker's do (also a decorator: `@one_thread()`).

    Why: these small steps only lose time to threading, much more so on a busy machine, and a reference
    figure computed on one thread is the same on every machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def spelled(settings: dict) -> str:
    """Keyword arguments as a caller writes them: "steps=2, lr=0.5"."""
    return ", ".join(f"{k}={v}" for k, v in settings.items())


def float_list(value, what: str, n: int | None = None) -> np.ndarray:
    """The losses a training function returned: a list of (n) Python floats, one per step, as its docstring says."""
    if not isinstance(value, list) or not all(isinstance(v, float) and not isinstance(v, bool) for v in value):
        kind = type(value[0]).__name__ if isinstance(value, list) and value else type(value).__name__
        raise CheckFailed(f"{what} should return a list of Python floats (loss.item() per step), got a "
                          f"{type(value).__name__} of {kind}: a list of tensors keeps every step's graph alive.")
    if n is not None and len(value) != n:
        raise CheckFailed(f"{what}: expected a list of {n} losses (one per step), got {len(value)}")
    return np.array(value, dtype=np.float64)


def checked_state(state, like: dict, what: str) -> dict:
    """The weights a training left (a state_dict): every name of `like`, tensors of its shapes (`like`'s values are
    tensors or shapes), finite."""
    if not isinstance(state, dict):
        raise CheckFailed(f"{what}: expected model.state_dict() (a dict of tensors), got {type(state).__name__}")
    out = {}
    for name, expected in like.items():
        if name not in state:
            raise CheckFailed(f"{what}: the state_dict has no `{name}`; keep the starter's attribute names")
        value = state[name]
        if not isinstance(value, torch.Tensor):
            raise CheckFailed(f"{what}: state_dict[{name!r}] is not a tensor but {type(value).__name__}")
        assert_shape(value, tuple(getattr(expected, "shape", expected)), f"{what}: state_dict[{name!r}]")
        if not bool(torch.isfinite(value).all()):
            raise CheckFailed(f"{what}: state_dict[{name!r}] has NaN or infinite values: training diverged")
        out[name] = value.detach()
    return out


def assert_same_weights(state, expected: dict, what: str, after: str, rtol: float, atol: float) -> None:
    """Exact steps: every weight a training left (`state`, a state_dict) equals the grader's after the same steps."""
    got = checked_state(state, expected, what)
    for name, value in expected.items():
        assert_close(got[name], value, f"{what}: `{name}` {after}", rtol=rtol, atol=atol)
