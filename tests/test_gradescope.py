"""Gradescope, simulated: unpack the autograder zip into a temporary root laid out like /autograder,
run `run_autograder` with this venv's python (setup.sh needs the network, so it is only checked
statically and for failing loudly), and validate every results.json against Gradescope's format."""
import json
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import jsonschema
import pytest

from autograder import cli
from autograder.authoring import assignments, build, bundle
from autograder.checking.remote import Student
from autograder.grading import gradescope, gradescope_access, gradescope_schema, gradescope_zip, results, runner
from autograder.sandbox.lifecycle import Sandbox
from autograder.sandbox.limits import Limits

SCHEMA = json.loads((Path(__file__).parent / "data" / "gradescope_results.schema.json").read_text())
FINISHED = [a.id for a in assignments.available() if a.finished]
FIRST = FINISHED[0]
# Full grading through the zip for one assignment (the fastest): every staff solution already gets
# full marks in its own tests/test_<id>_grading.py, and nothing in the zip is per-assignment code.
FULL = "attention" if "attention" in FINISHED else FIRST
ROOT_ONLY = os.geteuid() == 0


def usable_worker_user() -> str:
    """'nobody' when we are root and nobody can run this python and import the engine; else '' (off)."""
    if not ROOT_ONLY:
        return ""
    try:
        user = pwd.getpwnam("nobody")
    except KeyError:
        return ""
    try:
        probe = subprocess.run([sys.executable, "-I", "-c", "import numpy, autograder"], user=user.pw_uid,
                               group=user.pw_gid, extra_groups=[], cwd="/", capture_output=True, timeout=60)
    except OSError:  # e.g. this python lives under root's home
        return ""
    return "nobody" if probe.returncode == 0 else ""


WORKER_USER = usable_worker_user()


