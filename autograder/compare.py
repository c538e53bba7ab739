"""Comparisons that fail with a diagnosis: shapes, dtypes, values with dtype-aware tolerances.

Why: "wrong answer" teaches nothing. A failure says what was called, the shapes, the worst index
and the expected and actual values there, without printing whole (possibly hidden) inputs. Every
value compared here was decoded by the grader from plain data, so no student `__eq__` runs.
"""
from __future__ import annotations

import math

import numpy as np

from autograder.errors import CheckFailed

# (rtol, atol) by dtype, as torch.testing.assert_close uses them.
TOLERANCES = {
    "float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5), "float64": (1e-7, 1e-7),
}


def as_array(value, what: str = "") -> tuple[np.ndarray, str]:
    """A float64/int numpy view of a number, array or tensor, plus the dtype name it came with.

    `what` names the call in the failure when the value is not numbers at all.
    """
    try:
        return _as_array(value)
    except CheckFailed as exc:
        if what:
            raise CheckFailed(f"{what}: {exc}") from None
        raise


def _as_array(value) -> tuple[np.ndarray, str]:
    if hasattr(value, "detach") and hasattr(value, "dtype"):  # torch tensor decoded by the grader
        dtype = str(value.dtype).removeprefix("torch.")
        t = value.detach().cpu()
        if dtype == "bfloat16":
            t = t.float()
        return t.numpy(), dtype
    if isinstance(value, np.ndarray):
        return value, value.dtype.name
    if isinstance(value, np.generic):
        return np.asarray(value), value.dtype.name
    if isinstance(value, bool) or not isinstance(value, (int, float, list, tuple)):
        raise CheckFailed(f"expected a number or an array, got {type(value).__name__}")
    try:
        arr = np.asarray(value)  # a list of float32 scalars stays float32 and gets float32 tolerances
    except ValueError:
        raise CheckFailed("expected a rectangular array of numbers, got a ragged list") from None
    if arr.dtype.kind not in "fiub":
        raise CheckFailed(f"expected numbers, got values of type {arr.dtype}")
    if arr.dtype.kind != "f":
        arr = arr.astype(np.float64)
    return arr, arr.dtype.name


def parts(value, n: int, what: str) -> list:
    """A returned tuple of n values, or a clear failure."""
    if not isinstance(value, (tuple, list)) or len(value) != n:
        raise CheckFailed(f"{what}: expected a tuple of {n} values, got {type(value).__name__}"
                          + (f" of length {len(value)}" if isinstance(value, (tuple, list)) else ""))
    return list(value)


def as_bool(value, what: str) -> bool:
    """A Python or numpy bool (not a number, not an array of several)."""
    if isinstance(value, (bool, np.bool_)) or (
            isinstance(value, np.ndarray) and value.dtype == np.bool_ and value.shape == ()):
        return bool(value)
    raise CheckFailed(f"{what}: expected a bool, got {type(value).__name__} {value!r:.60}")


def assert_shape(got, shape: tuple, what: str) -> None:
    arr, _ = as_array(got, what)
    if tuple(arr.shape) != tuple(shape):
        raise CheckFailed(f"{what}: expected shape {tuple(shape)}, got {tuple(arr.shape)}.")


def assert_dtype(got, dtype: str, what: str) -> None:
    _, name = as_array(got, what)
    if name != dtype:
        raise CheckFailed(f"{what}: expected dtype {dtype}, got {name}.")


