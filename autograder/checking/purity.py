"""Side effects and repeatability: does a student's function leave its inputs alone, and give the
same answer twice?

Why: a function that sorts its caller's list, normalizes an array in place or adds positions into
its input tensor returns the right value once and corrupts everything after it. Comparing return
values never shows that, so the arguments are stored in the student's process first, the function
is called on those very objects, and they are read back and compared with what the grader sent.
A function that lies about its inputs can only hide its own bug of this kind; every value it
returns is still checked by the caller.
"""
from __future__ import annotations

import math

import numpy as np

from autograder.checking.remote import Remote, _describe, describe_args
from autograder.errors import CheckFailed

__all__ = ["assert_global_generators_untouched", "call_pure", "call_twice", "first_difference"]


def call_pure(fn: Remote, *args, what: str | None = None, **kwargs):
    """`fn(*args, **kwargs)` in the student's process; fails if the call changed any argument."""
    student = fn._student
    what = what or f"{fn._label}({describe_args(args, kwargs)})"
    sent_args, sent_kwargs, stored = [], {}, []
    for position, value in enumerate(args):
        sent_args.append(_store(student, value, f"argument {position + 1}", stored))
    for key, value in kwargs.items():
        sent_kwargs[key] = _store(student, value, f"argument `{key}`", stored)
    result = fn(*sent_args, **sent_kwargs)
    for label, original, handle in stored:
        after = handle.get()
        difference = first_difference(original, after) or _flag_change(original, after)
        if difference is not None:
            raise CheckFailed(f"{what} changed its {label} ({difference}); the docstring says inputs are not "
                              "modified. Work on a copy (x.copy(), x.clone(), list(x)) or use operations that "
                              "return new objects instead of in-place ones (+= on an array, masked_fill_, sort()).")
    return result


def call_twice(fn: Remote, *args, what: str | None = None, **kwargs):
    """Two identical calls must give identical results; returns the first."""
    what = what or f"{fn._label}({describe_args(args, kwargs)})"
    first = fn(*args, **kwargs)
    second = fn(*args, **kwargs)
    difference = first_difference(first, second)
    if difference is not None:
        raise CheckFailed(f"two identical calls {what} returned different results ({difference}): is randomness "
                          "left on (a generator created without the given seed), or does the function keep state "
                          "between calls (a global, a default argument that is a list)?")
    return first


def _flag_change(original, after, path: str = "") -> str | None:
    """A tensor argument whose requires_grad the call switched (`x.requires_grad_()` on the caller's tensor: every
    later use of it builds a graph). The worker's flag comes back with the values, so no extra request."""
    if _is_tensor(original):
        now = getattr(after, "lmgrade_requires_grad", getattr(after, "requires_grad", original.requires_grad))
        return None if now == original.requires_grad else \
            f"requires_grad {original.requires_grad} became {now}{f' at {path}' if path else ''}"
    if isinstance(original, (list, tuple)) and isinstance(after, (list, tuple)):
        pairs = [(f"{path}[{i}]", o, a) for i, (o, a) in enumerate(zip(original, after))]
    elif isinstance(original, dict) and isinstance(after, dict):
        pairs = [(f"{path}[{k!r}]", original[k], after[k]) for k in original if k in after]
    else:
        return None
    return next((change for where, o, a in pairs if (change := _flag_change(o, a, where))), None)


def _store(student, value, label: str, stored: list):
    """Mutable values go to the worker once and are passed by handle; others are sent as they are."""
    if not _mutable(value):
        return value
    handle = student.put(value, label)
    handle._label = _describe(value)  # failures inside the call show shapes, not `<Tensor>`
    stored.append((label, value, handle))
    return handle


def _mutable(value) -> bool:
    if isinstance(value, (list, dict, set, np.ndarray)) or _is_tensor(value):
        return True
    return isinstance(value, tuple) and any(_mutable(v) for v in value)


def _is_tensor(value) -> bool:
    return not isinstance(value, Remote) and hasattr(value, "detach") and hasattr(value, "dtype") and hasattr(value, "shape")


