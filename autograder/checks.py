"""How a check is declared and what it receives.

A check is a plain function `def name(t: Context)` with its points, question and visibility
declared next to it by `@check(...)`. It calls the student's code through `t.student`, gets
expected values from `t.ref` (hidden checks) or `t.expected(...)` (public checks, answered from
fixtures so that public checks run without the reference), and fails by raising `CheckFailed`.
"""
from __future__ import annotations

import random
import sys
import zlib
from dataclasses import dataclass, field

import numpy as np

from autograder.errors import CheckFailed

__all__ = ["check", "CheckSpec", "Context", "CheckFailed", "seed_everything"]


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
                                     uses=tuple(uses), needs=tuple(needs))
        return fn

    return register


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

    student: object  # autograder.remote.Student
    ref: object | None  # the reference module (None where only fixtures are available)
    spec: CheckSpec
    device: str = "cpu"
    fixtures: dict | None = None  # public-check expected values, by key
    recording: dict | None = None  # when building fixtures, expected values are written here
    notes: list[str] = field(default_factory=list)
    cache_tag: str | None = None  # names the reference version; cached reference results use it
    submission_seed: int = 0  # from the submission's code: fresh data per submission, same on every run
    reference_results: dict | None = None  # cached reference results read before the worker started

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
        results = self.reference_results if self.reference_results is not None else \
            _REFERENCE_RESULTS.setdefault(self.cache_tag, {})
        if key in results:
            return _copy(results[key])
        value = compute()
        results[key] = _copy(value)
        _write_reference_result(self.cache_tag, key, value)
        return value

    def note(self, text: str) -> None:
        """A line shown with the check's result whether it passes or fails (a measured figure, say)."""
        self.notes.append(text)


# ---- reference results, read before any worker starts ---------------------------------------------
_REFERENCE_RESULTS: dict[str, dict] = {}  # cache tag -> {key: JSON value}, per grader process


def reference_result(key: str):
    """Register `compute(ref) -> JSON value` under `key` in a check module.

    `runner.reference_results(assignment)` (a batch, before its first worker) computes every
    registered result that is not cached yet, so grader processes only read them; `t.cached(key,
    ...)` then returns it from memory. Grading one submission reads what is cached and lets the
    check compute the rest (in the grader, from the reference alone).
    """

    def register(fn):
        fn.lmgrade_reference_result = key
        return fn

    return register


def load_reference_results(cache_tag: str, ref=None, modules=()) -> dict:
    """Every cached result of one reference version, in memory (read from disk once per process).

    Call before any worker starts. Registered results (`@reference_result`) of `modules` that are
    missing are computed here from `ref`. The dict returned is the process-wide one for the tag.
    """
    import json

    from autograder.data.shakespeare import cache_dir
    results = _REFERENCE_RESULTS.get(cache_tag)
    if results is None:
        results = _REFERENCE_RESULTS[cache_tag] = {}
        folder = cache_dir() / "reference"
        prefix = f"{cache_tag}-"
        if folder.is_dir():
            for path in sorted(folder.glob(f"{prefix}*.json")):
                try:
                    results[path.name[len(prefix):-len(".json")]] = json.loads(path.read_text())
                except (OSError, ValueError, RecursionError):
                    continue  # unreadable or broken: computed again when needed
    if ref is not None:
        for module in modules:
            for fn in list(vars(module).values()):
                key = getattr(fn, "lmgrade_reference_result", None)
                if isinstance(key, str) and key not in results:
                    value = fn(ref)
                    results[key] = _copy(value)
                    _write_reference_result(cache_tag, key, value)
    return results


def _copy(value):
    """A fresh copy of a JSON value, so no check can change what the next one reads."""
    import json
    return json.loads(json.dumps(value))


def _write_reference_result(cache_tag: str, key: str, value) -> None:
    import json
    import os
    import tempfile

    from autograder.data.shakespeare import cache_dir
    path = cache_dir() / "reference" / f"{cache_tag}-{key}.json"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(value, f)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache costs time in the next process, nothing else