@pytest.fixture(scope="module")
def workdir():
    """A world-traversable folder (pytest's own tmp is root-only, which would hide lock-down mistakes)."""
    path = Path(tempfile.mkdtemp(prefix="lmgrade-gs-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


class Lazy(dict):
    """Built on first use, so that one broken assignment fails only its own tests."""

    def __init__(self, make):
        super().__init__()
        self.make = make

    def __missing__(self, key):
        self[key] = value = self.make(key)
        return value


@pytest.fixture(scope="module")
def zips(workdir):
    return Lazy(lambda i: gradescope_zip.build_zip(assignments.get(i), workdir / "zips" / f"{i}.zip"))


@pytest.fixture(scope="module")
def staff_notebooks(workdir):
    def write(assignment_id):
        path = workdir / "staff" / f"{assignment_id}.ipynb"
        path.parent.mkdir(exist_ok=True)
        path.write_text(build.notebook(assignments.get(assignment_id), "solution"))
        return path

    return Lazy(write)


def unpack(zip_path: Path, root: Path) -> Path:
    """What Gradescope does: the zip in source/, run_autograder beside it, empty submission/ and results/."""
    root.mkdir(parents=True)
    root.chmod(0o755)
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(root / "source")
        for info in zf.infolist():  # zipfile drops the mode bits; Gradescope keeps them
            (root / "source" / info.filename).chmod((info.external_attr >> 16) or 0o644)
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")
    (root / "submission").mkdir()
    (root / "results").mkdir()
    return root


@pytest.fixture(scope="module")
def roots(workdir, zips):
    """One unpacked root per assignment, shared so the selftest's warm reference cache is reused."""
    return Lazy(lambda i: unpack(zips[i], workdir / "roots" / i))


def run_autograder(root: Path, worker_user: str = WORKER_USER, python: str = sys.executable):
    env = {**os.environ, "LMGRADE_AUTOGRADER_ROOT": str(root), "LMGRADE_PYTHON": python,
           "LMGRADE_WORKER_USER": worker_user}
    proc = subprocess.run(["bash", str(root / "run_autograder")], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((root / "results" / "results.json").read_text())
    jsonschema.validate(doc, SCHEMA)
    assert gradescope_schema.validate(doc) == []
    return proc, doc


def submit(root: Path, files: dict[str, Path | str]) -> None:
    shutil.rmtree(root / "submission", ignore_errors=True)
    (root / "submission").mkdir()
    for rel, content in files.items():
        path = root / "submission" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copy(content, path)
        else:
            path.write_text(content)


# ---- the zip ------------------------------------------------------------------------------------

@pytest.mark.parametrize("assignment_id", FINISHED)
def test_zip_holds_installer_grader_checks_reference_and_data(zips, assignment_id):
    with zipfile.ZipFile(zips[assignment_id]) as zf:
        names = set(zf.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in zf.infolist()}
        setup = zf.read("setup.sh").decode()
        engine = {n.removeprefix("engine/"): zf.read(n) for n in names if n.startswith("engine/autograder/")}
        config = json.loads(zf.read(gradescope_zip.CONFIG))
    a = f"assignments/{assignment_id}"
    assert {"setup.sh", "run_autograder", "requirements.lock", "engine/pyproject.toml", f"{a}/meta.toml",
            f"{a}/public_checks.py", f"{a}/hidden_checks.py", f"{a}/public_fixtures.json",
            f"solutions/{assignment_id}.py", f"starter_notebooks/{assignment_id}.ipynb"} <= names
    assert f"{a}/source.py" not in names and not any("__pycache__" in n for n in names)
    assert {f"cache/{config['data']}/{s}.txt" for s in ("train", "validation", "test")} <= names
    assert modes["setup.sh"] & 0o111 and modes["run_autograder"] & 0o111
    assert engine == bundle.engine_files()  # the engine the tests below run is the one in the zip
    assert config["assignment"] == assignment_id
    # Pinned, CPU-only torch, the same pin as requirements.lock; pip only.
    lock_pin = next(line for line in (assignments.ROOT / "requirements.lock").read_text().splitlines()
                    if line.startswith("torch=="))
    assert f"TORCH_PIN='{lock_pin}'" in setup
    assert "--index-url \"$TORCH_INDEX\"" in setup and "https://download.pytorch.org/whl/cpu" in setup
    commands = [line for line in setup.splitlines() if not line.lstrip().startswith("#")]
    assert "set -euo pipefail" in commands and not any("conda" in line for line in commands)
    assert not re.search(r"@[A-Z_]+@", setup)  # every placeholder filled


def test_setup_and_run_autograder_are_valid_bash(roots):
    for name in ("setup.sh", "run_autograder"):
        proc = subprocess.run(["bash", "-n", str(roots[FIRST] / "source" / name)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


def test_setup_fails_loudly(tmp_path):
    """A failing step stops setup.sh with a message and a non-zero status (here: venv creation)."""
    fake = tmp_path / "python3.11"
    fake.write_text("#!/bin/sh\ncase \"$*\" in *'-m venv'*) echo 'no space left' >&2; exit 3;; esac\nexit 0\n")
    fake.chmod(0o755)
    script = tmp_path / "source" / "setup.sh"
    script.parent.mkdir()
    script.write_text((gradescope_zip.TEMPLATES / "setup.sh").read_text())
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHON": str(fake), "LMGRADE_VENV": str(tmp_path / "venv")})
    assert proc.returncode != 0
    assert "lmgrade setup FAILED" in proc.stderr and "-m venv" in proc.stderr


ROOT_SETUP = pytest.mark.skipif(not ROOT_ONLY, reason="setup.sh runs as root (it chowns source/ to root)")


def fake_python(folder: Path, log: Path) -> Path:
    """A `python3.11` that makes venvs whose python logs every call instead of installing anything."""
    venv_python = f"#!/bin/sh\necho \"$0 $*\" >> {log}\n"
    script = folder / "python3.11"
    script.write_text(f"""#!/bin/sh
case "$*" in
  *'-m venv'*) dir=$(eval echo \\${{$#}}); mkdir -p "$dir/bin"
               printf '%s' '{venv_python}' > "$dir/bin/python"; chmod 755 "$dir/bin/python"; exit 0;;
  *-c*) exit 0;;
esac
exit 0
""")
    script.chmod(0o755)
    return script


@ROOT_SETUP
def test_setup_honours_its_documented_overrides(tmp_path):
    """PYTHON, LMGRADE_VENV, LMGRADE_TORCH_INDEX and LMGRADE_WORKER_USER, as docs/course-staff.md
    describes them: the venv where asked, torch from the index given, the self-test on this root."""
    log = tmp_path / "calls.log"
    script = tmp_path / "root" / "source" / "setup.sh"
    script.parent.mkdir(parents=True)
    script.write_text((gradescope_zip.TEMPLATES / "setup.sh").read_text().replace("@TORCH_PIN@", "torch==9.9.9"))
    venv = tmp_path / "opt" / "venv"
    env = {"PATH": "/usr/bin:/bin", "PYTHON": str(fake_python(tmp_path, log)), "LMGRADE_VENV": str(venv),
           "LMGRADE_TORCH_INDEX": "file:///srv/wheels", "LMGRADE_WORKER_USER": ""}
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    calls = log.read_text().splitlines()
    python = f"{venv}/bin/python"
    assert all(call.startswith(python + " ") for call in calls), calls
    assert any("install --no-deps --index-url file:///srv/wheels torch==9.9.9" in c for c in calls), calls
    assert calls[-1] == f"{python} -I -m autograder.grading.gradescope selftest --root {tmp_path / 'root'}"
    assert "apt-get" not in proc.stdout + proc.stderr and "== worker user (none)" in proc.stdout
    assert stat.S_IMODE((tmp_path / "root" / "source").stat().st_mode) == 0o700


WHEELS = os.environ.get("LMGRADE_TEST_WHEELS", "")


@ROOT_SETUP
@pytest.mark.slow
@pytest.mark.skipif(not WHEELS, reason="LMGRADE_TEST_WHEELS=<folder of wheels> runs the offline recipe (minutes)")
def test_the_offline_recipe_installs_and_grades(zips, staff_notebooks, workdir):
    """docs/course-staff.md's recipe, for real: setup.sh from a folder of wheels into a temporary
    root, its self-test, then run_autograder on the staff solution with the venv it made."""
    root = unpack(zips[FULL], workdir / "recipe")
    venv = root / "opt" / "lmgrade" / "venv"
    python = Path(sys.executable)  # a venv's python makes a venv from its base interpreter
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": WHEELS, "PYTHON": str(python),
           "LMGRADE_VENV": str(venv), "LMGRADE_WORKER_USER": WORKER_USER}
    setup = subprocess.run(["bash", str(root / "source" / "setup.sh")], env=env, capture_output=True, text=True,
                           timeout=1200)
    assert setup.returncode == 0, setup.stdout[-3000:] + setup.stderr[-3000:]
    assert setup.stdout.count(": OK") == 2 and "lmgrade setup finished" in setup.stdout
    submit(root, {f"{FULL}.ipynb": staff_notebooks[FULL]})
    _, doc = run_autograder(root, python=str(venv / "bin" / "python"))
    assert doc["tests"] and all(t["status"] == "passed" for t in doc["tests"])


def docs_settings() -> dict[str, tuple[int, int, int]]:
    """assignment -> (memory GB, at least GB, timeout minutes), from docs/course-staff.md's table."""
    text = (assignments.ROOT / "docs" / "course-staff.md").read_text()
    section = text.split("\n## Gradescope\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \|.*\| (\d+) GB \(at least (\d+) GB\) \| (\d+) min \|$", section, re.M)
    return {a: (int(memory), int(least), int(minutes)) for a, memory, least, minutes in rows}


def test_the_settings_table_lists_every_assignment_once():
    assert sorted(docs_settings()) == sorted(assignments.IDS) == sorted(gradescope_zip.SETTINGS)


@pytest.mark.parametrize("assignment_id", assignments.IDS)
def test_gradescope_build_prints_the_docs_and_the_settings_in_them(assignment_id, tmp_path, monkeypatch, capsys):
    def fake_build(assignment, dest, leaderboard=False):
        Path(dest).write_bytes(b"PK")
        return Path(dest)

    monkeypatch.setattr(gradescope_zip, "build_zip", fake_build)
    assert cli.main(["gradescope", "build", "--assignment", assignment_id, "--output", str(tmp_path / "a.zip")]) == 0
    out = capsys.readouterr().out
    assert "README" not in out
    page, anchor = re.search(r"\(why: ([\w/.-]+\.md)#([\w-]+)\)", out).groups()
    headings = re.findall(r"^#+ (.+)$", (assignments.ROOT / page).read_text(), re.M)
    assert anchor in [re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings]
    memory, least, minutes = map(int, re.search(r"memory (\d+) GB \(at least (\d+) GB\), timeout (\d+) minutes",
                                                out).groups())
    assert (memory, least, minutes) == docs_settings()[assignment_id]
    outline = (tmp_path / "a-written-outline.md").read_text()  # the PDF assignment's questions, in order
    titles = re.findall(r"^\d+\. (Written question \d+: .+)$", outline, re.M)
    assert len(titles) >= 2 and titles[0].startswith("Written question 1:") and "lmgrade export" in outline


# ---- grading on the simulated Gradescope --------------------------------------------------------

@pytest.mark.parametrize("solution_passes, starter_score, status", [(True, 0.0, 0), (False, 0.0, 1), (True, 1.0, 1)])
def test_selftest_demands_full_marks_and_zero(roots, monkeypatch, capsys, solution_passes, starter_score, status):
    """setup.sh's last step. Real grading of both notebooks is what the tests below do through
    run_autograder; here the grades are made up, to see that selftest fails the image build unless
    the staff solution passes every check and the starter scores nothing."""
    root = roots[FIRST]
    checks = assignments.get(FIRST).checks()
    graded = []

    def fake_grade(path, assignment, **kwargs):
        staff = "solution_notebooks" in str(path)
        graded.append(Path(path).relative_to(root / "source").as_posix())
        report = runner.Report(assignment.id, str(path), "cpu")
        for i, fn in enumerate(checks):
            spec = fn.lmgrade_check
            passed = solution_passes if staff else (i == 0 and starter_score > 0)
            report.results.append(runner.CheckResult(spec.name, spec.question, spec.title, spec.points * passed,
                                                     spec.points, passed, "", spec.public, spec.extra))
        return report

    for var in ("LMGRADE_ROOT", "LMGRADE_CACHE", "LMGRADE_WORKER_USER"):  # selftest sets them; restore after
        monkeypatch.setenv(var, os.environ.get(var, ""))
    monkeypatch.setattr(runner, "grade", fake_grade)
    assert gradescope.selftest(root) == status
    assert graded == [f"solution_notebooks/{FIRST}.ipynb", f"starter_notebooks/{FIRST}.ipynb"]
    assert capsys.readouterr().out.count(": OK") == 2 - status


@pytest.mark.parametrize("assignment_id", [FULL])
def test_staff_solution_in_an_odd_folder_gets_full_marks(roots, staff_notebooks, assignment_id):
    root = roots[assignment_id]
    starter = assignments.get(assignment_id).starter_path
    submit(root, {f"My HW (final) ü/{assignment_id} copy 2.ipynb": staff_notebooks[assignment_id],
                  # debris a zip from a Mac or a Jupyter folder brings along: never graded
                  f"__MACOSX/My HW (final) ü/._{assignment_id} copy 2.ipynb": starter,
                  f"My HW (final) ü/.ipynb_checkpoints/{assignment_id}-checkpoint.ipynb": starter,
                  ".hidden.ipynb": starter, "helper.py": "x = 1\n"})
    _, doc = run_autograder(root)
    assert doc["tests"] and all(t["status"] == "passed" for t in doc["tests"]), \
        [t for t in doc["tests"] if t["status"] != "passed"] or doc["output"]
    checks = assignments.get(assignment_id, root / "source").checks()
    assert len(doc["tests"]) == len(checks)
    assert doc["score"] == pytest.approx(sum(c.lmgrade_check.points for c in checks))
    assert f"Graded My HW (final) ü/{assignment_id} copy 2.ipynb." in doc["output"]
    assert doc["stdout_visibility"] == "hidden"
    if ROOT_ONLY:  # the grader's files and the results are root-only
        for sub in ("source", "results"):
            mode = (root / sub).stat()
            assert stat.S_IMODE(mode.st_mode) == 0o700 and mode.st_uid == 0


@pytest.mark.parametrize("assignment_id", FINISHED)
def test_starter_gets_zero(roots, assignment_id):
    root = roots[assignment_id]
    submit(root, {"starter.ipynb": assignments.get(assignment_id).starter_path})
    _, doc = run_autograder(root)
    assert doc["score"] == 0 and doc["tests"] and all(t["status"] == "failed" for t in doc["tests"])
    assert {t["visibility"] for t in doc["tests"]} == {"visible", "after_published"}


def test_missing_submission_says_what_to_upload(roots):
    root = roots[FIRST]
    submit(root, {"notes.txt": "I could not finish", "plots/loss.png": "png"})
    _, doc = run_autograder(root)
    assert doc["score"] == 0 and doc["tests"] == []
    assert "no notebook (.ipynb) or Python file (.py)" in doc["output"]
    assert "notes.txt, plots/loss.png" in doc["output"] and f"{FIRST}.ipynb" in doc["output"]
    shutil.rmtree(root / "submission")
    _, doc = run_autograder(root)
    assert "submission folder is missing" in doc["output"]


def test_ambiguous_submission_lists_what_was_found(roots):
    root = roots[FIRST]
    starter = assignments.get(FIRST).starter_path.read_text().replace(f'"assignment": "{FIRST}"', '"assignment": "x"')
    submit(root, {"a/first try.ipynb": starter, "second try.ipynb": starter})
    _, doc = run_autograder(root)
    assert doc["score"] == 0 and "2 notebooks (a/first try.ipynb, second try.ipynb)" in doc["output"]


def test_results_stay_valid_when_python_cannot_start(roots):
    root = roots[FIRST]
    (root / "results" / "results.json").write_text('{"score": ')  # left half-written by anything earlier
    proc, doc = run_autograder(root, python="/bin/false")
    assert doc["score"] == 0 and "failed to start" in doc["output"]
    assert "writing a fallback" in proc.stderr


@pytest.mark.skipif(not ROOT_ONLY, reason="the worker user is only used when grading as root")
def test_missing_worker_user_fails_closed(roots):
    """As root, student code must never run as root: no worker user, no grading."""
    root = roots[FIRST]
    submit(root, {"x.ipynb": assignments.get(FIRST).starter_path})
    _, doc = run_autograder(root, worker_user="lmgrade-no-such-user")
    assert doc["tests"] == [] and doc["score"] == 0
    assert "not set up correctly" in doc["output"] and "lmgrade-no-such-user" in doc["output"]


@pytest.mark.skipif(not ROOT_ONLY, reason="needs root to change owners and switch users")
def test_lock_down_keeps_the_worker_user_out(workdir):
    try:
        user = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user nobody here")
    root = workdir / "lockdown"
    (root / "source").mkdir(parents=True)
    (root / "source" / gradescope_zip.CONFIG).write_text("{}")
    (root / "results").mkdir()
    (root / gradescope_access.METADATA).write_text(
        '{"previous_submissions": [{"results": {"tests": ["hidden feedback"]}}]}')
    (root / gradescope_access.METADATA).chmod(0o644)  # as a platform might leave it
    for path in (root, root / "source", root / "results"):
        path.chmod(0o777)
    assert len(gradescope_access.access_as(user, root / "source", root / "results")) == 5  # the probe sees open doors
    gradescope_access.lock_down(root, user)
    assert gradescope_access.access_as(user, root / "source", root / "results") == []
    assert not (root / "results" / ".lmgrade-probe").exists()
    # a real worker, started as grading starts it, can list nothing under the root nor read the metadata
    reader = [{"index": 0, "number": 1, "source": "import os\ndef peek(root):\n    found = []\n"
               "    for look in (lambda: os.listdir(root), lambda: open(root + '/submission_metadata.json').read()):\n"
               "        try:\n            found.append(look())\n        except OSError:\n            pass\n"
               "    return found\n"}]
    try:
        runs = subprocess.run([sys.executable, "-I", "-c", "pass"], user=user.pw_uid, group=user.pw_gid,
                              extra_groups=[], cwd="/", capture_output=True).returncode == 0
    except OSError:
        runs = False
    if runs:  # else this checkout's Python sits in a private folder (the shell probe above still ran)
        with Sandbox(reader, limits=Limits(call_timeout=30, load_timeout=30, worker_user="nobody")) as box:
            assert Student(box, timeout=30).peek(str(root)) == []


def test_grader_crash_still_leaves_valid_results(roots, monkeypatch, capsys):
    root = roots[FIRST]
    submit(root, {"x.ipynb": assignments.get(FIRST).starter_path})
    for var in ("LMGRADE_ROOT", "LMGRADE_CACHE"):  # run() points these at the root; restore them after
        monkeypatch.setenv(var, os.environ.get(var, ""))
    monkeypatch.setenv("LMGRADE_WORKER_USER", "")

    def broken(*args, **kwargs):
        raise MemoryError("out of memory in the grader")

    monkeypatch.setattr(runner, "grade", broken)
    assert gradescope.run(root) == 1
    doc = json.loads((root / "results" / "results.json").read_text())
    jsonschema.validate(doc, SCHEMA)
    assert doc["score"] == 0 and "MemoryError: out of memory in the grader" in doc["output"]
    assert "Traceback" in capsys.readouterr().err


# ---- finding the submission and validating results (no grading) ---------------------------------

def test_find_submission_prefers_the_notebook_and_the_one_for_this_assignment(tmp_path):
    (tmp_path / "hw.py").write_text("def f(): pass\n")
    (tmp_path / "deep" / "er").mkdir(parents=True)
    (tmp_path / "deep" / "er" / "HW.IPYNB").write_text("{}")
    assert gradescope.find_submission(tmp_path, "ngram") == tmp_path / "deep" / "er" / "HW.IPYNB"
    (tmp_path / "scratch.ipynb").write_text("{}")
    with pytest.raises(gradescope.SubmissionProblem, match="2 notebooks"):
        gradescope.find_submission(tmp_path, "ngram")
    (tmp_path / "scratch.ipynb").write_text(json.dumps({"metadata": {"lmgrade": {"assignment": "ngram"}}}))
    assert gradescope.find_submission(tmp_path, "ngram") == tmp_path / "scratch.ipynb"
    (tmp_path / "deep" / "er" / "HW.IPYNB").unlink()
    (tmp_path / "scratch.ipynb").unlink()
    assert gradescope.find_submission(tmp_path, "ngram") == tmp_path / "hw.py"


def test_find_submission_ignores_links_to_the_graders_files(tmp_path):
    """A symlink (from a git or zip upload) to the reference must not be graded as the student's work."""
    sub = tmp_path / "submission"
    sub.mkdir()
    (sub / "ngram.py").symlink_to(assignments.get("ngram").reference_path)
    (sub / "linked").symlink_to(assignments.ROOT / "starter_notebooks", target_is_directory=True)
    with pytest.raises(gradescope.SubmissionProblem, match="it was empty"):
        gradescope.find_submission(sub, "ngram")


def test_messages_stay_short_with_thousands_of_files(tmp_path):
    for i in range(3000):
        (tmp_path / f"file{i:04d}_{'x' * 60}.txt").write_text("")
    with pytest.raises(gradescope.SubmissionProblem) as info:
        gradescope.find_submission(tmp_path, "ngram")
    assert "and 2980 more" in str(info.value) and len(str(info.value)) < 3000
    doc = results.failure_json("y" * 250_000)  # results.py clips every text field well below Gradescope's limit
    assert len(doc["output"]) < gradescope_schema.RESULT_LIMIT and gradescope_schema.validate(doc) == []


@pytest.mark.parametrize("doc, problem", [
    ({"score": float("nan"), "tests": []}, "score"),
    ({"score": 1, "tests": [], "output": "x" * 100_000}, "output"),
    ({"score": 1, "tests": [{"score": 1, "points": 2}]}, "unknown keys"),
    ({"score": 1, "tests": [{"score": 1, "status": "error"}]}, "status"),
    ({"tests": [{"max_score": 1}]}, "no score"),
    ([], "not a JSON object"),
])
def test_validate_rejects_what_gradescope_would_not_accept(doc, problem):
    assert any(problem in p for p in gradescope_schema.validate(doc))


def test_validate_file_rejects_empty_and_non_standard_json(tmp_path):
    path = tmp_path / "results.json"
    path.write_text("")
    assert gradescope_schema.validate_file(path)
    path.write_text('{"score": NaN, "tests": []}')
    assert gradescope_schema.validate_file(path)
    path.write_text('{"score": 0, "tests": []}')
    assert gradescope_schema.validate_file(path) == []


@pytest.mark.parametrize("content, status, words", [
    ('{"cells": [], "x": ' + "[" * 985 + "]" * 985 + "}", "unreadable", "nested more than"),
    ("", "unreadable", "empty"),
    (json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "source": "def f():\n    pass\n", "outputs": []}],
                 "metadata": {"lmgrade": {"assignment": "not-this-one"}}}), "wrong assignment", "`not-this-one`"),
])
def test_an_unreadable_or_wrong_notebook_gets_one_message_and_no_grading(tmp_path, monkeypatch, content, status,
                                                                          words):
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission" / "hw.ipynb").write_text(content)
    monkeypatch.setattr(gradescope, "_prepare", lambda root: (assignments.get(FIRST), None))
    monkeypatch.setattr(runner, "grade", lambda *a, **k: pytest.fail("nothing should be graded"))
    doc = gradescope.grade_submission(tmp_path)
    jsonschema.validate(doc, SCHEMA)
    assert gradescope_schema.validate(doc) == [] and doc["tests"] == [] and doc["score"] == 0
    assert f"({status})" in doc["output"] and words in doc["output"] and doc["output"].count(words) == 1