def first_difference(expected, got, path: str = "") -> str | None:
    """A short description of where two plain values differ (None when they are identical)."""
    where = f" at {path}" if path else ""
    if _is_tensor(expected) or isinstance(expected, np.ndarray):
        e = expected.detach().cpu().numpy() if _is_tensor(expected) else expected
        if not (_is_tensor(got) or isinstance(got, np.ndarray)):
            return f"an array became {type(got).__name__}{where}"
        g = got.detach().cpu().numpy() if _is_tensor(got) else got
        if e.shape != g.shape:
            return f"shape {tuple(e.shape)} became {tuple(g.shape)}{where}"
        if str(e.dtype) != str(g.dtype):
            return f"dtype {e.dtype} became {g.dtype}{where}"
        same = (e == g) | ((e != e) & (g != g)) if e.dtype.kind in "fc" else (e == g)
        if not np.all(same):
            index = tuple(int(i) for i in np.argwhere(~np.asarray(same))[0])
            return f"element {index}{where} was {e[index]!r}, now {g[index]!r}"
        return None
    if isinstance(expected, float) and isinstance(got, float) and math.isnan(expected) and math.isnan(got):
        return None
    if isinstance(expected, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(expected):
            return f"{_size(expected)} became {_size(got)}{where}"
        for i, (e, g) in enumerate(zip(expected, got)):
            difference = first_difference(e, g, f"{path}[{i}]")
            if difference is not None:
                return difference
        return None
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return f"a dict became {type(got).__name__}{where}"
        if set(expected) != set(got):
            extra = sorted(map(repr, set(got) - set(expected)))[:3]
            gone = sorted(map(repr, set(expected) - set(got)))[:3]
            return f"keys changed{where}" + (f": added {', '.join(extra)}" if extra else "") + \
                (f"; removed {', '.join(gone)}" if gone else "")
        for key in expected:
            difference = first_difference(expected[key], got[key], f"{path}[{key!r}]")
            if difference is not None:
                return difference
        return None
    if type(expected) is not type(got) and not (isinstance(expected, (int, float)) and isinstance(got, (int, float))
                                                 and not isinstance(got, bool) and not isinstance(expected, bool)):
        return f"{type(expected).__name__} became {type(got).__name__}{where}"
    if expected != got:
        return f"{expected!r} became {got!r}{where}"
    return None


def _size(value) -> str:
    return f"{type(value).__name__} of {len(value)}" if isinstance(value, (list, tuple)) else type(value).__name__


def assert_global_generators_untouched(student, call, what: str, *, seed: int) -> None:
    """`call()` draws only from its own generator: the global ones are left where the grader put them.

    The grader seeds numpy's, Python's and (where the process has it) torch's global generators in the
    student's process, runs the call, then takes 8 draws from each and compares them with its own draws
    from the same seed: a call that reseeds (`np.random.seed`, `random.seed`, `torch.manual_seed` inside)
    or draws without its own generator moves them. Fail-only.
    """
    import random

    student.support("seed_global_generator", seed)
    call()
    got = np.asarray(student.support("global_draws", 8).get(), dtype=np.float64)
    python = random.Random(seed)
    expected = [None, np.random.RandomState(seed % 2 ** 32).random_sample(8), np.array([python.random() for _ in range(8)])]
    if got.shape != (3, 8):
        raise CheckFailed(f"{what}: the grader could not read the global generators back after the call.")
    if not np.isnan(got[0]).all():  # the student's process has torch
        import torch
        expected[0] = torch.rand(8, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)).numpy()
    moved = [name for name, g, e in zip(("torch's", "numpy's", "Python's `random`"), got, expected)
             if e is not None and not np.array_equal(g, e)]
    if moved:
        raise CheckFailed(f"{what} changed {' and '.join(moved)} global random generator (seeding it inside, or "
                          "drawing from it): every other random draw of the program then depends on this call. "
                          "Draw every number from a generator made in the call from its seed.")

