"""Grade one submission: read its graded cells, start its worker, run every check, collect results.

Everything here runs in the trusted process. A check that fails, a student function that hangs
or crashes, or even a bug in one check costs only that check's points.
"""
from __future__ import annotations

import ast
import hashlib
import os
import sys
import time
import traceback
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from autograder import PACKAGE_DIR
from autograder.authoring.assignments import Assignment
from autograder.checking.checks import Context, seed_everything, seed_for
from autograder.checking.compare import explain_library_error
from autograder.checking.reference_results import load_reference_results
from autograder.checking.remote import Student, StudentCrash, StudentError
from autograder.errors import CheckFailed, GraderFault
from autograder.sandbox import extract, forbidden, guard, policy
from autograder.sandbox.lifecycle import Sandbox, WorkerFailure
from autograder.sandbox.limits import Limits

OUTPUT_LIMIT = 4000  # characters of feedback per check
TRUNCATED = "\n... (feedback truncated)"


@dataclass
class CheckResult:
    name: str
    question: str
    title: str
    score: float
    max_score: float
    passed: bool
    output: str
    public: bool
    extra: bool = False
    # The check's hint, kept out of `output` until blame is decided (`_blame_earlier_functions`): it
    # goes in at `hint_at` (after the failure's own message), unless the failure is blamed on a
    # function of an earlier question, where the hint would point at the wrong place.
    hint: str = ""
    hint_at: int = 0
    published: list[dict] = field(default_factory=list)  # leaderboard entries (checks.leaderboard_entry); passed only