def test_odd_text_from_the_student_never_breaks_results(tmp_path, monkeypatch, capsys):
    """A non-UTF-8 file name and a report full of lone surrogates and escapes: a valid results.json."""
    name = os.fsdecode(b"caf\xe9.ipynb")
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission" / name).write_text(assignments.get(FIRST).starter_path.read_text())
    odd = "lone \udcff and \ud800, an escape \x1b[2J"

    def fake_grade(path, assignment, **kwargs):
        report = runner.Report(assignment=assignment.id, submission=str(path), device="cpu", notes=[odd])
        report.results = [runner.CheckResult("c", "1", "t " + odd, 0.0, 1.0, False, odd, True)]
        return report

    monkeypatch.setattr(gradescope, "_prepare", lambda root: (assignments.get(FIRST), None))
    monkeypatch.setattr(runner, "grade", fake_grade)
    doc = gradescope.grade_submission(tmp_path)
    jsonschema.validate(doc, SCHEMA)
    assert gradescope_schema.validate(doc) == []
    text = json.dumps(doc, ensure_ascii=False) + capsys.readouterr().out
    assert "caf?.ipynb" in text and "lone ? and ?" in text and "\\x1b[2J" in text
    assert "\x1b" not in text and all(not 0xD800 <= ord(c) <= 0xDFFF for c in text)
