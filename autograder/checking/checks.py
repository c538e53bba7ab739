"""How a check is declared and what it receives.

A check is a plain function `def name(t: Context)` with its points, question and visibility
declared next to it by `@check(...)`. It calls the student's code through `t.student`, gets
expected values from `t.ref` (hidden checks) or `t.expected(...)` (public checks, answered from
fixtures so that public checks run without the reference), and fails by raising `CheckFailed`.

Two rules of "only work the grader saw earns points" are reached from here. Every held-out draw
and every trained model's start comes from the grader's one secret (`Context.secret_seed`,
`secret_rng`, `secret_state`; the secret and the list of draws, HELD_OUT_DRAWS, are in held_out.py),
which the worker cannot compute. A trained model earns points only if it descends from that start
(`assert_descends`, in provenance.py). Cached reference results (`Context.cached`) are in
reference_results.py.
"""
from __future__ import annotations

import math
import numbers
import random
import sys
import zlib
from dataclasses import dataclass, field

import numpy as np

from autograder.checking.held_out import held_out_seed
from autograder.checking.reference_results import cached_result
from autograder.errors import CheckFailed

__all__ = ["check", "CheckSpec", "Context", "CheckFailed", "seed_everything", "leaderboard_entry"]

METRIC_NAME_LIMIT = 64  # characters: a column title on Gradescope's leaderboard, not a message


@dataclass(frozen=True)
class CheckSpec:
    name: str
    question: str  # "1", "2", ... as in the notebook
    points: float
    title: str  # what a student reads in the table
    public: bool = False
    extra: bool = False  # extra credit: counts in the score, not in the maximum
    timeout: float | None = None  # seconds per call into the student's code
    hint: str = ""  # shown under a failure: where such bugs usually hide
    uses: tuple[str, ...] = ()  # student names whose points are withheld if they call a banned built-in
    needs: tuple[str, ...] = ()  # student names from earlier questions this check depends on (for blame)
    source: str = ""  # the file that declares the check (hidden checks: part of the grader's secret)


def check(question: str | int, points: float, title: str, *, public: bool = False, extra: bool = False,
          timeout: float | None = None, hint: str = "", uses: tuple[str, ...] = (), needs: tuple[str, ...] = ()):
    """Declare a check. The function's name is its stable id (used for seeds and fixtures).

    `uses` names the student's functions or classes the check grades; if one of them reaches a
    built-in the assignment forbids (meta.toml `forbidden`), the check fails without running.
    `needs` names student functions from earlier questions this check calls: when a check whose
    `uses` holds one of them fails in the same run, this check's failure says to fix that first.
    """

    def register(fn):
        fn.lmgrade_check = CheckSpec(name=fn.__name__, question=str(question), points=float(points), title=title,
                                     public=public, extra=extra, timeout=timeout, hint=hint,
                                     uses=tuple(uses), needs=tuple(needs), source=_declaring_file(fn))
        return fn

    return register


def declared(path) -> list | None:
    """The `CheckSpec`s of the functions a check file declares with `@check(...)`, read from its syntax tree
    (the file is not run); None if a declaration uses more than constants, module-level names bound to
    constants and operators on them (a call, an attribute), where only importing the file tells. A check
    imported from another file is not seen: checks are declared in the check files themselves."""
    import ast
    tree = ast.parse(path.read_text(), filename=str(path))
    constants: dict = {}  # module-level names bound to what `_plain` evaluates, in order

    def plain(node):
        return _plain(node, constants)

    specs = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                constants[node.targets[0].id] = plain(node.value)
            except ValueError:
                constants.pop(node.targets[0].id, None)
        if not isinstance(node, ast.FunctionDef):
            continue
        for deco in node.decorator_list:
            if not (isinstance(deco, ast.Call) and getattr(deco.func, "id", getattr(deco.func, "attr", None)) == "check"):
                continue
            try:
                args = [plain(a) for a in deco.args]
                kwargs = {k.arg: plain(k.value) for k in deco.keywords}
            except ValueError:
                return None
            question, points, title = (args + [None, None, None])[:3]
            if title is None or kwargs.keys() - {"public", "extra", "timeout", "hint", "uses", "needs"}:
                return None
            specs.append(CheckSpec(name=node.name, question=str(question), points=float(points), title=title,
                                   public=kwargs.get("public", False), extra=kwargs.get("extra", False),
                                   timeout=kwargs.get("timeout"), hint=kwargs.get("hint", ""),
                                   uses=tuple(kwargs.get("uses", ())), needs=tuple(kwargs.get("needs", ())),
                                   source=str(path)))
    return specs