def assert_close(got, expected, what: str, *, rtol: float | None = None, atol: float | None = None,
                 check_dtype: bool = False, labels=None) -> None:
    """|got - expected| <= atol + rtol * |expected| elementwise, NaN matching NaN only.

    The default tolerance is torch.testing's for the EXPECTED value's dtype (float32: 1.3e-6/1e-5,
    float64: 1e-7/1e-7), or the check's explicit `rtol`/`atol`; never the dtype the student
    returned, so returning float16 loosens nothing. `labels` names the offending item in the
    message: a function of the index tuple, or a sequence indexed by the first index.
    """
    g, g_dtype = as_array(got, what)
    e, e_dtype = as_array(expected)
    if check_dtype and g_dtype != e_dtype:
        raise CheckFailed(f"{what}: expected dtype {e_dtype}, got {g_dtype}.")
    if g.shape != e.shape:
        raise CheckFailed(f"{what}: expected shape {tuple(e.shape)}, got {tuple(g.shape)}.")
    default = TOLERANCES.get(e_dtype, TOLERANCES["float64"])
    rtol = default[0] if rtol is None else rtol
    atol = default[1] if atol is None else atol
    g64, e64 = g.astype(np.float64), e.astype(np.float64)
    bad_nan = np.isnan(g64) != np.isnan(e64)
    if bad_nan.any():
        idx = _index(np.argmax(bad_nan), g.shape)
        raise CheckFailed(f"{what}: got {_fmt(g64[idx])}{' ' if idx else ''}{_where(idx, labels)} where {_fmt(e64[idx])} was expected "
                          f"({int(bad_nan.sum())} NaN mismatch(es)). Look for log(0), 0/0 or overflow in exp.")
    with np.errstate(invalid="ignore"):
        same_inf = np.isinf(e64) & (g64 == e64)
        err = np.where(np.isnan(e64) | same_inf, 0.0, np.abs(g64 - e64))
        allowed = atol + rtol * np.abs(np.where(np.isfinite(e64), e64, 0))
        bad = ~(err <= allowed)
    if bad.any():
        worst = _index(np.argmax(np.where(bad, err - allowed, -np.inf)), g.shape)
        exp_s, got_s = _fmt_pair(float(e64[worst]), float(g64[worst]))
        message = (f"{what}: {int(bad.sum())} of {g.size} value(s) differ beyond tolerance (rtol={rtol:g}, "
                   f"atol={atol:g}). Worst{' ' if worst else ''}{_where(worst, labels)}: expected {exp_s}, got {got_s} "
                   f"({_error_text(float(e64[worst]), float(g64[worst]))}).")
        finite = np.isfinite(err)
        if finite.any() and g.size > 1:
            message += f" Max abs error {_fmt(float(err[finite].max()))}."
        cause = _likely_cause(g64, e64, err, g_dtype, e_dtype)
        if cause:
            message += " " + cause
        raise CheckFailed(message)


_LOWER = {"float16": 1, "bfloat16": 1, "float32": 2, "float64": 3}


def _where(idx: tuple, labels) -> str:
    """'at index (2, 1)', or the caller's name for the item there."""
    if not idx:
        return ""
    name = None
    try:
        if callable(labels):
            name = labels(idx)
        elif labels is not None:
            name = labels[idx[0]]
    except Exception:  # noqa: BLE001 - a bad label must not hide the failure
        name = None
    index = str(idx[0]) if len(idx) == 1 else str(idx)
    return f"for {_short(name) if not isinstance(name, str) else name} (index {index})" if name is not None \
        else f"at index {index}"


def _error_text(e: float, g: float) -> str:
    """Absolute error, and the relative one only where it means something (expected not 0)."""
    if not (math.isfinite(e) and math.isfinite(g)):
        return "not finite"
    abs_err = abs(g - e)
    if e == 0:
        return f"abs error {_fmt(abs_err)}; expected 0, so no relative error"
    return f"abs error {_fmt(abs_err)}, rel error {_fmt(abs_err / abs(e))}"


def _likely_cause(g64, e64, err, g_dtype: str, e_dtype: str) -> str:
    """A specific symptom deserves a specific guess: float32 arithmetic where float64 was asked for."""
    if _LOWER.get(g_dtype, 3) < _LOWER.get(e_dtype, 3):
        return f"Your result is {g_dtype} where {e_dtype} was expected (computed in lower precision?)."
    if e_dtype != "float64":
        return ""
    finite = np.isfinite(e64) & np.isfinite(g64)
    if not finite.any():
        return ""
    scale = float(np.abs(e64[finite]).max())
    worst = float(err[finite].max())
    if scale > 0 and 1e-9 * scale < worst < 3e-5 * scale:
        return ("The errors are of float32 rounding size although float64 was expected: computed in float32? "
                "(look for .float(), dtype=torch.float32, np.float32 or a float32 constant tensor).")
    return ""