@dataclass
class Report:
    assignment: str
    submission: str
    device: str
    results: list[CheckResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    execution_time: float = 0.0

    @property
    def score(self) -> float:
        return sum(r.score for r in self.results)

    @property
    def max_score(self) -> float:
        return sum(r.max_score for r in self.results if not r.extra)

    @property
    def leaderboard(self) -> list[dict]:
        """The metrics published by checks that passed; a name two checks publish keeps the first."""
        entries: dict[str, dict] = {}
        for r in self.results:
            for entry in r.published if r.passed else ():
                entries.setdefault(entry["name"], entry)
        return list(entries.values())


def resolve_device(device: str) -> str:
    """'auto' means CUDA when present; asking for CUDA without it is the caller's error."""
    if device == "cpu":
        return "cpu"
    import torch
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError("--device cuda was given but no CUDA device is available (use --device cpu or auto)")
    return device


def one_torch_thread(assignment: Assignment) -> None:
    """In a grader process (the CLI's, a batch's): its own torch on one thread, as its workers run,
    unless OMP_NUM_THREADS says otherwise. Never in a student's kernel (`check_notebook`), whose
    training would slow down.

    Why: the grader's tensors are checks' inputs and the reference's outputs, too small to share
    among threads; a second thread mostly spins waiting for work, which cost one `attention`
    grading about 0.8 s of CPU on two cores (`bench/otter_comparison.py`)."""
    if assignment.uses_torch and "OMP_NUM_THREADS" not in os.environ:
        import torch
        torch.set_num_threads(1)


def grade(path: str | Path, assignment: Assignment, *, device: str = "cpu", public_only: bool = False,
          questions: set[str] | None = None, limits: Limits | None = None,
          reference_results: dict | None = None, submission_seed: int | None = None,
          transcript: list | None = None) -> Report:
    """Grade one submission. `reference_results` (from `reference_results(assignment)`) lets a batch
    read the cached reference results once, before any worker of any submission has run.
    `submission_seed` replaces the one taken from the cells (so two files get the same held-out
    draws) and `transcript` collects a digest of every value read back: both for `lmgrade mutants`."""
    started = time.monotonic()
    if not assignment.uses_torch:
        device = "cpu"  # nothing to place on a GPU, and the CPU worker keeps its memory limit
    sub = extract.read_submission(path)
    report = Report(assignment=assignment.id, submission=str(path), device=device, notes=list(sub.notes))
    every_check = assignment.checks(public_only)  # read now, before any worker starts (as all the grader's files)
    check_fns = [fn for fn in every_check if questions is None or fn.lmgrade_check.question in questions]
    ref = None if public_only else assignment.reference()
    cache_tag = _cache_tag(assignment) if ref is not None else None
    if cache_tag is not None and reference_results is None:  # read before the worker starts, never after
        reference_results = load_reference_results(cache_tag)  # missing ones: computed by the check, in here
    ctx_args = {"ref": ref, "fixtures": assignment.fixtures(), "device": device, "cache_tag": cache_tag,
                "reference_results": reference_results,
                "submission_seed": (zlib.crc32("".join(c.source for c in sub.cells).encode())
                                    if submission_seed is None else submission_seed)}
    if sub.unreadable:
        report.notes.insert(0, f"Nothing could be graded: {sub.unreadable}")
        report.results = [_result(fn.lmgrade_check, False, sub.unreadable) for fn in check_fns]
    else:
        limits = limits or Limits(call_timeout=assignment.call_timeout)
        with Sandbox([c.wire() for c in sub.cells], device=device, import_torch=assignment.uses_torch,
                     limits=limits) as box:
            box.guard = guard.rules_for(assignment)  # enforced in the worker, before the cells run
            try:  # after every read of the grader's files: its import of torch overlaps the scans below
                box.prepare()
            except WorkerFailure:
                pass  # the first check's call reports it
            student = Student(box, timeout=limits.call_timeout,
                              explain_missing=lambda name: _explain_missing(name, sub, box),
                              explain_name_error=lambda msg: _explain_name_error(msg, sub))
            student.transcript = transcript
            refused = policy.refused(sub.cells, assignment)  # outside the subset the grader can read
            box.cells = [c.wire() for c in policy.loadable(sub.cells, assignment, refused)]  # before any request
            report.notes += [f"Not run: {use}" for use in refused.get(policy.NOT_RUN, [])]
            tainted = forbidden.tainted_names(sub.cells, assignment.forbidden)
            reaches = [use for uses in forbidden.tainted_names(sub.cells, forbidden.ENGINE_NAMES).values()
                       for use in uses]
            student.tampering = str(reaches[0]) if reaches else None
            for fn in check_fns:
                banned = policy.withheld(fn.lmgrade_check, refused) or _banned_message(fn.lmgrade_check, tainted)
                report.results.append(_result(fn.lmgrade_check, False, banned) if banned
                                      else _run_check(fn, student, box, limits, ctx_args))
            report.notes += _load_notes(sub, box)
        if student.grader_faults:  # never a score from a grading the grader itself could not do
            raise GraderFault(f"{sub.path}: grading could not be completed on the grader's side, so no score is "
                              f"recorded: {student.grader_faults[0]}"
                              + (f" (and {len(student.grader_faults) - 1} more)" if len(student.grader_faults) > 1 else ""))
        _blame_earlier_functions(report.results, [fn.lmgrade_check for fn in check_fns],
                                 [fn.lmgrade_check for fn in every_check])
    report.execution_time = time.monotonic() - started
    return report


def reference_results(assignment: Assignment) -> dict:
    """The assignment's cached reference results, read (or computed) now: call before any worker runs."""
    checks = assignment.checks(False)
    return load_reference_results(_cache_tag(assignment), assignment.reference(),
                                  {sys.modules[fn.__module__] for fn in checks})


def _blame_earlier_functions(results: list, specs: list, all_specs: list) -> None:
    """A check that fails because a function it `needs` is wrong says so, naming that function's question,
    and then leaves out its own hint (it would point at the wrong place); every other failure gets its hint.

    A name fails only when a check that grades it failed in this run. A check grades the names of its
    `uses` whose question is its own (a name's question: the first one whose checks use it), and of
    those only the names no narrower check grades: a check of `Block` that also uses
    `MultiHeadAttention` blames `Block`, because the attention checks grade `MultiHeadAttention`.
    `all_specs` are every check of the assignment, also those of questions not graded in this run: a
    name with a check of its own is blamed only when that check ran and failed.
    """
    home = _home_questions(all_specs + specs)
    graded = {spec.name: frozenset(n for n in spec.uses if home[n] == spec.question) for spec in all_specs + specs}
    holding = {name: [g for g in graded.values() if name in g] for name in home}  # graded sets naming it
    failing: set[str] = set()
    for result, spec in zip(results, specs):
        if not result.passed:
            mine = graded[spec.name]
            failing |= {n for n in mine if not any(g < mine for g in holding[n])}  # no narrower check
    for result, spec in zip(results, specs):
        lines = [] if result.passed else [
            f"`{name}` (Q{home[name]}) fails its own checks; fix it first."
            for name in dict.fromkeys(spec.needs) if name in failing and name not in graded[spec.name]]
        if result.hint and not lines:
            result.output = result.output[:result.hint_at] + f"\nHint: {result.hint}" + result.output[result.hint_at:]
        result.hint, result.hint_at = "", 0  # settled: in the output or left out
        if lines:
            blame = "\n" + "\n".join(lines)
            room = OUTPUT_LIMIT + len(TRUNCATED) - len(blame)
            result.output = (result.output if len(result.output) <= room else result.output[:room]) + blame


def _home_questions(specs: list) -> dict[str, str]:
    """Student name -> the first question (in question order) whose checks use it."""
    def order(question: str) -> tuple:
        return (0, int(question), "") if question.isdigit() else (1, 0, question)

    home: dict[str, str] = {}
    for spec in specs:
        for name in spec.uses:
            if name not in home or order(spec.question) < order(home[name]):
                home[name] = spec.question
    return home


def _cache_tag(assignment: Assignment) -> str:
    from autograder.data import shakespeare
    digest = hashlib.sha256(assignment.reference_path.read_bytes())
    hidden = assignment.dir / "hidden_checks.py"
    digest.update(hidden.read_bytes() if hidden.exists() else b"")
    digest.update(shakespeare.version().encode())
    digest.update((PACKAGE_DIR / "sandbox" / "support.py").read_bytes())  # grader-made data feeds the reference too
    return f"{assignment.id}-{digest.hexdigest()[:16]}"


def _banned_message(spec, tainted: dict) -> str | None:
    """Points are withheld when graded code relies on a built-in the assignment asks students to write."""
    for name in spec.uses:
        if name in tainted:
            use = tainted[name][0]
            return (f"Not graded: `{name}` uses {use}, a library routine this assignment asks you to write "
                    "yourself, so the points of this check are withheld. Replace it with your own code.")
    return None


# After seal() a crash's details (an exit code, the CPU seconds used, what it sent) are the student's
# code's choice, as its error text is, and could carry held-out text out (issue 30): one fixed message.
SEALED_CRASH = ("Your code crashed, ended its process or ran past its time limit while it was shown held-out text; "
                "the details are not shown for this check. Run the same function on your validation data to find it.")


def _run_check(fn, student: Student, box: Sandbox, limits: Limits, ctx_args: dict) -> CheckResult:
    spec = fn.lmgrade_check
    student._timeout = spec.timeout or limits.call_timeout
    student._current_check = spec  # names the check in "ran past its time limit in check ..."
    student.printed.clear()
    student.sealed = False
    seed = seed_for(spec.name)
    seed_everything(seed)
    try:
        box.request({"op": "seed", "seed": seed}, [], limits.load_timeout)
    except WorkerFailure:
        pass  # the check's own call will report what is wrong with the worker
    ctx = Context(student=student, spec=spec, **ctx_args)
    hint = ""
    try:
        fn(ctx)
        passed, message = True, "Passed."
    except StudentError as exc:
        passed, message, hint = False, (explain_library_error(str(exc), spec.uses + spec.needs) if not student.sealed else
                                        "Your code raised an error while it was shown held-out text; the message "
                                        "is not shown for this check. Run the same function on your validation "
                                        "data to find it."), spec.hint
    except StudentCrash as exc:
        passed, message, hint = False, (SEALED_CRASH if student.sealed else
                                        explain_library_error(str(exc), spec.uses + spec.needs)), spec.hint
    except CheckFailed as exc:
        passed, message, hint = False, explain_library_error(str(exc), spec.uses + spec.needs), spec.hint
    except Exception as exc:  # noqa: BLE001 - a bug in one check must not sink the others
        passed = False
        message = (f"The grader could not finish this check ({type(exc).__name__}); this is not your fault. "
                   "Please tell the course staff.")
        print(f"[lmgrade] internal error in check {spec.name}:\n{traceback.format_exc()}", file=sys.stderr)
    hint_at = len(message)
    if ctx.notes:
        message += "\n" + "\n".join(ctx.notes)
    if student.printed and student.sealed:
        message += "\nYour code printed something; it is not shown for this check (it saw held-out text)."
    elif student.printed:
        printed = "".join(student.printed)
        message += f"\nYour code printed:\n{printed[:1000]}" + ("..." if len(printed) > 1000 else "")
    return _result(spec, passed, message, hint=hint, hint_at=hint_at, published=ctx.published)


def _result(spec, passed: bool, message: str, *, hint: str = "", hint_at: int | None = None,
            published: list[dict] = ()) -> CheckResult:
    """The result of one check; a failure's `hint` waits outside `output` (see CheckResult), with room kept.
    What a check published is kept only when it passed: a check that fails half-way earns no entry."""
    hint = hint if not passed else ""
    limit = OUTPUT_LIMIT - (len(f"\nHint: {hint}") if hint else 0)
    if len(message) > limit:
        message = message[:limit] + TRUNCATED
    return CheckResult(name=spec.name, question=spec.question, title=spec.title,
                       score=spec.points if passed else 0.0, max_score=spec.points, passed=passed,
                       output=message, public=spec.public, extra=spec.extra, hint=hint,
                       hint_at=min(len(message) if hint_at is None else hint_at, limit),
                       published=list(published) if passed else [])


def _cell_names(cell: extract.Cell) -> set[str]:
    return extract.top_level_names(ast.parse(cell.source))


def _explain_missing(name: str, sub: extract.Submission, box: Sandbox) -> str:
    for cell in sub.cells:
        if name not in _cell_names(cell):
            continue
        skip, cell_errors = box.first_load or ({}, [])  # a reload's words may carry a check's input
        if cell.index in skip:
            return (f"`{name}` is in graded cell {cell.number}, which {_skip_reason(skip[cell.index])} "
                    "while the grader loaded it, so the cell was skipped. Keep slow or process-ending code "
                    "(training runs, input(), exit) out of graded cells.")
        for err in cell_errors:
            if err.get("index") == cell.index:
                e = err.get("error", {})
                return (f"`{name}` was never defined: graded cell {cell.number} raised {e.get('type')}: "
                        f"{e.get('message')} before reaching it. Graded cells must only define things.")
    return sub.explain_missing(name)


def _skip_reason(kind: str) -> str:
    return "ran past the time limit" if kind == "timeout" else f"ended the process that runs your code ({kind})"


def _explain_name_error(message: str, sub: extract.Submission) -> str:
    for name, number in sub.ungraded_names.items():
        if f"'{name}'" in message:  # named as the student finds it (extract: "the cell starting `x = 1`")
            return (f"`{name}` is defined in {sub.ungraded_labels.get(name, f'cell {number}')}, which is not graded; "
                    "the grader only runs graded cells. Move it into a graded cell.")
    return ""


def _load_notes(sub: extract.Submission, box: Sandbox) -> list[str]:
    """What the first load of the graded cells said: shown at once, so never a reload's words.

    A reload after a worker restart runs after checks handed the worker their (hidden) inputs, and
    a cell may read what a call left behind; its errors stay out of every field a student sees.
    """
    notes = []
    labels = {c.index: c.label for c in sub.cells}  # "graded cell 12 (defining `count_ngrams`)"
    skip, cell_errors = box.first_load or ({}, [])
    for index, kind in sorted(skip.items()):
        notes.append(f"G{labels.get(index, 'graded cell ?')[1:]} {_skip_reason(kind)} while loading and was skipped.")
    for err in cell_errors:
        e = err.get("error", {})
        notes.append(f"G{labels.get(err.get('index'), 'graded cell ?')[1:]} raised {e.get('type')}: "
                     f"{str(e.get('message'))[:300]} while loading.")
    return notes
