"""How a check is declared and what it receives.

A check is a plain function `def name(t: Context)` with its points, question and visibility
declared next to it by `@check(...)`. It calls the student's code through `t.student`, gets
expected values from `t.ref` (hidden checks) or `t.expected(...)` (public checks, answered from
fixtures so that public checks run without the reference), and fails by raising `CheckFailed`.

Two rules of "only work the grader saw earns points" live here. Every held-out draw and every
trained model's start comes from the grader's one secret (`Context.secret_seed`, `secret_rng`,
`secret_state`; the list is HELD_OUT_DRAWS), which the worker cannot compute. A trained model
earns points only if it descends from that start (`assert_descends`).
"""
from __future__ import annotations

import hashlib
import math
import numbers
import random
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from autograder.errors import CheckFailed

__all__ = ["check", "CheckSpec", "Context", "CheckFailed", "seed_everything", "HELD_OUT_DRAWS", "start_correlations",
           "start_profile", "assert_descends", "leaderboard_entry"]

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
        """A seed for one draw of this check (`purpose`) that no worker can compute; see HELD_OUT_DRAWS.

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
        digest = hashlib.sha256(b"lmgrade held-out draw v1")
        for part in (*(_file_digest(f) for f in files), bytes(self.secret_key),
                     str(self.submission_seed).encode(), self.spec.name.encode(), purpose.encode()):
            digest.update(len(part).to_bytes(8, "little") + part)  # length-prefixed: no two inputs collide
        return int.from_bytes(digest.digest()[:8], "little") >> (64 - bits)

    def secret_rng(self, purpose: str) -> np.random.Generator:
        """numpy's generator from `secret_seed(purpose)`: for held-out data, which never crosses."""
        return np.random.default_rng(self.secret_seed(purpose))

    def secret_state(self, purpose: str, build) -> dict:
        """The state dict of the module `build()` makes, its random initialization drawn from the secret.

        Why: a trained model earns points only when it descends from a start the grader chose for this
        submission (see `assert_descends`). Torch's global generator is left as it was.
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


# ---- the grader's secret: every held-out draw ---------------------------------------------------
# Every random draw that feeds held-out data or a trained model's start, in every hidden check, by
# (assignment, check, purpose, what it draws). tests/test_secrets.py finds every `secret_seed`,
# `secret_rng` and `secret_state` call in assignments/*/hidden_checks.py and compares with this list.
# Draws of test inputs that cross to the worker anyway (`t.rng`) are not held out and not listed;
# backprop's and attention's hidden checks make no held-out draw (backprop's held-out text is the
# fixed test plays, which never cross).
HELD_OUT_DRAWS = (
    ("ngram", "shakespeare_heldout", "shakespeare",
     "which test and validation positions are scored, the order they are asked in, the probe words"),
    ("ngram", "synthetic_floor", "synthetic", "the hidden Markov language and its train / validation / held-out text"),
    ("ngram", "synthetic_floor", "synthetic plan", "which positions are scored, the order, the probe words"),
    ("rnn_lm", "shakespeare_lstm", "initial weights", "the LSTM LM's start (loaded into the student's model)"),
    ("rnn_lm", "seq2seq_reversal", "initial weights", "the Seq2Seq's start (loaded into the student's model)"),
    ("rnn_lm", "seq2seq_reversal", "training pairs", "the 12,800 digit strings trained on (sent)"),
    ("rnn_lm", "seq2seq_reversal", "held-out pairs", "the 500 digit strings scored (never sent)"),
    ("transformer", "shakespeare_perplexity", "initial weights", "init_state (sent)"),
    ("transformer", "shakespeare_perplexity", "batch seed", "settings['seed'], hence the batches (sent)"),
    ("transformer", "synthetic_perplexity", "initial weights", "init_state (sent)"),
    ("transformer", "synthetic_perplexity", "batch seed", "settings['seed'], hence the batches (sent)"),
    ("transformer", "synthetic_perplexity", "held-out sentences", "the 1,500 fresh sentences scored (never sent)"),
    ("transformer", "seq2seq_sorting", "initial weights", "init_state (sent)"),
    ("transformer", "seq2seq_sorting", "batch seed", "settings['seed'], hence the rows of each batch (sent)"),
    ("transformer", "seq2seq_sorting", "held-out strings", "the 1,000 digit strings scored (never sent)"),
)

_DIGESTS: dict[tuple, bytes] = {}  # (path, size, mtime) -> sha256 of the file


def _file_digest(path: str) -> bytes:
    stat = Path(path).stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _DIGESTS:
        _DIGESTS[key] = hashlib.sha256(Path(path).read_bytes()).digest()
    return _DIGESTS[key]


# ---- provenance: trained weights descend from the grader's start --------------------------------
def start_correlations(start: dict, final: dict, min_entries: int = 200) -> dict[str, float]:
    """name -> Pearson correlation of a matrix's entries at the start and after training.

    Why: a run from the grader's start keeps a clear trace of it in every matrix, while weights grown
    from any other start are independent of it: their correlation is noise of size 1/sqrt(entries).
    Only matrices (2-D or more) of at least `min_entries` entries count; a missing one counts as 0.
    """
    out = {}
    for name, value in start.items():
        a = _float64(value)
        if a.ndim < 2 or a.size < min_entries:
            continue
        b = _float64(final[name]) if name in final else None
        if b is None or b.shape != a.shape:
            out[name] = 0.0
            continue
        a, b = a.ravel() - a.mean(), b.ravel() - b.mean()
        norm = float(np.linalg.norm(a) * np.linalg.norm(b))
        out[name] = float(a @ b) / norm if norm > 0 else 0.0
    return out


def start_profile(start: dict, final: dict, min_entries: int = 200) -> dict[str, float]:
    """The correlations a genuine run (the reference's threshold run) keeps with its start, matrix by matrix.

    Only matrices where that trace stands far out of the noise (over 6 / sqrt(entries)) are kept: on
    those, weights from another start cannot pass by chance. A JSON-able reference result.
    """
    sizes = {k: _float64(v).size for k, v in start.items()}
    return {k: round(c, 6) for k, c in start_correlations(start, final, min_entries).items() if c > 6 / sizes[k] ** 0.5}


def start_shares(start: dict, final: dict, profile: dict, corrs: dict | None = None) -> dict:
    """Matrix name -> the share of the reference's correlation with the start (`profile`) that `final`
    keeps: what `assert_descends` bounds, and what the threshold benches print."""
    corrs = corrs or start_correlations({k: start[k] for k in profile}, final, min_entries=0)
    return {name: corrs[name] / profile[name] for name in profile}


def assert_descends(start: dict, final: dict, profile: dict, what: str, *, least: float, mean: float) -> dict:
    """Fail unless the matrices of `profile` keep enough of the correlation with their start that the
    reference's own run keeps (`start_profile`): each at least `least` of it, and `mean` of it on average.

    Why both: matrices that training barely moves (embeddings keep 0.98-0.99 of their start) make a
    blend of pasted weights with the grader's start costly, and so does the average over every
    matrix, while a single matrix may move more in one honest run than in another (the attention
    of a last layer, say), which the lower bound on each leaves room for. Returns the shares kept.
    The message names the matrix and the figures, never the start.
    """
    if not profile:
        raise RuntimeError(f"{what}: no matrix to compare with the start")
    corrs = start_correlations({k: start[k] for k in profile}, final, min_entries=0)
    kept = start_shares(start, final, profile, corrs)
    name = min(kept, key=kept.get)
    average = sum(kept.values()) / len(kept)
    if not (kept[name] >= least and average >= mean):  # NaN fails too
        raise CheckFailed(
            f"{what}: the returned weights do not descend from the initial weights the grader gave: `{name}` keeps a "
            f"correlation of {corrs[name]:.3f} with its start, where training from it keeps about {profile[name]:.2f}; "
            f"over the {len(kept)} matrices compared, {average:.0%} of that trace is kept (training keeps about 90%, "
            f"{mean:.0%} and at least {least:.0%} in every matrix are needed). Only a model your function trained, from "
            "the start it is given, earns these points: train the model (or init_state) you receive, without "
            "re-creating or re-initializing it, and never load weights trained elsewhere.")
    return kept


def _float64(value) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor, on any device
        value = value.detach().cpu().double().numpy()
    return np.asarray(value, dtype=np.float64)


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
