"""Comparisons that fail with a diagnosis: shapes, dtypes, values with dtype-aware tolerances.

Why: "wrong answer" teaches nothing. A failure says what was called, the shapes, the worst index
and the expected and actual values there, without printing whole (possibly hidden) inputs. Every
value compared here was decoded by the grader from plain data, so no student `__eq__` runs.
"""
from __future__ import annotations

import contextlib
import math
import re
from dataclasses import dataclass

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


def parts(value, n: int, what: str, names: str = "") -> list:
    """A returned tuple of n values (`names` as the docstring writes them: "(x, y)"), or a clear failure."""
    if not isinstance(value, (tuple, list)) or len(value) != n:
        raise CheckFailed(f"{what}: expected a tuple of {n} values{' ' + names if names else ''}, got "
                          f"{type(value).__name__}" + (f" of length {len(value)}" if isinstance(value, (tuple, list))
                                                        else ""))
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
                 check_dtype: bool = False, labels=None, mask=None) -> None:
    """|got - expected| <= atol + rtol * |expected| elementwise, NaN matching NaN only.

    The default tolerance is torch.testing's for the EXPECTED value's dtype (float32: 1.3e-6/1e-5,
    float64: 1e-7/1e-7), or the check's explicit `rtol`/`atol`; never the dtype the student
    returned, so returning float16 loosens nothing. `labels` names the offending item in the
    message: a function of the index tuple, or a sequence indexed by the first index. `mask`: the
    attention mask the result was computed with, so that NaN or uniform rows that are exactly the
    fully masked queries are named as such (see `masked_rows_cause`).
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
        cause = masked_rows_cause(g64, mask) if mask is not None else ""
        raise CheckFailed(f"{what}: got {_fmt(g64[idx])}{' ' if idx else ''}{_where(idx, labels)} where {_fmt(e64[idx])} was expected "
                          f"({int(bad_nan.sum())} NaN mismatch(es)). "
                          + (cause or "Look for log(0), 0/0 or overflow in exp."))
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
        cause = (masked_rows_cause(g64, mask) if mask is not None else "") or _likely_cause(g64, e64, err, g_dtype, e_dtype)
        if cause:
            message += " " + cause
        raise CheckFailed(message)


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


# Machine epsilon by dtype: the size of one rounding, relative to the value rounded.
_EPS = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -23, "float64": 2.0 ** -52}
# "Of float32 rounding size": the worst error lies within this band, relative to the largest expected
# magnitude. A chain of float32 ops lands near 1e-7..1e-6 of the scale (eps = 1.2e-7, a few dozen
# roundings that partly cancel); 2e-6 (about 17 eps) leaves room for that and stops below the 1e-5
# that a float64 algorithm difference (an epsilon in another place, another eps value) often gives.
# The floor: an error below 1e-8 of the scale is finer than float32 can round.
ROUNDING_BAND = (1e-8, 2e-6)
# Share of the wrong float64 values that must be exact float32 numbers before "computed in float32"
# is said of a float64 result: by chance a float64 value is one with probability about 2^-29.
FLOAT32_SHARE = 0.9


def _likely_cause(g64, e64, err, g_dtype: str, e_dtype: str) -> str:
    """Blame precision only for errors of rounding size: an error of 1.6 in float32 is a bug, not rounding.

    Why the extra test on float64 results: an algorithmic difference of 1e-7..1e-6 looks like float32
    rounding by size alone; a result that was really computed in float32 and cast back to float64
    consists of exact float32 numbers, which an algorithm difference in float64 almost never gives.
    """
    finite = np.isfinite(e64) & np.isfinite(g64)
    if not finite.any():
        return ""
    scale = float(np.abs(e64[finite]).max())
    worst = float(err[finite].max())
    if scale == 0 or worst == 0:
        return ""
    low, high = ROUNDING_BAND
    if _EPS.get(g_dtype, 0.0) > _EPS.get(e_dtype, 0.0):  # a lower precision came back
        if worst <= high * scale * _EPS[g_dtype] / _EPS["float32"]:
            return f"Your result is {g_dtype} where {e_dtype} was expected (computed in lower precision?)."
        return ""  # far beyond its rounding: the values are wrong, and the numbers above show by how much
    if e_dtype != "float64" or g_dtype != "float64" or not (low * scale < worst <= high * scale):
        return ""
    wrong = finite & (err > 0)
    with np.errstate(over="ignore"):
        exact32 = g64[wrong].astype(np.float32).astype(np.float64) == g64[wrong]
    if exact32.mean() < FLOAT32_SHARE:
        return ""
    return ("The errors are of float32 rounding size and your values are exact float32 numbers although "
            "float64 was expected: computed in float32? (look for .float(), dtype=torch.float32, np.float32 or "
            "a float32 tensor created along the way).")


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


def assert_finite(got, what: str, *, mask=None, convention: str | None = None) -> None:
    """No NaN or infinity. Given the attention `mask` the result was computed with, NaN rows that are
    exactly the fully masked queries are named as such (see `masked_rows_cause`) instead of blamed
    on an unstable formula."""
    arr, _ = as_array(got, what)
    bad = ~np.isfinite(arr.astype(np.float64))
    if bad.any():
        idx = _index(np.argmax(bad), arr.shape)
        head = (f"{what}: {int(bad.sum())} value(s) are NaN or infinite, first at index {idx} "
                f"({arr.astype(np.float64)[idx]}).")
        cause = masked_rows_cause(arr, mask, convention) if mask is not None else ""
        raise CheckFailed(f"{head} {cause or 'Use a numerically stable formulation.'}")


FULLY_MASKED_CONVENTION = "all-zero weights and a zero output"


def masked_rows_cause(got, mask, convention: str | None = None) -> str:
    """Why rows of an attention result are wrong, when those rows are exactly the fully masked queries.

    `got` is (..., T_q, X): attention weights (X = T_k) or outputs; `mask` (True = may attend) is
    broadcastable to (..., T_q, T_k). NaN rows that are all fully masked: the softmax of a row of
    -inf is 0/0. Finite weights of 1/T_k on every fully masked row: a finite fill made every score of
    the row equal. `convention` is what the starter says such a row must give. Returns "" when the
    rows do not match (NaN elsewhere too: then it is not the mask), so no wrong guess is offered.
    """
    g = np.asarray(as_array(got)[0], dtype=np.float64)
    m = mask.detach().cpu().numpy() if hasattr(mask, "detach") else np.asarray(mask)
    if g.ndim < 2 or m.ndim < 1 or m.dtype != np.bool_:
        return ""
    try:
        fully = np.broadcast_to(~m.any(-1), g.shape[:-1])  # (..., T_q): the query may attend to nothing
    except ValueError:
        return ""
    convention = convention or FULLY_MASKED_CONVENTION
    nan_rows = np.isnan(g).any(-1)
    if nan_rows.any():
        if (nan_rows & ~fully).any():
            return ""
        return (f"{_rows_text(nan_rows, 'NaN')}. A fully masked row must give {convention} (the starter's "
                "convention), never NaN: the softmax of a row of -inf is 0/0. Set such rows to zero after the "
                "softmax (mask.any(-1) is False exactly for them).")
    T_k = m.shape[-1]
    if fully.any() and g.shape[-1] == T_k > 1 and np.isfinite(g).all() \
            and np.allclose(g[fully], 1.0 / T_k, rtol=1e-3, atol=0):
        return (f"{_rows_text(fully, f'uniform (every weight 1/{T_k})')}, and filling all of a row's scores with the "
                f"same finite value makes its softmax uniform. A fully masked row must give {convention} (the "
                "starter's convention): set such rows to zero after the softmax.")
    return ""


def _rows_text(rows: np.ndarray, state: str) -> str:
    """'Query rows 1, 3 are NaN in all 6 slices over the leading dimensions: these queries have every key
    masked' for a (..., T_q) boolean array of the rows concerned."""
    flat = rows.reshape(-1, rows.shape[-1])
    queries = [int(q) for q in np.nonzero(flat.any(0))[0]]
    many = len(queries) > 1
    text = f"Query row{'s' if many else ''} " + ", ".join(map(str, queries[:8])) + (", ..." if len(queries) > 8 else "")
    text += f" {'are' if many else 'is'} {state}"
    if flat.shape[0] > 1:
        hit, slices = int(flat.any(1).sum()), flat.shape[0]
        text += f" in {f'all {hit}' if hit == slices else f'{hit} of the {slices}'} slices over the leading dimensions"
    return text + (": these queries have every key masked" if many else ": this query has every key masked")


