"""`lmgrade` as TAs and students run it: exit codes, the table, and Gradescope results.json."""
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from autograder import cli
from autograder.authoring import assignments
from autograder.grading import runner
from tests.helpers import solution_text

UNWRITTEN = next((i for i in assignments.IDS if i not in {a.id for a in assignments.available()}), None)
SCHEMA = json.loads((Path(__file__).parent / "data" / "gradescope_results.schema.json").read_text())


def lmgrade(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "autograder", *map(str, args)], capture_output=True, text=True,
                          timeout=300, **kwargs)


@pytest.fixture
def solution_py(tmp_path):
    path = tmp_path / "alice_ngram.py"
    path.write_text(solution_text())
    return path


def test_grade_writes_valid_gradescope_results(tmp_path, solution_py):
    out = tmp_path / "results" / "results.json"
    proc = lmgrade("grade", solution_py, "--assignment", "ngram", "--device", "cpu", "--allow-unconfined",
                   "--question", "1", "--question", "4", "--json", out)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, SCHEMA)
    questions = {t["number"] for t in doc["tests"]}
    assert questions == {"1", "4"}
    assert doc["score"] == sum(t["max_score"] for t in doc["tests"]) > 0
    assert {t["visibility"] for t in doc["tests"]} == {"visible", "after_published"}
    assert "Tokens and vocabulary" in proc.stdout and "total" in proc.stdout


def test_starter_scores_zero_and_exit_code_is_still_zero(tmp_path):
    out = tmp_path / "results.json"
    proc = lmgrade("grade", assignments.get("ngram").starter_path, "--assignment", "ngram", "--device", "cpu",
                   "--allow-unconfined", "--question", "1", "--question", "2", "--json", out)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, SCHEMA)
    assert doc["score"] == 0 and all(t["status"] == "failed" for t in doc["tests"])
    assert all("not implemented yet" in t["output"] for t in doc["tests"])


def test_public_check_runs_only_public_checks(tmp_path):
    notebook = tmp_path / "my homework.ipynb"  # the assignment comes from the notebook's metadata
    notebook.write_text(assignments.get("ngram").starter_path.read_text())
    proc = lmgrade("check", notebook)
    assert proc.returncode == 0, proc.stderr
    assert "public checks only" in proc.stdout
    report = runner.grade(notebook, assignments.get("ngram"), public_only=True)
    assert report.results and all(r.public for r in report.results)


@pytest.mark.parametrize("args, message", [
    (["grade", "missing.ipynb", "--assignment", "ngram"], "no such submission"),
    pytest.param(["grade", "x.py", "--assignment", UNWRITTEN or "ngram"], "not written yet",
                 marks=pytest.mark.skipif(UNWRITTEN is None, reason="every assignment is written")),
    (["grade", "x.py", "--assignment", "ngram", "--device", "cuda"], "no CUDA device"),
    (["check", "missing.ipynb"], "does not exist"),
])
def test_wrong_arguments_exit_2_with_a_message(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.py").write_text("")
    if "cuda" in args:
        torch = pytest.importorskip("torch")
        if torch.cuda.is_available():
            pytest.skip("a CUDA device is present")
    assert cli.main(args) == 2
    assert message in capsys.readouterr().err


def test_unknown_assignment_is_an_argument_error():
    proc = lmgrade("grade", "x.py", "--assignment", "nope")
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


def test_grader_failure_exits_1_and_still_leaves_valid_results(tmp_path, solution_py, monkeypatch, capsys):
    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(runner, "grade", broken)
    out = tmp_path / "results.json"
    assert cli.main(["grade", str(solution_py), "--assignment", "ngram", "--device", "cpu", "--allow-unconfined",
                    "--json", str(out)]) == 1
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, SCHEMA)
    assert doc["score"] == 0 and "disk full" in doc["output"]
    assert "disk full" in capsys.readouterr().err