def _plain(node, names: dict):
    """The value of an expression made only of constants, tuples/lists, names in `names`, + - * /, unary
    minus, indexing and slicing and f-strings of those; ValueError for anything else (a call, an
    attribute: never run)."""
    import ast
    allowed = (ast.Expression, ast.Constant, ast.Tuple, ast.List, ast.Name, ast.Load, ast.BinOp, ast.UnaryOp,
               ast.Add, ast.Sub, ast.Mult, ast.Div, ast.USub, ast.JoinedStr, ast.FormattedValue, ast.Subscript,
               ast.Slice)
    expr = ast.Expression(node)
    for part in ast.walk(expr):
        if not isinstance(part, allowed) or isinstance(part, ast.Name) and part.id not in names:
            raise ValueError(type(part).__name__)
    try:
        return eval(compile(expr, "<check declaration>", "eval"), {"__builtins__": {}}, dict(names))
    except Exception as exc:  # noqa: BLE001 - a format spec or operand the plain reading cannot take
        raise ValueError(str(exc)) from None


def _declaring_file(fn) -> str:
    code = getattr(fn, "__code__", None)
    return code.co_filename if code is not None else ""


def collect(module) -> list:
    """The checks of a module, in the order they are written."""
    return [fn for fn in vars(module).values() if callable(fn) and hasattr(fn, "lmgrade_check")]


def seed_for(name: str) -> int:
    """A seed per check, stable across runs, machines and check order."""
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)