# ---- errors a library raised inside the student's code -----------------------------------------
@dataclass(frozen=True)
class LibraryError:
    """A library's error message, and what it almost always means in a student's code here."""

    name: str
    pattern: str  # regular expression that finds the library's message
    advice: str
    drop: str = ""  # the library's own advice where it misleads in this course
    helper: str = ""  # a starter function that is the fix: named when the assignment has it
    helper_advice: str = ""


LIBRARY_ERRORS = (
    LibraryError(
        "backward twice", r"Trying to backward through the graph a second time",
        "this backward pass reached the graph of an earlier step, which that step's backward() already "
        "freed: a tensor carried from one step to the next (a hidden state, a cache, a running total) still "
        "holds its history. Detach it (.detach()) before the next step uses it. retain_graph=True is not "
        "the fix: it would backpropagate into every earlier step.",
        drop=r"\s*Specify retain_graph=True\b[^.]*\.",
        helper="detach_state",
        helper_advice="the carried hidden state was not detached. The state returned by the previous chunk's "
                      "forward pass still holds that chunk's graph, which its backward() already freed. Pass "
                      "the state through the starter's `detach_state(state)` before each chunk's forward pass "
                      "(it handles a tensor, an LSTM's (h, c) and None). retain_graph=True is not the fix: it "
                      "would backpropagate through every earlier chunk, which truncated BPTT must not do."),
    LibraryError(
        "in-place on the graph",
        r"one of the variables needed for gradient computation has been modified by an inplace operation",
        "an in-place operation (+=, x[...] = ..., masked_fill_, a method ending in _) changed a tensor that "
        "backward still needs. Use the out-of-place form on tensors that are part of the graph "
        "(x = x + y, torch.where, masked_fill, torch.cat of the pieces)."),
    LibraryError(
        "mixed dtypes",
        r"same dtype|same scalar type|same dtypes|expected scalar type \w+ but found \w+|"
        r"Found dtype \w+ but expected \w+",
        "two tensors of different dtypes meet in one operation. Usually a tensor your code creates "
        "(torch.zeros, torch.ones, torch.tensor, torch.arange, torch.full) gets the default float32 while "
        "the inputs are float64 (the grader also calls your code in float64): create it with "
        "dtype=x.dtype and device=x.device, or with x.new_zeros(...) / torch.zeros_like(x)."),
    LibraryError(
        "mixed devices", r"Expected all tensors to be on the same device",
        "a tensor your code creates is on the CPU while the inputs are on the GPU (or the reverse): create "
        "it with device=x.device, or with x.new_zeros(...) / torch.zeros_like(x)."),
    LibraryError(
        "graph cut", r"element 0 of tensors does not require grad and does not have a grad_fn",
        "backward() was called on a value that no longer depends on the parameters: something cut the "
        "graph on the way (.detach(), .item(), .data, .numpy(), torch.no_grad(), or torch.tensor(...) "
        "around a computed value)."),
)