def test_build_check_passes_on_a_clean_tree():
    proc = lmgrade("build", "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ---- devices, version, help, the student bundle, confinement --------------------------------
@pytest.mark.parametrize("device", ["gpu", "cuda0", "CPU", "cuda:", "cuda:x", "mps", ""])
def test_an_unknown_device_exits_2_before_grading(tmp_path, capsys, device):
    with pytest.raises(SystemExit) as info:
        cli.main(["grade", str(tmp_path / "x.py"), "--assignment", "ngram", "--device", device])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "is not a device" in err and "auto, cpu, cuda or cuda:N" in err


@pytest.mark.parametrize("device", ["auto", "cpu", "cuda", "cuda:0", "cuda:12"])
def test_known_devices_are_accepted(device):
    assert cli.device_arg(device) == device


def test_grading_is_on_the_cpu_unless_a_device_is_asked_for():
    """The same score on every machine: a GPU present is not a reason to grade there."""
    args = cli.make_parser().parse_args(["grade", "x.py", "--assignment", "ngram"])
    assert args.device == "cpu"
    assert cli.make_parser().parse_args(["grade", "x.py", "--assignment", "ngram", "--device", "cuda"]).device == "cuda"


def test_version():
    proc = lmgrade("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"lmgrade {cli.version()}"
    assert cli.version()[0].isdigit()


@pytest.mark.parametrize("command", [[], ["build"], ["check"], ["grade"], ["selfcheck"], ["gradescope"],
                                     ["gradescope", "build"]])
def test_every_help_has_an_example(command, capsys):
    with pytest.raises(SystemExit) as info:
        cli.make_parser(bundle=False).parse_args([*command, "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    assert "example" in text and "\n  lmgrade " in text


def test_the_student_bundle_offers_only_what_works_there(tmp_path):
    """A bundle-like tree: the engine, and per assignment only meta.toml and public checks."""
    from autograder.authoring import bundle
    for rel, data in bundle.engine_files().items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    ngram = assignments.get("ngram")
    (tmp_path / "assignments" / "ngram").mkdir(parents=True)
    for name in ("meta.toml", "public_checks.py", "public_fixtures.json"):
        (tmp_path / "assignments" / "ngram" / name).write_bytes((ngram.dir / name).read_bytes())
    env = {k: v for k, v in __import__("os").environ.items() if k != "LMGRADE_ROOT"}
    run = lambda *args: subprocess.run([sys.executable, "-m", "autograder", *args], capture_output=True, text=True,
                                       cwd=tmp_path, env=env, timeout=120)
    helped = run("--help")
    assert helped.returncode == 0 and "check" in helped.stdout and "check_notebook()" in helped.stdout
    for staff in ("build", "grade", "gradescope", "selfcheck"):
        assert staff not in helped.stdout.split("positional arguments")[1].split("options")[0]
        refused = run(staff, "--help")
        assert refused.returncode == 2 and "invalid choice" in refused.stderr
    assert run("check", "--help").returncode == 0
    full = cli.make_parser(bundle=False).format_help()
    assert all(name in full for name in ("build", "grade", "gradescope", "selfcheck"))
    assert not cli._in_bundle()  # this repository has solutions/ and hidden checks


def test_grading_unconfined_is_refused_without_the_flag(tmp_path, solution_py, monkeypatch, capsys):
    from autograder.sandbox import limits
    monkeypatch.setattr(limits, "confinement", lambda limits=None: "none")
    graded = []
    monkeypatch.setattr(runner, "grade", lambda *a, **k: graded.append(a))
    (tmp_path / "subs").mkdir()
    for args in ([str(solution_py)], [str(tmp_path / "subs"), "--out", str(tmp_path / "out")]):
        assert cli.main(["grade", *args, "--assignment", "ngram", "--device", "cpu"]) == 2
        err = capsys.readouterr().err
        assert "Refusing to grade" in err and "--allow-unconfined" in err and "hidden checks" in err
    assert graded == [] and not (tmp_path / "out" / "grades.csv").exists()
    monkeypatch.setattr(limits, "confinement", lambda limits=None: "landlock")
    cli._require_confinement(cli.make_parser(bundle=False).parse_args(["grade", "x", "--assignment", "ngram"]))


def test_allow_unconfined_grades_anyway(tmp_path, solution_py, monkeypatch):
    from autograder.sandbox import limits
    monkeypatch.setattr(limits, "confinement", lambda limits=None: "none")
    out = tmp_path / "results.json"
    assert cli.main(["grade", str(solution_py), "--assignment", "ngram", "--device", "cpu", "--question", "1",
                     "--json", str(out), "--allow-unconfined"]) == 0
    assert json.loads(out.read_text())["score"] > 0


def test_a_cuda_index_the_machine_lacks_is_an_argument_error(tmp_path, capsys, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    (tmp_path / "x.py").write_text("def f():\n    return 1\n")
    assert cli.main(["grade", str(tmp_path / "x.py"), "--assignment", "ngram", "--device", "cuda:3"]) == 2
    assert "has 1 CUDA device(s) (cuda:0 to cuda:0)" in capsys.readouterr().err