def assert_equal(got, expected, what: str) -> None:
    """Exact equality of plain data (lists, dicts, sets, strings, ints), with the first difference."""
    problem = _difference(got, expected, "")
    if problem:
        raise CheckFailed(f"{what}: {problem}")


def _difference(got, expected, path: str) -> str | None:
    at = f" at {path}" if path else ""
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return f"expected a dict{at}, got {type(got).__name__}"
        missing = [k for k in expected if k not in got]
        extra = [k for k in got if k not in expected]
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"{len(missing)} missing key(s), e.g. {_short(missing[0])}")
            if extra:
                parts.append(f"{len(extra)} unexpected key(s), e.g. {_short(extra[0])}")
            return f"{'; '.join(parts)}{at} (expected {len(expected)} keys, got {len(got)})"
        for k in expected:
            problem = _difference(got[k], expected[k], f"{path}[{_short(k)}]")
            if problem:
                return problem
        return None
    if isinstance(expected, (set, frozenset)):
        if not isinstance(got, (set, frozenset, list, tuple)):
            return f"expected a set{at}, got {type(got).__name__}"
        got_set = set(got)
        if got_set != expected:
            missing, extra = sorted(map(str, expected - got_set)), sorted(map(str, got_set - expected))
            parts = [f"{len(missing)} missing, e.g. {missing[0]!r}"] if missing else []
            parts += [f"{len(extra)} unexpected, e.g. {extra[0]!r}"] if extra else []
            return f"{'; '.join(parts)}{at} (expected {len(expected)} items, got {len(got_set)})"
        return None
    if isinstance(expected, (list, tuple)):
        if not isinstance(got, (list, tuple)):
            return f"expected a {type(expected).__name__}{at}, got {type(got).__name__}"
        for i, (g, e) in enumerate(zip(got, expected)):
            problem = _difference(g, e, f"{path}[{i}]")
            if problem:
                return problem
        if len(got) != len(expected):
            return f"expected length {len(expected)}{at}, got {len(got)}"
        return None
    if isinstance(expected, float) or isinstance(got, float):
        if isinstance(got, (int, float)) and not isinstance(got, bool) and (
                got == expected or (math.isnan(got) and math.isnan(expected))):
            return None
        return f"expected {_short(expected)}{at}, got {_short(got)}"
    if type(got) is not type(expected) and not (isinstance(got, int) and isinstance(expected, int)):
        return f"expected {type(expected).__name__} {_short(expected)}{at}, got {type(got).__name__} {_short(got)}"
    if got != expected:
        return f"expected {_short(expected)}{at}, got {_short(got)}"
    return None


def assert_finite(got, what: str) -> None:
    arr, _ = as_array(got, what)
    bad = ~np.isfinite(arr.astype(np.float64))
    if bad.any():
        idx = _index(np.argmax(bad), arr.shape)
        raise CheckFailed(f"{what}: {int(bad.sum())} value(s) are NaN or infinite, first at index {idx} "
                          f"({arr.astype(np.float64)[idx]}). Use a numerically stable formulation.")


def _index(flat: int, shape: tuple):
    return tuple(int(i) for i in np.unravel_index(int(flat), shape)) if shape else ()


def _fmt(x: float) -> str:
    if isinstance(x, (float, np.floating)) and math.isnan(x):
        return "NaN"
    return f"{x:.6g}"


def _fmt_pair(expected: float, got: float) -> tuple[str, str]:
    """Both numbers with as many significant digits as it takes to see them differ (6 to 17)."""
    if not (math.isfinite(expected) and math.isfinite(got)):
        return _fmt(expected), _fmt(got)
    for digits in range(6, 18):
        e, g = f"{expected:.{digits}g}", f"{got:.{digits}g}"
        if e != g:
            return e, g
    return repr(expected), repr(got)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