LIKELY_CAUSE = "Likely cause: "
_TRACEBACK = re.compile(r"\nTraceback \(")
_RAISED = re.compile(r" raised \w+: ")  # how remote.Student words a student's exception


def explain_library_error(text: str, names=()) -> str:
    """A student's error message with advice for the library error it quotes, if it is a known one.

    Why: PyTorch's messages describe the failed operation, not the student's mistake, and some advise
    what is wrong here (retain_graph=True for an undetached carried state). `names` are the student
    functions the assignment grades: an entry's starter helper is named only where it exists. The
    advice goes before the student's traceback; misleading library advice is removed. Applying it
    twice changes nothing.
    """
    if LIKELY_CAUSE in text:
        return text
    split = _TRACEBACK.search(text)
    head, tail = (text[:split.start()], text[split.start():]) if split else (text, "")
    raised = _RAISED.search(head)  # only the error's own message, never the grader's words around it
    if raised is None:
        return text
    for entry in LIBRARY_ERRORS:
        if not re.search(entry.pattern, head[raised.end():]):
            continue
        if entry.drop:
            head = re.sub(entry.drop, "", head)
        advice = entry.helper_advice if entry.helper and entry.helper in set(names) else entry.advice
        return f"{head.rstrip()}\n{LIKELY_CAUSE}{advice}{tail}"
    return text


class library_advice(contextlib.ContextDecorator):
    """With-block around a check's calls: a failure that quotes a known library error gets its advice.

    The exception keeps its type (a StudentError stays one, so the runner still hides the message of a
    sealed check); only its text changes. Prefer the with-block to the decorator form inside checks:
    a decorated check is no longer the module's own function (tests read a check's __globals__).
    """

    def __init__(self, names=()):
        self.names = tuple(names)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if isinstance(exc, CheckFailed) and len(exc.args) == 1 and isinstance(exc.args[0], str):
            exc.args = (explain_library_error(exc.args[0], self.names),)
        return False


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