@dataclass
class Context:
    """What a check receives. `student` calls run in the student's process."""

    student: object  # autograder.checking.remote.Student
    ref: object | None  # the reference module (None where only fixtures are available)
    spec: CheckSpec
    device: str = "cpu"
    fixtures: dict | None = None  # public-check expected values, by key
    recording: dict | None = None  # when building fixtures, expected values are written here
    notes: list[str] = field(default_factory=list)
    cache_tag: str | None = None  # names the reference version; cached reference results use it
    submission_seed: int = 0  # from the submission's code: fresh data per submission, same on every run
    reference_results: dict | None = None  # cached reference results read before the worker started
    secret_key: bytes = b""  # a course's own key, mixed into every secret when given (optional)
    published: list[dict] = field(default_factory=list)  # leaderboard entries; kept only if the check passes

    def __post_init__(self) -> None:
        self.seed = seed_for(self.spec.name)
        self.rng = np.random.default_rng(self.seed)

    def expected(self, key: str, compute):
        """An expected value: `compute(ref)` where the reference is at hand, else the saved fixture."""
        full_key = f"{self.spec.name}/{key}"
        if self.recording is not None:
            self.recording[full_key] = value = compute(self.ref)
            return value
        if self.spec.public:
            if self.fixtures is None or full_key not in self.fixtures:
                raise RuntimeError(f"fixture {full_key} is missing: run `lmgrade build`")
            return self.fixtures[full_key]
        return compute(self.ref)

    def cached(self, key: str, compute):
        """A JSON-able reference result (a perplexity threshold, say), computed once per reference version.

        Why: running the reference's full training for every submission would double grading time.
        Why held in memory: the runner reads every cached result of this reference version before
        the first worker starts (`load_reference_results`); after that the file is only written,
        never read again, so a worker that can write the cache directory cannot change this or a
        later submission's threshold in this process. A result missing then is computed here, in
        the grader, from the reference alone.
        """
        if self.cache_tag is None:
            return compute()
        return cached_result(self.cache_tag, self.reference_results, key, compute)

    def note(self, text: str) -> None:
        """A line shown with the check's result whether it passes or fails (a measured figure, say)."""
        self.notes.append(text)

    def publish(self, name: str, value: float, order: str = "asc", *, held_out: bool | None = None) -> None:
        """A metric of the student's work for the leaderboard (`order` "asc": lower is better, a perplexity).

        Why only from a check that passes: call it after the check has accepted the model's provenance;
        the runner keeps what a check published only if the whole check passes, so a pasted model never
        gets an entry. `held_out` (default: the check is hidden) says the value comes from data students
        never see; such a value goes to the TA's leaderboard.csv and report.html, and to Gradescope's
        leaderboard, which students see before the deadline, only when course staff built the
        autograder with `--leaderboard`. A value that is not finite (a nan
        perplexity) is refused with a note; the check's own verdict is left alone.
        """
        entry = leaderboard_entry(name, value, order, not self.spec.public if held_out is None else held_out)
        if any(e["name"] == entry["name"] for e in self.published):
            raise ValueError(f"check {self.spec.name} publishes the metric {name!r} twice")
        if not math.isfinite(entry["value"]):
            self.note(f"No leaderboard entry for {entry['name']}: its value is {entry['value']}.")
            return
        self.published.append(entry)

    def secret_seed(self, purpose: str, bits: int = 64) -> int:
        """A seed for one draw of this check (`purpose`) that no worker can compute; see held_out.HELD_OUT_DRAWS.

        Why: the worker knows its own code, hence `submission_seed`, and the check's name, hence
        `seed`, so a seed made of those alone is public. This one also hashes the bytes of the file
        that declares the check and of the reference module, which are never shipped and which the
        worker cannot read. Same submission, same seed, every run and machine; another submission,
        check or purpose, an unrelated seed.
        """
        if self.spec.public:
            raise RuntimeError(f"check {self.spec.name} is public: it runs without the grader's files, so it has "
                               "no secret; draw held-out data in a hidden check")
        files = (self.spec.source, getattr(self.ref, "__file__", None))
        if not all(files):
            raise RuntimeError(f"check {self.spec.name}: no grader secret without the check's file and the reference")
        return held_out_seed(files, self.secret_key, self.submission_seed, self.spec.name, purpose, bits)

    def secret_rng(self, purpose: str) -> np.random.Generator:
        """numpy's generator from `secret_seed(purpose)`: for held-out data, which never crosses."""
        return np.random.default_rng(self.secret_seed(purpose))

    def secret_state(self, purpose: str, build) -> dict:
        """The state dict of the module `build()` makes, its random initialization drawn from the secret.

        Why: a trained model earns points only when it descends from a start the grader chose for this
        submission (see `provenance.assert_descends`). Torch's global generator is left as it was.
        """
        import torch
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.secret_seed(purpose))
            module = build()
        return {k: v.detach().clone() for k, v in module.state_dict().items()}


def leaderboard_entry(name, value, order: str = "asc", held_out: bool = True) -> dict:
    """{name, value, order, held_out} as a leaderboard keeps it, or ValueError / TypeError.

    Why strict: the entry reaches Gradescope's results.json, leaderboard.csv and report.html, so the
    name is short one-line text and the value a real number (never a bool, which Python counts as
    one). The value may be nan or inf here: `Context.publish` refuses those with a note.
    """
    if type(name) is not str or not 0 < len(name) <= METRIC_NAME_LIMIT or not name.isprintable() \
            or name != name.strip():
        raise ValueError(f"a leaderboard metric's name is one line of 1 to {METRIC_NAME_LIMIT} printable characters, "
                         f"not {str(name)[:METRIC_NAME_LIMIT]!r}")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"the leaderboard metric {name!r} is a number, not {type(value).__name__}")
    if order not in ("asc", "desc"):
        raise ValueError(f"the leaderboard metric {name!r} has order 'asc' (lower is better) or 'desc', not {order!r}")
    if type(held_out) is not bool:
        raise TypeError(f"held_out of the leaderboard metric {name!r} is True or False")
    return {"name": name, "value": float(value), "order": order, "held_out": held_out}
